"""Attack on issue 38's "builds install the lock and nothing else": a git pin on a branch.

``twinbuild lock`` resolves the branch to a commit where its repository answers; the upstream
branch then moves. A production build must check out the lock's commit, not whatever the branch
names on the day of the build (the smoke check records the commit a branch pin was found at and
passes it, and the closure check never compares a checkout with the lock).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import image, lock_argv, mini_project, with_pins
from tests.pyindex import PyIndex
from tests.unit.gitrepos import commit_file, git, init, isolate_git, needs_git
from twinbuild.cli.main import main
from twinbuild.closure.constraints import with_lock
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import render


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PyIndex]:
    with PyIndex(tmp_path / "index") as served:
        served.publish("solid", "1.0")
        yield served


def _locked_on_a_branch(
    tmp_path: Path, index: PyIndex, monkeypatch: pytest.MonkeyPatch, *, checkout_pin: bool
) -> tuple[Path, Path, str]:
    """A project with a pip git pin (and a checkout pin, if asked) on an upstream's branch,
    locked against ``index``: the project, the upstream and the commit the lock saw."""
    isolate_git(monkeypatch, tmp_path / "home")
    upstream = init(tmp_path / "upstream")
    first = commit_file(upstream, "a.txt", "one\n", "first")
    git(upstream, "branch", "-M", "main")
    tool = (
        '\n[pins.tool]\nkind = "git"\nrepo = "' + upstream.as_uri() + '"\nref = "main"\n'
        'dist = ""\ninstall = "checkout"\npath = "/opt/tool"\nwhy = "a branch"\n'
        'floating = "a branch"\n'
    )  # fmt: skip
    root = with_pins(mini_project(tmp_path), (
        '[pins.solid]\nkind = "pypi"\nversion = "1.0"\nwhy = "an exact pin"\n'
        + (tool if checkout_pin else "")
        + '\n[pins.gp]\nkind = "git"\nrepo = "' + upstream.as_uri() + '"\nref = "main"\n'
        'dist = "gp"\nwhy = "a branch installed by pip"\nfloating = "a branch"\n'
    ))  # fmt: skip
    (root / "pins/lock").mkdir()
    assert main(lock_argv(root, index.url)) == 0
    return root, upstream, first


@needs_git
def test_a_branch_pin_builds_at_the_locks_commit_after_the_branch_moves(
    tmp_path: Path, index: PyIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, upstream, first = _locked_on_a_branch(tmp_path, index, monkeypatch, checkout_pin=True)
    manifest = root / "pins/manifest.toml"
    commit_file(upstream, "a.txt", "two\n", "second")  # the branch moves after the lock

    rendered = with_lock(root, render(load(manifest), image("cuda"), "production"))
    # checkout.sh fetches COMMIT when it is set, else the branch's tip of the day
    assert rendered.args.get("TOOL_COMMIT") == first
    pip_lines = "".join(rendered.files.values())
    assert f"gp @ git+{upstream.as_uri()}@{first}\n" in pip_lines
    assert "@main" not in pip_lines


@needs_git
@pytest.mark.xfail(
    strict=True,
    reason="the local lock never resolves a git ref (closure/local.py _git: 'resolved from the "
    "local mirror at build time'), so a local build installs whatever the mirror's branch or tag "
    "names that day and the closure check, with no commit to compare, passes it",
)
def test_a_local_lock_holds_the_commit_of_a_git_pin_on_a_ref(
    tmp_path: Path, index: PyIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from twinbuild.closure import lockfile

    root, _, first = _locked_on_a_branch(tmp_path, index, monkeypatch, checkout_pin=False)
    local = lockfile.read(lockfile.lock_path(root, "cuda-amd64", "local"))
    assert next(g for g in local.git if g.pin == "gp").commit == first
