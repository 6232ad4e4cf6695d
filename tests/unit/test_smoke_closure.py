"""Closure conformance (twinbuild/smoke/closure.py): each difference between the image and its
lock is one failing check naming the package, both versions and what brought it."""

from __future__ import annotations

import dataclasses

from twinbuild.closure.lock_model import BaseState, ImageLock, LockedApt, LockedDist, LockedGit
from twinbuild.smoke.closure import check_closure
from twinbuild.smoke.conformance import Checkout, Collected

COMMIT = "b5588e83de86412a48689a6583a4b567e75f7acc"
SOURCE = "pins/lock/cu13-amd64.toml"


def lock(*, captured: bool = False) -> ImageLock:
    return ImageLock(
        image="cu13-amd64",
        variant="cu13",
        arch="linux/amd64",
        python="3.12",
        platform="x86_64-manylinux_2_39",
        manifest_digest="sha256:" + "0" * 64,
        base=BaseState(image="base", captured=captured),
        resolver="uv",
        dists=(
            LockedDist(name="nvidia-cutlass-dsl", version="4.6.2", pins=("nvidia-cutlass-dsl",)),
            LockedDist(name="dep-a", version="1.0", via=("solid",)),
            LockedDist(name="numpy", version="2.1.0", origin="base"),
        ),
        git=(
            LockedGit(
                pin="torch-memory-saver", repo="r", ref="", commit=COMMIT, dist="torch_memory_saver"
            ),
        ),
        apt=(
            LockedApt(pin="tmux", package="tmux", version="3.4-1"),
            LockedApt(pin="nvtop", package="nvtop", version="", note="no capture"),
        ),
    )


def image(**over: object) -> Collected:
    dists = {
        "nvidia-cutlass-dsl": {"name": "nvidia-cutlass-dsl", "version": "4.6.2"},
        "dep-a": {"name": "dep-a", "version": "1.0"},
        "numpy": {"name": "numpy", "version": "2.1.0"},
        "torch-memory-saver": {
            "name": "torch_memory_saver", "version": "0.0.9",
            "direct_url": {"url": "https://x", "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
        },
    }  # fmt: skip
    dists.update(over)
    return Collected.from_json({
        "python": "3.12", "distributions": [d for d in dists.values() if d],
        "apt": {"tmux": "3.4-1", "nvtop": "3.0"},
    })  # fmt: skip


def test_the_image_of_the_lock_passes() -> None:
    assert check_closure(lock(), image(), source=SOURCE) == []


def test_a_layer_that_force_installs_an_older_locked_package_fails() -> None:
    # the #2600 class: a later layer puts nvidia-cutlass-dsl 4.6.0 back over the locked 4.6.2
    older = {"name": "nvidia-cutlass-dsl", "version": "4.6.0"}
    (found,) = check_closure(lock(), image(**{"nvidia-cutlass-dsl": older}), source=SOURCE)
    assert found.outcome == "failed"
    assert (found.package, found.locked, found.found, found.brought_by) == (
        "nvidia-cutlass-dsl",
        "4.6.2",
        "4.6.0",
        "layer",
    )
    assert found.message == (
        "pins/lock/cu13-amd64.toml: nvidia-cutlass-dsl: the image holds another version than "
        "the lock's (lock 4.6.2, image 4.6.0, brought by layer)"
    )


def test_missing_extra_and_base_ones_are_each_one_check() -> None:
    found = check_closure(
        lock(),
        image(
            **{
                "dep-a": {},
                "stray": {"name": "stray", "version": "0.1"},
                "numpy": {"name": "numpy", "version": "1.26.4"},
            }
        ),
        source=SOURCE,
    )
    by = {f.package: (f.locked, f.found, f.brought_by) for f in found}
    assert by == {
        "dep-a": ("1.0", "", "layer"),
        "numpy": ("2.1.0", "1.26.4", "base"),
        "stray": ("", "0.1", "the base or a layer"),  # no capture: the lock cannot tell
    }
    (stray,) = check_closure(lock(captured=True), image(stray={"name": "stray", "version": "1"}),
                             source=SOURCE)  # fmt: skip
    assert stray.brought_by == "layer"


def test_a_git_pin_at_another_commit_and_an_apt_version_fail() -> None:
    other = "0" * 40
    moved = {
        "name": "torch_memory_saver", "version": "0.0.9",
        "direct_url": {"url": "https://x", "vcs_info": {"vcs": "git", "commit_id": other}},
    }  # fmt: skip
    found = check_closure(lock(), image(**{"torch-memory-saver": moved}), source=SOURCE)
    assert [(f.package, f.locked, f.found) for f in found] == [
        ("torch-memory-saver", COMMIT, other)
    ]
    collected = image()
    collected = Collected(python="3.12", dists=collected.dists, apt={"tmux": "3.3", "nvtop": "x"})
    (apt,) = check_closure(lock(), collected, source=SOURCE)
    assert (apt.package, apt.locked, apt.found) == ("tmux", "3.4-1", "3.3")  # nvtop: not locked


def test_a_local_lock_takes_the_embedded_bases_capture_as_the_bases() -> None:
    """A local image: its lock holds the layers, the embedded base's capture (per machine, in the
    cache) the rest; a base distribution at another version fails naming the base."""
    from twinbuild.closure.capture import BaseCapture
    from twinbuild.smoke.closure import with_base

    layers = ImageLock(
        image="cu13-amd64", variant="cu13", arch="linux/amd64", python="3.11",
        platform="x86_64-manylinux_2_36", manifest_digest="sha256:" + "0" * 64,
        base=BaseState(image="embedded", captured=False), resolver="uv", profile="local",
        dists=(LockedDist(name="setuptools", version="79.0.1", pins=("setuptools",)),),
    )  # fmt: skip
    capture = BaseCapture(
        image="twinbuild/base:1@sha256:" + "1" * 64, digest="sha256:" + "2" * 64,
        dists={"pip": "23.0.1", "setuptools": "66.1.1"}, apt={},
    )  # fmt: skip
    held = with_base(layers, capture)
    assert [(d.name, d.version, d.origin) for d in held.dists] == [
        ("pip", "23.0.1", "base"), ("setuptools", "79.0.1", "layer"),  # the layer's wins
    ]  # fmt: skip
    assert held.base.captured
    found = Collected.from_json({"python": "3.11", "apt": {}, "distributions": [
        {"name": "pip", "version": "22.0"}, {"name": "setuptools", "version": "79.0.1"},
    ]})  # fmt: skip
    (result,) = check_closure(held, found, source="pins/lock/local/cu13-amd64.toml")
    assert result.message == (
        "pins/lock/local/cu13-amd64.toml: pip: the image holds another version than the lock's "
        "(lock 23.0.1, image 22.0, brought by base)"
    )


def test_a_git_pin_replaced_by_an_index_release_fails() -> None:
    """Attack: the git pin's distribution comes from an index wheel (no PEP 610 vcs_info), so
    no commit is recorded at all; the lock holds a commit, the image cannot show it."""
    from_index = {"name": "torch_memory_saver", "version": "0.0.9"}
    found = check_closure(lock(), image(**{"torch-memory-saver": from_index}), source=SOURCE)
    assert [(f.package, f.locked, f.found, f.brought_by) for f in found] == [
        ("torch-memory-saver", COMMIT, "0.0.9 (not from git)", "layer")
    ]
    assert found[0].message == (
        f"{SOURCE}: torch-memory-saver: installed from another source than the lock's git "
        f"commit (lock {COMMIT}, image 0.0.9 (not from git), brought by layer)"
    )


def test_a_git_pin_missing_from_the_image_fails() -> None:
    """Attack: the git pin's distribution is not in the image at all; its entry is only in
    the lock's git table, never in its dists, so the 'locked but not in the image' pass missed it."""
    found = check_closure(lock(), image(**{"torch-memory-saver": {}}), source=SOURCE)
    assert [(f.package, f.locked, f.found) for f in found] == [("torch-memory-saver", COMMIT, "")]


def test_a_git_pin_the_profile_left_out_is_not_looked_for_but_held_to_its_commit_if_there() -> None:
    """The local profile leaves a git pin out where it has no mirror (the image's label names
    it, its per-pin check skips): absent, it is no closure failure; present anyway, its commit
    still counts."""
    git = lock().git[0]
    left_out = frozenset({git.pin})
    absent = check_closure(lock(), image(**{"torch-memory-saver": {}}), source=SOURCE,
                           left_out=left_out)  # fmt: skip
    assert absent == []
    other = "2" * 40
    moved = {
        "name": "torch_memory_saver", "version": "0.0.9",
        "direct_url": {"url": "https://x", "vcs_info": {"vcs": "git", "commit_id": other}},
    }  # fmt: skip
    there = image(**{"torch-memory-saver": moved})
    assert [(f.package, f.found) for f in check_closure(
        lock(), there, source=SOURCE, left_out=left_out
    )] == [("torch-memory-saver", other)]  # fmt: skip


def test_a_checkout_at_another_commit_than_the_locks_fails() -> None:
    """Attack: a branch pin checked out (not pip-installed: no dist) is compared by neither check:
    the per-pin one passes any commit of a branch, and the closure one looked only at dists."""
    checkout = LockedGit(pin="megatron-lm", repo="r", ref="miles-main", commit=COMMIT, dist="")
    held = dataclasses.replace(lock(), git=(*lock().git, checkout))
    moved = "1" * 40
    found = dataclasses.replace(
        image(), checkouts={"/root/Megatron-LM": Checkout(commit=moved, ref=None, error=None)}
    )
    paths = {"megatron-lm": "/root/Megatron-LM"}
    assert [(f.package, f.locked, f.found) for f in check_closure(
        held, found, source=SOURCE, checkouts=paths
    )] == [("megatron-lm", COMMIT, moved)]  # fmt: skip
    at_lock = dataclasses.replace(
        found, checkouts={"/root/Megatron-LM": Checkout(commit=COMMIT, ref=None, error=None)}
    )
    assert check_closure(held, at_lock, source=SOURCE, checkouts=paths) == []
    gone = dataclasses.replace(found, checkouts={})
    assert [(f.package, f.found) for f in check_closure(
        held, gone, source=SOURCE, checkouts=paths
    )] == [("megatron-lm", "")]  # fmt: skip
