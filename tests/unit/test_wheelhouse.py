"""The wheel stage: a few pip calls in parallel, each file filed under its own pin."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers import image, mini_project
from twinbuild.builder import wheelhouse
from twinbuild.errors import BuildFailed
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import render, requirement
from twinbuild.util import process


class FakePip:
    """Stands in for ``pip download --no-deps``: one wheel per requirement, or a failure."""

    def __init__(self, refuse: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.refuse = refuse
        self.lock = threading.Lock()

    def __call__(
        self, dest: Path, reqs: Sequence[str], index: str | None, arch: str = "linux/amd64"
    ) -> process.Finished[str]:
        with self.lock:
            self.calls.append(list(reqs))
        if self.refuse is not None and any(r.startswith(self.refuse) for r in reqs):
            return process.Finished(argv=(), code=1, out="", err="ERROR: No matching distribution")
        for req in reqs:
            name = re.split(r"[<>=!~ ]", req, maxsplit=1)[0]
            version = req.partition("==")[2] or "1.0"
            (dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"w")
        return process.Finished(argv=(), code=0, out="", err="")


def test_one_call_per_group_and_each_wheel_in_its_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    monkeypatch.setattr(wheelhouse, "_pip", pip)
    monkeypatch.setattr(wheelhouse, "PER_CALL", 2)
    rendered = render(load(mini_project(tmp_path) / "pins/manifest.toml"), image("rocm"), "local",
                      local_base="x")  # fmt: skip
    pins = [p for p in rendered.installed if p.install == "pip" and p.kind != "git"]
    said: list[str] = []
    counts = wheelhouse.download_wheels(rendered, tmp_path / "ctx", tmp_path / "cache", said.append)
    assert sum(counts.values()) == len(pins)
    assert all(len(call) <= 2 for call in pip.calls)
    assert sorted(r for call in pip.calls for r in call) == sorted(requirement(p) for p in pins)
    assert (
        said[0]
        == f"wheelhouse: downloading {len(pins)} pins ({len(counts)} layers; amd64): started"
    )
    for pin in pins:
        (wheel,) = (tmp_path / "ctx/.twinbuild/wheels" / pin.layer).glob(
            f"{(pin.values.dist or pin.name).replace('-', '_')}-*.whl"
        )
        assert wheel.is_file()
    pip.calls.clear()
    wheelhouse.download_wheels(rendered, tmp_path / "ctx2", tmp_path / "cache", said.append)
    assert pip.calls == []  # all cached now


def test_a_failing_batch_names_the_pin_at_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = render(load(mini_project(tmp_path) / "pins/manifest.toml"), image("rocm"), "local",
                      local_base="x")  # fmt: skip
    bad = next(p for p in rendered.installed if p.install == "pip" and p.kind != "git")
    pip = FakePip(refuse=(bad.values.dist or bad.name))
    monkeypatch.setattr(wheelhouse, "_pip", pip)
    with pytest.raises(BuildFailed) as info:
        wheelhouse.download_wheels(rendered, tmp_path / "ctx", tmp_path / "cache", lambda _: None)
    assert str(info.value).startswith(f"pins.{bad.name}: pip could not download ")
    assert [requirement(bad)] in pip.calls  # retried alone to find the culprit
    assert not list((tmp_path / "cache/wheels").glob(".batch-*"))  # no batch folder left


@pytest.mark.parametrize(
    ("filename", "dist", "ok"),
    [
        ("torch_memory_saver-0.0.9-py3-none-any.whl", "torch-memory-saver", True),
        ("numba-0.65.1-cp311-cp311-manylinux_2_17_x86_64.whl", "numba", True),
        ("numba-0.65.1.tar.gz", "numba", True),
        ("numpy-1.26.4.tar.gz", "numba", False),
        ("README.txt", "numba", False),
    ],
)
def test_names_dist(filename: str, dist: str, ok: bool) -> None:
    assert wheelhouse._names_dist(filename, dist) is ok


def test_both_platforms_in_one_round_each_requirement_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = FakePip()
    monkeypatch.setattr(wheelhouse, "_pip", pip)
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    renders = [render(manifest, image(p), "local", local_base="x") for p in ("cuda", "rocm")]
    wanted = {
        requirement(p)
        for r in renders
        for p in r.installed
        if p.install == "pip" and p.kind != "git"
    }
    said: list[str] = []
    assert wheelhouse.prefetch_wheels(renders, tmp_path / "cache", said.append) == len(wanted)
    asked = [r for call in pip.calls for r in call]
    assert sorted(asked) == sorted(wanted)  # a pin both platforms share is fetched once
    assert len([line for line in said if line.endswith(": started")]) == 1  # one round
    assert wheelhouse.prefetch_wheels(renders, tmp_path / "cache", said.append) == 0


def test_two_builds_at_once_fetch_each_wheel_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`build --jobs 2` prefetches from two threads into one cache: without a lock both saw the
    same wheels missing and filed them through the same `.partial` folders."""
    both_in = threading.Barrier(2)
    pip = FakePip()

    def slow_pip(
        dest: Path, reqs: Sequence[str], index: str | None, arch: str = "linux/amd64"
    ) -> process.Finished[str]:
        threading.Event().wait(0.05)  # long enough for the other thread to look at the cache
        return pip(dest, reqs, index)

    monkeypatch.setattr(wheelhouse, "_pip", slow_pip)
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    renders = [render(manifest, image(p), "local", local_base="x") for p in ("cuda", "rocm")]
    wanted = sorted(
        {
            requirement(p)
            for r in renders
            for p in r.installed
            if p.install == "pip" and p.kind != "git"
        }
    )
    errors: list[BaseException] = []

    def prefetch() -> None:
        both_in.wait()
        try:
            wheelhouse.prefetch_wheels(renders, tmp_path / "cache", lambda _: None)
        except BaseException as exc:  # a race shows up as an exception in either thread
            errors.append(exc)

    threads = [threading.Thread(target=prefetch) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r for call in pip.calls for r in call) == wanted


@pytest.mark.parametrize(
    ("count", "most", "sizes"),
    [
        (0, 12, []),
        (1, 12, [1]),
        (12, 12, [12]),
        (13, 12, [7, 6]),
        (25, 12, [9, 8, 8]),
        (46, 12, [12, 12, 11, 11]),
        (3, 1, [1, 1, 1]),
    ],
)
def test_split_evenly(count: int, most: int, sizes: list[int]) -> None:
    parts = wheelhouse.split_evenly(list(range(count)), most)
    assert [len(part) for part in parts] == sizes
    assert [x for part in parts for x in part] == list(range(count))  # in order, none lost


def test_one_pin_at_a_time_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the benchmark's baseline asks for: one pip call per pin, one call at a time."""
    pip = FakePip()
    monkeypatch.setattr(wheelhouse, "_pip", pip)
    rendered = render(load(mini_project(tmp_path) / "pins/manifest.toml"), image("rocm"), "local",
                      local_base="x")  # fmt: skip
    pins = [p for p in rendered.installed if p.install == "pip" and p.kind != "git"]
    fetched = wheelhouse.prefetch_wheels(
        [rendered], tmp_path / "cache", lambda _: None, jobs=1, per_call=1
    )
    assert fetched == len(pins) >= 2
    assert sorted(pip.calls) == sorted([requirement(p)] for p in pins)
