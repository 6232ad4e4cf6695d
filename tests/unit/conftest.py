"""Fixtures several unit test modules share: a committed mini project, a repository with gate
evidence (and the same on an attacker's branch without it), and a signing key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mini_project
from tests.unit.evidence_builders import Signer
from tests.unit.gate_repos import GateRepo, make_repo
from tests.unit.gitrepos import commit_all, git, init, isolate_git


@pytest.fixture
def mini_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The mini project as a git repository with one commit, git's HOME its own."""
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(mini_project(tmp_path))
    commit_all(root, "mini project")
    return root


@pytest.fixture(scope="session")
def _gate_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gate-template")


@pytest.fixture
def gate_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _gate_template: Path) -> GateRepo:
    """A repository whose PR head was validated, with signed evidence for both platforms (a copy
    of one made once per worker)."""
    return make_repo(tmp_path, monkeypatch, _gate_template)


@pytest.fixture
def attack_repo(gate_repo: GateRepo) -> GateRepo:
    """``gate_repo`` on a branch ``attack`` from its base, its evidence branch gone: where a PR
    that changes no pin, only what the gate judges by, starts."""
    git(gate_repo.root, "checkout", "-q", "-b", "attack", gate_repo.base)
    git(gate_repo.root, "update-ref", "-d", "refs/heads/validate/pr-42")
    return gate_repo


@pytest.fixture
def signer() -> Signer:
    """A fresh evidence signing key, trusted by the policies of the gate tests."""
    return Signer.new()
