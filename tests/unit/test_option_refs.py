"""Every command that hands git a ref refuses one that git would read as an option.

``git show --output=DIR:...`` writes a file, ``git diff --output=FILE`` too: a ref taken from a
command line, a workflow input or an event payload must never reach git as an option. Each case is
run through ``twinbuild.cli.main.main`` in a real repository; the refusal is one line naming the
option, exit 2, and git wrote nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mini_project
from tests.unit.evidence_builders import REPO, REPO_ID
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.cli.main import main

pytestmark = needs_git
IMAGE = "registry.example/twinbuild/cuda@sha256:" + "3" * 64


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path / "home")
    root = mini_project(tmp_path)
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "main")
    monkeypatch.chdir(root)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_REPOSITORY_ID", str(REPO_ID))
    monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)
    return root


def _cases(out: Path) -> list[tuple[str, list[str]]]:
    """(the option named in the refusal, the command line) for every ref-taking command."""
    bad = f"--output={out}"
    head = "HEAD"
    return [
        ("--base", ["plan", f"--base={bad}"]),
        ("REV_A", ["pins", "diff", "--", bad]),
        ("REV_B", ["pins", "diff", "--", "HEAD", bad]),
        ("--head", ["evidence", "inputs", f"--head={bad}"]),
        ("--head", ["evidence", "gate", f"--head={bad}", "--base", head, "--pr", "42"]),
        ("--base", ["evidence", "gate", "--head", head, f"--base={bad}", "--pr", "42"]),
        (
            "--evidence-ref",
            ["evidence", "gate", "--head", head, "--base", head, f"--evidence-ref={bad}"],
        ),
        (
            "--evidence-ref",
            ["release", "--variant", "cuda", "--image", IMAGE, "--tag", "v1",
             f"--evidence-ref={bad}", "--keys", "."],
        ),
        (
            "--commit",
            ["evidence", "record", "--variant", "cuda", "--arch", "linux/amd64", "--report-dir", ".", "--out", "st",
             f"--commit={bad}", "--pr", "42"],
        ),
        (
            "--commit",
            ["evidence", "sign", "--in", ".", "--out", "signed", f"--commit={bad}", "--pr", "42"],
        ),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(10))
def test_an_option_shaped_ref_is_refused(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], index: int
) -> None:
    out = tmp_path / "written-by-git"
    option, argv = _cases(out)[index]
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.splitlines()
    assert not out.exists(), f"git wrote {out}: the ref reached git as an option"
    assert code == 2
    assert len(err) == 1
    assert err[0].startswith(f"twinbuild: {option} '--output=")
    assert "git would read it as an option" in err[0]


def test_the_cases_cover_every_command_that_takes_a_ref(tmp_path: Path) -> None:
    assert len(_cases(tmp_path)) == 10
