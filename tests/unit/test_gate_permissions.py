"""An approval counts only from someone who can write (#39, attack 1).

The gate matched login text: a review by a login CODEOWNERS names, with ``author_association:
NONE``, approved a PR that added a key, and the gate passed it. Whoever registers a placeholder
login, or the login of a renamed or departed maintainer, could approve trust roots. Now an
approval counts only when GitHub says the reviewer can write (admin, maintain, write): in Actions
the gate asks GitHub (here: its API on 127.0.0.1, tests/unit/fake_github.py), a dry run reads the
answers from ``--permissions FILE``. Real repositories (tests/unit/gate_repos.py), the gate run as
gate.yml runs it; refused is exit 9, one line per path naming the reviewer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit import fake_github
from tests.unit.evidence_builders import REPO
from tests.unit.gate_repos import GateRepo, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from tests.unit.reviews import OWNER, membership, permission, permissions_file, review
from twinbuild.evidence import keygen
from twinbuild.evidence.permissions import GitHubAnswers
from twinbuild.util.codeowners import PLACEHOLDER

pytestmark = needs_git
CHANGED = "changed by this PR, and automation alone never passes a trust root"


def _new_key(repo: GateRepo) -> str:
    keygen(repo.root.parent / "mallory" / "m.key", repo.root / "evidence/keys/mallory.pub")
    return commit_all(repo.root, "evidence: trust one more key")


def _reviews(repo: GateRepo, *given: dict[str, Any]) -> str:
    path = repo.root.parent / "reviews.json"
    path.write_text(json.dumps([list(given)]))
    return f"--reviews={path}"


def _approval(login: str, head: str, association: str = "MEMBER") -> dict[str, Any]:
    found = review(login, "APPROVED", head)
    found["author_association"] = association
    return found


def _ask(head: str) -> str:
    return f"a code owner (@{OWNER}) must approve the head {head[:12]}, then re-run the gate"


def test_an_approval_by_an_owner_login_that_is_no_collaborator_does_not_count(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack: the login CODEOWNERS names approves, but GitHub's review says NONE (whoever
    registered the login is nobody here). It passed (exit 0); now it is refused, and GitHub is
    not even asked."""
    head = _new_key(attack_repo)
    given = _reviews(attack_repo, _approval(OWNER, head, association="NONE"))
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, given)
    assert (code, out) == (9, []), err
    assert err == [
        f"twinbuild: evidence/keys/mallory.pub: trust root: {CHANGED}; @{OWNER} approved the head, "
        "but GitHub's review says NONE (no owner, member or collaborator of this repository), so "
        f"it does not count; {_ask(head)}"
    ]


@pytest.mark.parametrize("level", ["read", "triage", "none"])
def test_an_owner_who_cannot_write_does_not_count(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    head = _new_key(attack_repo)
    answers = permissions_file(attack_repo.root.parent / "p.json", {OWNER: level})
    code, _, err = run_gate(
        capsys, head, "--base", attack_repo.base, _reviews(attack_repo, _approval(OWNER, head)),
        f"--permissions={answers}",
    )  # fmt: skip
    assert code == 9, err
    assert err == [
        f"twinbuild: evidence/keys/mallory.pub: trust root: {CHANGED}; @{OWNER} approved the head, "
        f"but can {level} here, not write ({answers}), so it does not count; {_ask(head)}"
    ]


@pytest.mark.parametrize("level", ["admin", "maintain", "write"])
def test_an_owner_who_can_write_counts_and_the_verdict_says_so(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    head = _new_key(attack_repo)
    answers = permissions_file(attack_repo.root.parent / "p.json", {OWNER: level})
    code, out, err = run_gate(
        capsys, head, "--base", attack_repo.base, _reviews(attack_repo, _approval(OWNER, head)),
        f"--permissions={answers}",
    )  # fmt: skip
    assert (code, err) == (0, [])
    assert out[0] == (
        "trust roots: 1 changed (evidence/keys/mallory.pub); each approved at the head by a code "
        f"owner who can write (@{OWNER}: {level}; permissions from {answers})"
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ({"permissions": {}}, "is missing from {file}"),
        ({"permissions": {OWNER: {"permission": "superuser", "user": {"login": OWNER}}}},
         "in {file} has permission 'superuser', not one of ('admin', 'maintain', 'write', "
         "'triage', 'read', 'none')"),
        ({"permissions": {OWNER: permission("carol", "write")}},
         "in {file} is about 'carol', not the reviewer (user.login)"),
        ({"permissions": {OWNER: "write"}}, "in {file} is not a JSON object"),
        ("{", "{file} cannot be read ({file}:1:2: the JSON document ends early"),
    ],
)  # fmt: skip
def test_a_missing_or_malformed_answer_is_no_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], content: object, said: str
) -> None:
    head = _new_key(attack_repo)
    answers = attack_repo.root.parent / "p.json"
    answers.write_text(content if isinstance(content, str) else json.dumps(content))
    code, out, err = run_gate(
        capsys, head, "--base", attack_repo.base, _reviews(attack_repo, _approval(OWNER, head)),
        f"--permissions={answers}",
    )  # fmt: skip
    assert (code, out) == (9, []), err
    assert len(err) == 1
    assert err[0].startswith(
        f"twinbuild: evidence/keys/mallory.pub: trust root: {CHANGED}; @{OWNER} approved the head, "
        f"but the answer whether @{OWNER} can write {said.format(file=answers)}"
    )
    assert err[0].endswith(f", so it does not count; {_ask(head)}")


def test_outside_actions_without_answers_no_approval_counts(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _new_key(attack_repo)
    answers = attack_repo.root.parent / "none.json"
    code, _, err = run_gate(
        capsys, head, "--base", attack_repo.base, _reviews(attack_repo, _approval(OWNER, head)),
        f"--permissions={answers}",
    )  # fmt: skip
    assert code == 9
    assert f"@{OWNER} can write {answers} cannot be read" in err[0]


def _team_owned(repo: GateRepo, team: str) -> str:
    """main, where a team owns everything; the PR branch adds a key from there."""
    git(repo.root, "checkout", "-q", "main")
    (repo.root / ".github/CODEOWNERS").write_text(f"* @{team}\n")
    base = commit_all(repo.root, "a team owns it all")
    git(repo.root, "checkout", "-q", "-B", "attack", base)
    return base


def test_a_team_owner_counts_through_githubs_membership_answer_alone(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _team_owned(attack_repo, "octo/Maintainers")
    head = _new_key(attack_repo)
    given = _reviews(attack_repo, _approval("carol", head, association="COLLABORATOR"))
    # No membership answer: the team counts for nothing, and the gate says which.
    plain = permissions_file(attack_repo.root.parent / "p.json", {"carol": "write"})
    code, _, err = run_gate(capsys, head, "--base", base, given, f"--permissions={plain}")
    assert code == 9
    assert err == [
        f"twinbuild: evidence/keys/mallory.pub: trust root: {CHANGED}; @octo/Maintainers counts "
        f"for nothing: GitHub's answer whether @carol is a member is missing from {plain}; a code "
        f"owner (@octo/Maintainers) must approve the head {head[:12]}, then re-run the gate"
    ]
    # GitHub says carol is an active member (the slug in another case) and can write: it counts.
    member = permissions_file(
        attack_repo.root.parent / "m.json", {"carol": "write"},
        teams={"octo/maintainers": {"carol": membership()}},
    )  # fmt: skip
    code, out, err = run_gate(capsys, head, "--base", base, given, f"--permissions={member}")
    assert (code, err) == (0, [])
    assert "(@carol (through @octo/Maintainers): write; permissions from" in out[0]
    # A pending invitation is no membership.
    pending = permissions_file(
        attack_repo.root.parent / "n.json", {"carol": "write"},
        teams={"octo/maintainers": {"carol": membership("pending")}},
    )  # fmt: skip
    code, _, err = run_gate(capsys, head, "--base", base, given, f"--permissions={pending}")
    assert code == 9
    assert "@carol approved the head but does not own it" in err[0]


def test_a_codeowners_naming_the_shipped_placeholder_is_refused(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whoever registers the placeholder login could approve: the gate judges no trust root by a
    CODEOWNERS that names it (whatever its case), exit 9, naming the line."""
    base = _team_owned(attack_repo, PLACEHOLDER.upper())
    head = _new_key(attack_repo)
    code, _, err = run_gate(
        capsys, head, "--base", base, _reviews(attack_repo, _approval(OWNER, head))
    )
    assert code == 9
    assert err == [
        f"twinbuild: {base}:.github/CODEOWNERS:1: names @{PLACEHOLDER}, the placeholder twinbuild "
        "ships; anyone may register that login, so it must own nothing: replace it with your "
        "maintainers' logins (docs/trust.md, required setting 5)"
    ]


def test_a_codeowners_with_a_line_github_skips_is_refused_exit_9(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _team_owned(attack_repo, f"{OWNER}\n/evidence/keys/ @{OWNER} ada@")
    head = _new_key(attack_repo)
    code, _, err = run_gate(
        capsys, head, "--base", base, _reviews(attack_repo, _approval(OWNER, head))
    )
    assert code == 9
    assert len(err) == 1
    assert err[0].startswith(
        f"twinbuild: {base}:.github/CODEOWNERS:2: owner 'ada@' is not @user, @org/team or an "
        "e-mail address"
    )
    assert err[0].endswith("so none passes until it is fixed on the base")


# In Actions: the gate asks GitHub with the job's token.


def _actions(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_API_URL", url)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_the_jobs_token")


def _in_actions(capsys: pytest.CaptureFixture[str], head: str, *extra: str) -> list[str]:
    """run_gate without a file of answers: the command line gate.yml gives."""
    from twinbuild.cli.main import main

    capsys.readouterr()
    code = main(["evidence", "gate", "--head", head, "--pr", "42", *extra])
    out, err = capsys.readouterr()
    return [str(code), *out.splitlines(), *err.splitlines()]


def test_in_actions_the_gate_asks_github_with_the_jobs_token(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    head = _new_key(attack_repo)
    given = _reviews(attack_repo, _approval(OWNER, head))
    where = f"/repos/{REPO}/collaborators/{OWNER}/permission"
    with fake_github.serving() as github:
        _actions(monkeypatch, github.url)
        github.answer(where, permission(OWNER, "write"))
        said = _in_actions(capsys, head, "--base", attack_repo.base, given)
        assert said[:2] == [
            "0",
            "trust roots: 1 changed (evidence/keys/mallory.pub); each approved at the head by a "
            f"code owner who can write (@{OWNER}: write; permissions from GitHub)",
        ]
        assert github.asked == [(where, "Bearer ghs_the_jobs_token")]
        # GitHub says read: refused, and so is an answer GitHub could not give.
        github.answer(where, permission(OWNER, "read"))
        said = _in_actions(capsys, head, "--base", attack_repo.base, given)
        assert said[0] == "9"
        assert "but can read here, not write (GitHub), so it does not count" in said[1]
        github.raw(where, b'{"message": "Bad credentials"}', status=401)
        said = _in_actions(capsys, head, "--base", attack_repo.base, given)
        assert said[0] == "9"
        assert (
            f"the answer whether @{OWNER} can write has no answer (HTTP 401: "
            '{"message": "Bad credentials"}), so it does not count'
        ) in said[1]
        github.raw(where, b'{"permission": "write", "permission": "admin"}')
        said = _in_actions(capsys, head, "--base", attack_repo.base, given)
        assert said[0] == "9"
        assert f"can write is malformed ({github.url}{where}: duplicate key" in said[1]


def test_an_answer_that_never_comes_ends_at_the_deadline_and_is_no_approval() -> None:
    """GitHub accepts the request and stalls for 60 s; the 2 s deadline ends it: no answer."""
    where = f"/repos/octo/twinbuild/collaborators/{OWNER}/permission"
    with fake_github.serving() as github:
        github.stalls.add(where)
        asker = GitHubAnswers(api=github.url, repository="octo/twinbuild", token="t", timeout=2)  # noqa: S106 (a test token)
        found = asker.permission(OWNER)
    assert found.level is None
    assert not found.writes
    assert found.problem.startswith("has no answer (")
    assert "within 2s" in found.problem


def test_the_shipped_codeowners_names_the_placeholder_and_the_tests_replace_it() -> None:
    ours = Path(__file__).resolve().parents[2] / ".github/CODEOWNERS"
    assert f"@{PLACEHOLDER}" in ours.read_text()
