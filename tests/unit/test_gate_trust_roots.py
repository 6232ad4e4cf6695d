"""Trust roots never pass on automation: a key, a workflow, CODEOWNERS or twinbuild's own code
changes only with a code owner's approval of the exact head, as the base's CODEOWNERS says.

Each attack is a PR on a real repository (tests/unit/gate_repos.py: the real package, this
checkout's .github/CODEOWNERS), judged the way gate.yml runs the gate, with GitHub's list-reviews
answer (tests/unit/reviews.py) as the proof of approval. Refused: exit 9, one line per path.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.gate_repos import GateRepo, approved, run_gate, sign_evidence
from tests.unit.gitrepos import commit_all, git, needs_git
from tests.unit.reviews import OWNER, review, reviews_file
from twinbuild.evidence import keygen

pytestmark = needs_git
ASK = f"a code owner (@{OWNER}) must approve the head {{head}}, then re-run the gate"
CHANGED = "changed by this PR, and automation alone never passes a trust root"
OLD = "1234567890" * 4  # the commit an approval was given for, before the PR moved on


def _refusal(path: str, head: str, said: str) -> str:
    return f"twinbuild: {path}: trust root: {CHANGED}; {said}; {ASK.format(head=head[:12])}"


def _new_key(repo: GateRepo) -> str:
    keygen(repo.root.parent / "mallory" / "m.key", repo.root / "evidence/keys/mallory.pub")
    return commit_all(repo.root, "evidence: trust one more key")


def _reviews(repo: GateRepo, *reviews: tuple[str, str, str]) -> str:
    return f"--reviews={reviews_file(repo.root.parent / 'reviews.json', *reviews)}"


def test_a_new_key_is_refused_without_an_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, _reviews(attack_repo))
    assert (code, out) == (9, [])
    assert err == [_refusal("evidence/keys/mallory.pub", head, "no code owner approved it")]


def test_a_new_key_passes_with_a_code_owners_approval_of_the_head(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    assert (code, err) == (0, [])
    assert out[0] == (
        "trust roots: 1 changed (evidence/keys/mallory.pub); each approved at the head by a "
        f"code owner who can write (@{OWNER}: maintain; permissions from "
        f"{attack_repo.root.parent / 'github-permissions.json'})"
    )
    assert out[1].startswith("no image input changed between the base")


def test_without_reviews_the_gate_says_where_they_come_from(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert code == 9
    assert err == [_refusal("evidence/keys/mallory.pub", head, "no reviews were given (--reviews)")]


def test_deleting_the_codeowners_is_refused(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(attack_repo.root, "rm", "-q", ".github/CODEOWNERS")
    head = commit_all(attack_repo.root, "no owners")
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, _reviews(attack_repo))
    assert code == 9
    assert err == [_refusal(".github/CODEOWNERS", head, "no code owner approved it")]


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("twinbuild/evidence/evidence_check.py", "    elif c.failed:\n", "    elif False:\n"),
        (".github/workflows/gate.yml", None, "name: gate\non: pull_request_target\n"),
    ],
)
def test_a_gate_or_workflow_edit_needs_an_owners_approval_and_evidence(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], path: str, old: str | None, new: str
) -> None:
    target = attack_repo.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if old is None:
        target.write_text(new)
    else:
        text = target.read_text()
        assert text.count(old) == 1, f"{path} changed shape; move the edit"
        target.write_text(text.replace(old, new))
    head = commit_all(attack_repo.root, f"edit {path}")
    # Without an approval: refused as a trust root, and the evidence it needs is missing too.
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, _reviews(attack_repo))
    assert code == 9
    assert err[0] == _refusal(path, head, "no code owner approved it")
    assert [line.split(";")[0] for line in err[1:]] == [
        "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64)",
        "twinbuild: rocm-amd64: missing: no signed evidence of rocm (linux/amd64)",
    ]
    # With the approval and GPU evidence for the head, it passes.
    sign_evidence(attack_repo.root, head, attack_repo.signer)
    git(attack_repo.root, "checkout", "-q", "attack")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    assert (code, err) == (0, [])
    assert out[0].startswith(f"trust roots: 1 changed ({path}); each approved")
    assert [line.split(":")[0] for line in out[1:]] == ["cuda-amd64", "rocm-amd64"]


def test_a_head_that_makes_itself_owner_is_judged_by_the_bases_codeowners(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    (attack_repo.root / ".github/CODEOWNERS").write_text("* @mallory\n")
    keygen(
        attack_repo.root.parent / "mallory" / "m.key",
        attack_repo.root / "evidence/keys/mallory.pub",
    )
    head = commit_all(attack_repo.root, "mallory owns everything now")
    code, _, err = run_gate(
        capsys,
        head,
        "--base",
        attack_repo.base,
        _reviews(attack_repo, ("mallory", "APPROVED", head)),
    )
    assert code == 9
    said = "@mallory approved the head but does not own it"
    assert err == [
        _refusal(".github/CODEOWNERS", head, said),
        _refusal("evidence/keys/mallory.pub", head, said),
    ]


@pytest.mark.parametrize(
    ("reviews", "said"),
    [
        # the owner approved the first push, the PR moved on
        ([(OWNER, "APPROVED", "old")], f"@{OWNER} approved {OLD[:12]}, not the head"),
        ([("carol", "APPROVED", "head")], "@carol approved the head but does not own it"),
        ([(OWNER, "APPROVED", "head"), (OWNER, "DISMISSED", "head")], f"@{OWNER}'s review was dismissed"),
        ([(OWNER, "COMMENTED", "head")], "no code owner approved it"),
        ([(OWNER, "PENDING", "head")], "no code owner approved it"),
    ],
)  # fmt: skip
def test_an_approval_that_is_not_an_owners_of_the_head_is_refused(
    attack_repo: GateRepo,
    capsys: pytest.CaptureFixture[str],
    reviews: list[tuple[str, str, str]],
    said: str,
) -> None:
    head = _new_key(attack_repo)
    given = [(login, state, {"old": OLD, "head": head}[c]) for login, state, c in reviews]
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, _reviews(attack_repo, *given))
    assert code == 9
    assert err == [_refusal("evidence/keys/mallory.pub", head, said)]


def test_changes_requested_after_an_approval_stand(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    given = [(OWNER, "APPROVED", head), (OWNER, "CHANGES_REQUESTED", head)]
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, _reviews(attack_repo, *given))
    assert code == 9
    assert err == [
        f"twinbuild: evidence/keys/mallory.pub: trust root: {CHANGED}; @{OWNER} requested "
        f"changes; {ASK.format(head=head[:12])}"
    ]


def test_a_comment_after_an_approval_keeps_it_and_logins_ignore_case(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    given = [(OWNER.upper(), "APPROVED", head), (OWNER, "COMMENTED", head)]
    code, out, _ = run_gate(capsys, head, "--base", attack_repo.base, _reviews(attack_repo, *given))
    assert code == 0
    assert out[0].startswith("trust roots: 1 changed (evidence/keys/mallory.pub)")


def test_reviews_as_one_plain_list_are_read_too(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    path = reviews_file(attack_repo.root.parent / "r.json", (OWNER, "APPROVED", head), pages=False)
    code, _, _ = run_gate(capsys, head, "--base", attack_repo.base, f"--reviews={path}")
    assert code == 0


@pytest.mark.parametrize(
    ("codeowners", "said"),
    [
        ("* @twinbuild/maintainers\n", "@twinbuild/maintainers counts for nothing: GitHub's "
         f"answer whether @{OWNER} is a member is missing from {{answers}}; a code owner "
         "(@twinbuild/maintainers) must approve the head {head12}, then re-run the gate"),
        (f"* @{OWNER}\n/evidence/keys/\n", "no @user or @org/team owns it in "
         "{base}:.github/CODEOWNERS, so no approval can count: name an owner there first"),
        (None, "the base {base12} has no CODEOWNERS (.github/CODEOWNERS, CODEOWNERS, "
         "docs/CODEOWNERS), so no approval can count: add .github/CODEOWNERS naming the owners "
         "first"),
    ],
)  # fmt: skip
def test_a_trust_root_nobody_can_approve_is_refused(
    gate_repo: GateRepo,
    capsys: pytest.CaptureFixture[str],
    codeowners: str | None,
    said: str,
) -> None:
    git(gate_repo.root, "checkout", "-q", "main")
    if codeowners is None:
        git(gate_repo.root, "rm", "-q", ".github/CODEOWNERS")
    else:
        (gate_repo.root / ".github/CODEOWNERS").write_text(codeowners)
    base = commit_all(gate_repo.root, "owners")
    head = _new_key(gate_repo)
    code, _, err = run_gate(capsys, head, "--base", base, approved(gate_repo, head))
    assert code == 9
    answers = gate_repo.root.parent / "github-permissions.json"
    why = said.format(base=base, base12=base[:12], head12=head[:12], answers=answers)
    assert err == [f"twinbuild: evidence/keys/mallory.pub: trust root: {CHANGED}; {why}"]


def test_the_bases_own_trust_root_changes_are_not_the_prs(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    # main trusts a new key after the PR branched; the PR only edits the docs and lags.
    (attack_repo.root / "docs").mkdir()
    (attack_repo.root / "docs/x.md").write_text("# x\n")
    head = commit_all(attack_repo.root, "docs")
    git(attack_repo.root, "checkout", "-q", "main")
    base = _new_key(attack_repo)
    code, out, err = run_gate(capsys, head, "--base", base)
    assert (code, err) == (0, [])
    assert out[0].startswith(f"no image input changed between the base {base[:12]} and the head")
    assert "merged into it" in out[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "the JSON document ends early"),
        ('{"state": "APPROVED"}', "not a list of reviews"),
        ('[{"state": "LGTM", "user": {"login": "x"}, "commit_id": null}]', "[0].state: 'LGTM' "
         "is not a review state"),
    ],
)  # fmt: skip
def test_an_unusable_reviews_file_is_one_line_exit_2(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    head = _new_key(attack_repo)
    path = attack_repo.root.parent / "reviews.json"
    path.write_text(text)
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, f"--reviews={path}")
    assert code == 2
    assert len(err) == 1
    assert message in err[0]
    assert str(path) in err[0]


# Review answers an attacker can shape (these held before; nothing else pinned them down): an
# approval names one commit, so after a force-push away and back to exactly that commit it is an
# approval of the head again (the same bytes were approved), never of the push in between; a
# bot's approval is nobody's (CODEOWNERS names logins, and name[bot] is not one); and
# `gh api --paginate --slurp` writes one list per page, read in order across pages.
def test_an_approval_counts_for_its_commit_again_after_a_force_push_back(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _new_key(attack_repo)
    keygen(attack_repo.root.parent / "eve" / "e.key", attack_repo.root / "evidence/keys/eve.pub")
    moved = commit_all(attack_repo.root, "evidence: trust eve")  # the PR moves on, unapproved
    given = _reviews(attack_repo, (OWNER, "APPROVED", first))
    code, _, err = run_gate(capsys, moved, "--base", attack_repo.base, given)
    assert code == 9
    assert [line.split(": trust root:")[0] for line in err] == [
        "twinbuild: evidence/keys/eve.pub",
        "twinbuild: evidence/keys/mallory.pub",
    ]
    git(attack_repo.root, "reset", "-q", "--hard", first)  # force-pushed back
    code, out, _ = run_gate(capsys, first, "--base", attack_repo.base, given)
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
    assert f"each approved at the head by a code owner who can write (@{OWNER}: maint" in out[0]
    later = [review(OWNER, "CHANGES_REQUESTED", head, review_id=102)]
    path.write_text(json.dumps([first, [review(OWNER, "APPROVED", head, review_id=101)], later]))
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, f"--reviews={path}")
    assert code == 9
    assert f"@{OWNER} requested changes" in err[0]
