"""The one git runner: raw bytes come back exact, a hung git is stopped, no git is one line."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from tests.unit.gitrepos import git, init, isolate_git, needs_git
from twinbuild.errors import ConfigError
from twinbuild.util.git import run_git


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
        assert str(info.value) == f"git -C {tmp_path} archive HEAD: no answer in 0.5s"


def test_no_git_on_path_says_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^git: not found on PATH; install git$"):
        run_git(tmp_path, "status")
