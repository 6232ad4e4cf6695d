"""The readers of the lock (#38): ``pins table`` shows each floating pin's locked version per
image and ``--closure IMAGE`` one image's whole closure; ``pins diff`` says what moved in each
image's lock between two revisions and which images rebuild; ``plan`` names the packages that
moved in a lock. Real locks made by ``twinbuild lock`` against the real index on 127.0.0.1 and
the real uv, in a real git repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import lock_argv
from tests.pyindex import PyIndex
from tests.unit.gitrepos import commit_all, git, init, isolate_git, needs_git
from tests.unit.test_lock import index, project
from twinbuild.cli.main import main

__all__ = ["index", "project"]  # the fixtures, shared with test_lock.py


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(argv) == 0
    found: dict[str, object] = json.loads(capsys.readouterr().out)
    return found


def _table(root: Path, *more: str) -> list[str]:
    return ["pins", "table", "--manifest", str(root / "pins/manifest.toml"), *more]


def test_pins_table_shows_each_images_locked_version(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    rows = _json(_table(project, "--format", "json"), capsys)["rows"]
    assert isinstance(rows, list)
    floaty = next(r for r in rows if r["pin"] == "floaty")
    assert floaty["status"].endswith("-> 1.0 cuda-amd64")  # rocm does not take it
    solid = next(r for r in rows if r["pin"] == "solid")
    assert "->" not in solid["status"]  # an exact pin: the manifest says it all

    index.publish("floaty", "1.1")
    assert main(lock_argv(project, index.url, "--upgrade", "floaty")) == 0
    rows = _json(_table(project, "--format", "json"), capsys)["rows"]
    assert isinstance(rows, list)
    assert next(r for r in rows if r["pin"] == "floaty")["status"].endswith("-> 1.1 cuda-amd64")


def test_pins_table_closure_lists_every_entry_of_one_lock(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    table = _json(_table(project, "--closure", "cuda-amd64", "--format", "json"), capsys)
    assert "pins/lock/cuda-amd64.toml: 3 distributions" in str(table["title"])
    assert table["rows"] == [
        {"name": "dep-a", "version": "1.0", "origin": "layer", "via": "solid"},
        {"name": "floaty", "version": "1.0", "origin": "layer", "via": "pin floaty"},
        {"name": "solid", "version": "1.0", "origin": "layer", "via": "pin solid"},
    ]


@pytest.mark.parametrize(
    ("image", "says"),
    [("nope-amd64", "has no such image; its images: cuda-amd64, rocm-amd64"),
     ("rocm-amd64", "does not exist yet; run `twinbuild lock`")],
)  # fmt: skip
def test_pins_table_closure_of_no_lock_is_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], image: str, says: str
) -> None:
    assert main(_table(project, "--closure", image)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"--closure {image}" in err
    assert says in err


@needs_git
def test_pins_diff_shows_what_moved_in_each_lock(
    project: Path, index: PyIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    isolate_git(monkeypatch, tmp_path / "home")
    assert main(lock_argv(project, index.url)) == 0
    init(project)
    first = commit_all(project, "locked")
    index.publish("floaty", "1.1")
    index.publish("dep-b", "2.0")
    index.publish("solid", "1.0.post1", ("dep-a>=1.0", "dep-b>=2.0"))
    manifest = project / "pins/manifest.toml"
    manifest.write_text(manifest.read_text().replace('version = "1.0"', 'version = "1.0.post1"'))
    assert main(lock_argv(project, index.url, "--upgrade", "floaty")) == 0
    diff = ["pins", "diff", "--root", str(project), "--manifest", "pins/manifest.toml"]
    capsys.readouterr()
    assert main(diff) == 0  # HEAD against the working tree
    out = capsys.readouterr().out
    assert "lock cuda-amd64 changed (pins/lock/cuda-amd64.toml): 3 moved\n" in out
    assert "  dep-b: (new) -> 2.0\n  floaty: 1.0 -> 1.1\n  solid: 1.0 -> 1.0.post1\n" in out
    assert "lock rocm-amd64 changed (pins/lock/rocm-amd64.toml): 2 moved\n" in out
    assert "rebuild: cuda, rocm (production, local)" in out

    # between two commits, where a lock went away: named with what it held
    git(project, "rm", "-qf", "pins/lock/rocm-amd64.toml")
    second = commit_all(project, "upgraded, rocm's lock dropped")
    capsys.readouterr()
    assert main([*diff, first, second]) == 0
    out = capsys.readouterr().out
    assert "lock rocm-amd64 removed (pins/lock/rocm-amd64.toml): 2 moved\n" in out
    assert "  dep-a: 1.0 -> (gone)\n" in out
    assert main([*diff, first, second, "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "| `pins/lock/cuda-amd64.toml` | changed | `floaty` | `1.0` | `1.1` |" in md
    assert main([*diff, second, second]) == 0
    assert "lock " not in capsys.readouterr().out  # nothing moved: no lock named


@needs_git
def test_plan_names_the_packages_that_moved_in_a_lock(
    project: Path, index: PyIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from twinbuild.builder.plan import plan

    isolate_git(monkeypatch, tmp_path / "home")
    assert main(lock_argv(project, index.url)) == 0
    init(project)
    commit_all(project, "locked")
    index.publish("floaty", "1.1")
    index.publish("dep-a", "1.1")
    assert main(lock_argv(project, index.url, "--upgrade")) == 0
    result = plan(project, "HEAD")
    assert {i.name: r for i, r in result.reasons.items()} == {
        "cuda-amd64": ["pins/lock/cuda-amd64.toml changed (its lock): dep-a 1.0 -> 1.1, "
                       "floaty 1.0 -> 1.1"],
        "rocm-amd64": ["pins/lock/rocm-amd64.toml changed (its lock): dep-a 1.0 -> 1.1"],
    }  # fmt: skip
    lock = project / "pins/lock/rocm-amd64.toml"
    lock.write_text(lock.read_text() + "[broken\n")
    result = plan(project, "HEAD")  # still rebuilt: the lint says what is wrong with it
    assert result.reasons[next(i for i in result.images if i.name == "rocm-amd64")] == [
        "pins/lock/rocm-amd64.toml changed (its lock, which does not read back: "
        "`twinbuild lint` says why)"
    ]
