"""No untested merges: evidence counts for the tree a PR would land, the head or its merge with the
current base.

Two PRs validated on the same base both passed; once the first merged, the second still passed,
and the merge of the two was never built. On real repositories (tests/unit/gate_repos.py): the
tested PR (validate/pr-42, a flash-linear-attention bump) against a base that moved on.
"""

from __future__ import annotations

import pytest

from tests.helpers import MINI_VARIANTS, edit, image
from tests.unit.gate_repos import PR, GateRepo, run_gate, sign_evidence
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.model import ImageKey

pytestmark = needs_git


def _merge_first_pr(repo: GateRepo, path: str, old: str, new: str) -> str:
    """Another PR, validated on the same base, merges first: the base moves."""
    git(repo.root, "checkout", "-q", "-b", "first", repo.base)
    edit(repo.root / path, old, new)
    return commit_all(repo.root, "the first PR, merged")


def test_a_head_that_lags_a_base_which_moved_image_inputs_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_gate(capsys, gate_repo.tested, "--base", gate_repo.base)
    assert code == 0  # validated against the base it branched from
    moved = _merge_first_pr(gate_repo, "images/common/checkout.sh", "echo", "printf '%s\\n'")
    code, out, err = run_gate(capsys, gate_repo.tested, "--base", moved)
    assert (code, out) == (7, [])
    merge = f"the merge of the head {gate_repo.tested[:12]} into the base {moved[:12]}"
    assert [line.split("; ", 1)[1] for line in err] == [
        f"{merge} has {_merged_inputs(gate_repo, moved)[image(p)]}; the head lags the base, whose changes "
        "moved the image inputs, so that merge was never built: rebase the PR on the base and "
        f"push the new head to validate/pr-{PR}"
        for p in MINI_VARIANTS
    ]


def test_after_a_rebase_and_a_new_validation_it_passes(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _merge_first_pr(gate_repo, "images/common/checkout.sh", "echo", "printf '%s\\n'")
    git(gate_repo.root, "checkout", "-q", "-b", "rebased", moved)
    git(gate_repo.root, "cherry-pick", gate_repo.tested)
    rebased = git(gate_repo.root, "rev-parse", "HEAD")
    code, _, err = run_gate(capsys, rebased, "--base", moved)
    assert code == 7  # the old evidence is for inputs this head no longer has
    assert all(": inputs: " in line for line in err)
    git(gate_repo.root, "update-ref", "-d", f"refs/heads/validate/pr-{PR}")
    sign_evidence(gate_repo.root, rebased, gate_repo.signer)
    code, out, err = run_gate(capsys, rebased, "--base", moved)
    assert (code, err) == (0, [])
    assert [line.split(":")[0] for line in out] == ["cuda-amd64", "rocm-amd64"]


def test_a_lagging_head_keeps_its_evidence_while_the_base_moved_no_input(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _merge_first_pr(gate_repo, "README.md", "# demo\n", "# demo\n\nmore words\n")
    assert commit_inputs(moved).inputs == commit_inputs(gate_repo.base).inputs
    code, out, err = run_gate(capsys, gate_repo.tested, "--base", moved)
    assert (code, err) == (0, [])
    merge = f"the merge of the head {gate_repo.tested[:12]} into the base {moved[:12]}"
    assert all(
        f"commit {gate_repo.tested[:12]}, whose inputs {merge} has too" in line for line in out
    )


def test_a_lagging_head_that_does_not_merge_cleanly_is_told_to_rebase(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    moved = _merge_first_pr(
        gate_repo, "pins/manifest.toml", 'version = "0.4.2"', 'version = "0.4.9"'
    )
    code, out, err = run_gate(capsys, gate_repo.tested, "--base", moved)
    assert (code, out) == (7, [])
    assert err == [
        f"twinbuild: {gate_repo.tested}: merge: the head does not merge cleanly with the base "
        f"{moved[:12]}; rebase the PR on the base and push the new head to validate/pr-{PR} to "
        "validate it"
    ]


def test_a_docs_pr_that_lags_needs_no_evidence_for_the_bases_inputs(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(gate_repo.root, "checkout", "-q", "-b", "docs", gate_repo.base)
    (gate_repo.root / "docs").mkdir()
    (gate_repo.root / "docs/notes.md").write_text("# notes\n")
    docs = commit_all(gate_repo.root, "docs")
    git(gate_repo.root, "update-ref", "-d", f"refs/heads/validate/pr-{PR}")
    # main took the pin bump meanwhile; the docs PR lands nothing but its page
    code, out, err = run_gate(capsys, docs, "--base", gate_repo.tested)
    assert (code, err) == (0, [])
    assert out[0].startswith(f"no image input changed between the base {gate_repo.tested[:12]} and")
    assert "merged into it" in out[0]


def _merged_inputs(repo: GateRepo, base: str) -> dict[ImageKey, str]:
    tree = git(repo.root, "merge-tree", "--write-tree", "--no-messages", base, repo.tested)
    return commit_inputs(tree.splitlines()[0]).inputs
