"""Review answers an attacker can shape, judged the way gate.yml runs the gate (rules pinned down;
each of these already held before this round's review).

- an approval names one commit: after a force-push away and back to exactly that commit it is an
  approval of the head again (the same bytes were approved), and never of the push in between;
- a bot's approval is nobody's: CODEOWNERS names logins, and ``name[bot]`` is not one;
- ``gh api --paginate --slurp`` writes one list per page: an approval on the second page counts,
  and a change request on a later page overrides an approval on an earlier one.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.gate_repos import GateRepo, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from tests.unit.reviews import OWNER, review, reviews_file
from twinbuild.evidence import keygen

pytestmark = needs_git


def _new_key(repo: GateRepo, name: str = "mallory") -> str:
    keygen(repo.root.parent / name / "k.key", repo.root / f"evidence/keys/{name}.pub")
    return commit_all(repo.root, f"evidence: trust {name}")


def _reviews(repo: GateRepo, *reviews: tuple[str, str, str]) -> str:
    return f"--reviews={reviews_file(repo.root.parent / 'reviews.json', *reviews)}"


def test_an_approval_counts_for_its_commit_again_after_a_force_push_back(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    approved = _new_key(attack_repo)
    moved = _new_key(attack_repo, "eve")  # the PR moves on: a second key, never approved
    given = _reviews(attack_repo, (OWNER, "APPROVED", approved))
    code, _, err = run_gate(capsys, moved, "--base", attack_repo.base, given)
    assert code == 9
    assert [line.split(": trust root:")[0] for line in err] == [
        "twinbuild: evidence/keys/eve.pub",
        "twinbuild: evidence/keys/mallory.pub",
    ]
    git(attack_repo.root, "reset", "-q", "--hard", approved)  # force-pushed back
    code, out, _ = run_gate(capsys, approved, "--base", attack_repo.base, given)
    assert code == 0
    assert out[0].startswith("trust roots: 1 changed (evidence/keys/mallory.pub)")


def test_a_bots_approval_of_the_head_is_not_a_code_owners(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    code, _, err = run_gate(
        capsys, head, "--base", attack_repo.base,
        _reviews(attack_repo, ("github-actions[bot]", "APPROVED", head)),
    )  # fmt: skip
    assert code == 9
    assert "@github-actions[bot] approved the head but does not own it" in err[0]


def test_every_page_of_the_reviews_counts_in_order(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    path = attack_repo.root.parent / "pages.json"
    first = [review("carol", "COMMENTED", head, review_id=i) for i in range(1, 101)]
    path.write_text(json.dumps([first, [review(OWNER, "APPROVED", head, review_id=101)]]))
    code, out, _ = run_gate(capsys, head, "--base", attack_repo.base, f"--reviews={path}")
    assert code == 0
    assert out[0].endswith(f"each approved at the head by a code owner (@{OWNER})")
    later = [review(OWNER, "CHANGES_REQUESTED", head, review_id=102)]
    path.write_text(json.dumps([first, [review(OWNER, "APPROVED", head, review_id=101)], later]))
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, f"--reviews={path}")
    assert code == 9
    assert f"@{OWNER} requested changes" in err[0]
