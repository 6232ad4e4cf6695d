"""The OCI revision and source labels: from the Actions run, else from the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mini_project
from tests.unit.gitrepos import git, init, isolate_git, needs_git
from twinbuild.build import provenance


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("git@github.com:acme/twinbuild.git", "https://github.com/acme/twinbuild"),
        ("https://github.com/acme/twinbuild.git", "https://github.com/acme/twinbuild"),
        ("https://token:x-oauth@github.com/acme/twinbuild", "https://github.com/acme/twinbuild"),
        ("ssh://git@gitlab.example.org:2222/team/tb.git", "https://gitlab.example.org/team/tb"),
        ("/srv/git/twinbuild.git", None),
        ("file:///srv/git/twinbuild.git", None),
        ("", None),
    ],
)
def test_web_url(remote: str, url: str | None) -> None:
    assert provenance.web_url(remote) == url


def test_in_actions_the_run_says(tmp_path: Path) -> None:
    env = {
        "GITHUB_ACTIONS": "true", "GITHUB_SHA": "a" * 40, "GITHUB_REPOSITORY": "acme/tb",
        "GITHUB_SERVER_URL": "https://github.com",
    }  # fmt: skip
    assert provenance.revision(tmp_path, env) == "a" * 40
    assert provenance.source(tmp_path, env) == "https://github.com/acme/tb"


@needs_git
def test_elsewhere_the_checkout_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(mini_project(tmp_path / "repo"))
    assert provenance.revision(root, {}) is None  # no commit yet: no label rather than a guess
    assert provenance.source(root, {}) is None  # no remote
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    git(root, "remote", "add", "origin", "git@github.com:acme/twinbuild.git")
    sub = root / "images"  # a build started from a subdirectory says the same
    assert provenance.revision(sub, {}) == git(root, "rev-parse", "HEAD")
    assert provenance.source(sub, {}) == "https://github.com/acme/twinbuild"


def test_outside_a_checkout_no_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert provenance.revision(tmp_path, {}) is None
    assert provenance.source(tmp_path, {}) is None
