"""Fixtures several unit test modules share: a committed mini project, a repository with gate
evidence, and a signing key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mini_project
from tests.unit.evidence_builders import Signer
from tests.unit.gate_repos import GateRepo, make_repo
from tests.unit.gitrepos import commit_all, init, isolate_git


@pytest.fixture
def mini_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The mini project as a git repository with one commit, git's HOME its own."""
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(mini_project(tmp_path))
    commit_all(root, "mini project")
    return root


@pytest.fixture
def gate_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GateRepo:
    """A repository whose PR head was validated, with signed evidence for both platforms."""
    return make_repo(tmp_path, monkeypatch)


@pytest.fixture
def signer() -> Signer:
    """A fresh evidence signing key, trusted by the policies of the gate tests."""
    return Signer.new()
