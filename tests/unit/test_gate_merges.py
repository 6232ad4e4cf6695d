"""No untested merges: evidence counts for the tree a PR would land, the head or its merge with the
current base.

Two PRs validated on the same base both passed; once the first merged, the second still passed,
and the merge of the two was never built. On real repositories (tests/unit/gate_repos.py): the
tested PR (validate/pr-42, a flash-linear-attention bump) against a base that moved on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import edit
from tests.unit.gate_repos import PR, GateRepo, make_repo, run_gate, sign_evidence
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.model import PLATFORMS, Platform

pytestmark = needs_git


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GateRepo:
    return make_repo(tmp_path, monkeypatch)


def _merge_first_pr(repo: GateRepo, path: str, old: str, new: str) -> str:
    """Another PR, validated on the same base, merges first: the base moves."""
    git(repo.root, "checkout", "-q", "-b", "first", repo.base)
    edit(repo.root / path, old, new)
    return commit_all(repo.root, "the first PR, merged")


def test_a_head_that_lags_a_base_which_moved_image_inputs_is_refused(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_gate(capsys, repo.tested, "--base", repo.base)
    assert code == 0  # validated against the base it branched from
    moved = _merge_first_pr(repo, "images/common/checkout.sh", "echo", "printf '%s\\n'")
    code, out, err = run_gate(capsys, repo.tested, "--base", moved)
    assert (code, out) == (7, [])
    merge = f"the merge of the head {repo.tested[:12]} into the base {moved[:12]}"
    assert [line.split("; ", 1)[1] for line in err] == [
        f"{merge} has {_merged_inputs(repo, moved)[p]}; the head lags the base, whose changes "
        "moved the image inputs, so that merge was never built: rebase the PR on the base and "
        f"push the new head to validate/pr-{PR}"
        for p in PLATFORMS
    ]


def test_after_a_rebase_and_a_new_validation_it_passes(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _merge_first_pr(repo, "images/common/checkout.sh", "echo", "printf '%s\\n'")
    git(repo.root, "checkout", "-q", "-b", "rebased", moved)
    git(repo.root, "cherry-pick", repo.tested)
    rebased = git(repo.root, "rev-parse", "HEAD")
    code, _, err = run_gate(capsys, rebased, "--base", moved)
    assert code == 7  # the old evidence is for inputs this head no longer has
    assert all(": inputs: " in line for line in err)
    git(repo.root, "update-ref", "-d", f"refs/heads/validate/pr-{PR}")
    sign_evidence(repo.root, rebased, repo.signer)
    code, out, err = run_gate(capsys, rebased, "--base", moved)
    assert (code, err) == (0, [])
    assert [line.split(":")[0] for line in out] == ["cuda", "rocm"]


def test_a_lagging_head_keeps_its_evidence_while_the_base_moved_no_input(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _merge_first_pr(repo, "README.md", "# demo\n", "# demo\n\nmore words\n")
    assert commit_inputs(moved).inputs == commit_inputs(repo.base).inputs
    code, out, err = run_gate(capsys, repo.tested, "--base", moved)
    assert (code, err) == (0, [])
    merge = f"the merge of the head {repo.tested[:12]} into the base {moved[:12]}"
    assert all(f"commit {repo.tested[:12]}, whose inputs {merge} has too" in line for line in out)


def test_a_lagging_head_that_does_not_merge_cleanly_is_told_to_rebase(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _merge_first_pr(repo, "pins/manifest.toml", 'version = "0.4.2"', 'version = "0.4.9"')
    code, out, err = run_gate(capsys, repo.tested, "--base", moved)
    assert (code, out) == (7, [])
    assert err == [
        f"twinbuild: {repo.tested}: merge: the head does not merge cleanly with the base "
        f"{moved[:12]}; rebase the PR on the base and push the new head to validate/pr-{PR} to "
        "validate it"
    ]


def test_a_docs_pr_that_lags_needs_no_evidence_for_the_bases_inputs(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo.root, "checkout", "-q", "-b", "docs", repo.base)
    (repo.root / "docs").mkdir()
    (repo.root / "docs/notes.md").write_text("# notes\n")
    docs = commit_all(repo.root, "docs")
    git(repo.root, "update-ref", "-d", f"refs/heads/validate/pr-{PR}")
    # main took the pin bump meanwhile; the docs PR lands nothing but its page
    code, out, err = run_gate(capsys, docs, "--base", repo.tested)
    assert (code, err) == (0, [])
    assert out[0].startswith(f"no image input changed between the base {repo.tested[:12]} and")
    assert "merged into it" in out[0]


def _merged_inputs(repo: GateRepo, base: str) -> dict[Platform, str]:
    tree = git(repo.root, "merge-tree", "--write-tree", "--no-messages", base, repo.tested)
    return commit_inputs(tree.splitlines()[0]).inputs
