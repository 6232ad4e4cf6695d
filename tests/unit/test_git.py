"""The one git runner: raw bytes come back exact, a hung git is stopped, no git is one line;
objects named by id are read once per process."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.unit.gitrepos import commit_file, git, init, isolate_git, needs_git
from twinbuild.errors import ConfigError
from twinbuild.util.git import Kept, read_blobs, run_git, tree_entries


@needs_git
def test_git_bytes_returns_blobs_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    repo = init(tmp_path / "repo")
    blob = b"\x00\xff not utf-8 \r\n\x80"
    (repo / "data.bin").write_bytes(blob)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "data")
    assert run_git(repo, "show", "HEAD:data.bin", binary=True).stdout == blob
    assert run_git(repo, "show", "HEAD:missing", binary=True).returncode != 0


def test_a_git_that_never_answers_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hung = bin_dir / "git"
    hung.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    hung.chmod(hung.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr("twinbuild.util.git.GIT_TIMEOUT_S", 0.5)
    for binary in (True, False):
        with pytest.raises(ConfigError) as info:
            run_git(tmp_path, "archive", "HEAD", binary=binary)
        assert (
            str(info.value) == f"git -C {tmp_path} archive HEAD: still running after 0.5s; stopped"
        )


def test_a_timeout_given_is_the_one_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the GPU proof's git archive of a whole source tree gets its own limit, not the default
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hung = bin_dir / "git"
    hung.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    hung.chmod(hung.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr("twinbuild.util.git.GIT_TIMEOUT_S", 600)
    with pytest.raises(ConfigError, match=r"archive HEAD: still running after 1.5s; stopped$"):
        run_git(tmp_path, "archive", "HEAD", binary=True, timeout=1.5)


def test_no_git_on_path_says_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^git: not found on PATH; install git$"):
        run_git(tmp_path, "status")


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every git the module runs, recorded and then run for real; the kept objects start empty."""
    calls: list[tuple[str, ...]] = []

    def spy(repo: Path, *args: str, **kwargs: Any) -> Any:
        calls.append(args)
        return run_git(repo, *args, **kwargs)

    monkeypatch.setattr("twinbuild.util.git.run_git", spy)
    monkeypatch.setattr("twinbuild.util.git.BLOBS", Kept(64 << 20))
    monkeypatch.setattr("twinbuild.util.git.TREES", Kept(32))
    return calls


@needs_git
def test_objects_read_once_are_kept_and_a_moving_ref_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    repo = init(tmp_path / "repo")
    first = commit_file(repo, "a.txt", "one\n", "one")
    calls = _counting(monkeypatch)
    listing = tree_entries(repo, first)
    assert tree_entries(repo, first) == listing  # a commit id names one tree: kept
    oid = listing[0].oid
    assert read_blobs(repo, [oid]) == {oid: b"one\n"}
    assert read_blobs(tmp_path / "repo" / ".." / "repo", [oid]) == {oid: b"one\n"}
    assert [c[0] for c in calls] == ["ls-tree", "cat-file"]

    second = commit_file(repo, "a.txt", "two\n", "two")
    head = tree_entries(repo, "HEAD")  # a ref moves: asked every time
    assert [e.oid for e in head] != [oid]
    assert tree_entries(repo, first[:12]) == listing  # an abbreviation may grow ambiguous
    both = read_blobs(repo, [oid, head[0].oid])  # only the new blob is asked for
    assert both == {oid: b"one\n", head[0].oid: b"two\n"}
    assert calls[2:] == [
        ("ls-tree", "-r", "-l", "-z", "--full-tree", "HEAD"),
        ("ls-tree", "-r", "-l", "-z", "--full-tree", first[:12]),
        ("cat-file", "--batch"),
    ]
    assert tree_entries(repo, second) == head


@needs_git
def test_a_replace_ref_cannot_change_what_a_kept_id_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: read a blob, then point a replace ref from its id at other bytes. Replace refs
    are off for every git twinbuild runs, so the kept bytes and a fresh read agree."""
    isolate_git(monkeypatch, tmp_path / "home")
    repo = init(tmp_path / "repo")
    commit = commit_file(repo, "a.txt", "tested\n", "one")
    (oid,) = [e.oid for e in tree_entries(repo, commit)]
    (tmp_path / "other.txt").write_text("untested\n")
    other = git(repo, "hash-object", "-w", str(tmp_path / "other.txt"))
    git(repo, "replace", oid, other)
    assert git(repo, "cat-file", "blob", oid) == "untested"  # what plain git shows now
    assert read_blobs(repo, [oid]) == {oid: b"tested\n"}
    monkeypatch.setattr("twinbuild.util.git.BLOBS", Kept(64 << 20))  # and read afresh
    assert read_blobs(repo, [oid]) == {oid: b"tested\n"}


def test_what_is_kept_stays_within_its_limit() -> None:
    kept: Kept[str, bytes] = Kept(100)
    for n in range(10):
        kept.put(f"b{n}", b"x" * 20, 20)
        assert kept.used <= 100
    assert [kept.get(f"b{n}") is not None for n in range(10)] == [False] * 5 + [True] * 5
    kept.get("b5")  # used: the next to go is b6
    kept.put("b10", b"x" * 20, 20)
    assert kept.get("b6") is None
    assert kept.get("b5") is not None
    kept.put("big", b"x" * 26, 26)  # over a quarter of the limit: never kept
    assert kept.get("big") is None
    assert kept.used == 100
