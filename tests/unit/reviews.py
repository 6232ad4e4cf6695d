"""GitHub's answers about a PR's reviewers, for tests.

The list-reviews answer (``GET /repos/{owner}/{repo}/pulls/{number}/reviews``): each review has
the fields GitHub's REST API returns for a pull request review (id, node_id, user, body, state,
html_url, pull_request_url, _links, submitted_at, commit_id, author_association), in the order the
API lists them: chronological. ``gate.yml`` fetches it with ``gh api --paginate --slurp``, which
wraps each page in a list of its own.

The collaborator-permission answer (``GET /repos/{owner}/{repo}/collaborators/{login}/permission``)
and the team-membership answer (``GET /orgs/{org}/teams/{team}/memberships/{login}``), in the
shape GitHub returns them, gathered into the file a dry run of the gate reads (``--permissions``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.evidence_builders import REPO

#: The login the test repositories' CODEOWNERS names as the owner of every trust root (ours ships
#: a placeholder the gate refuses; tests/unit/gate_repos.py puts this login in its place).
OWNER = "ada-maintainer"
_IDS = {OWNER: 9000001, "mallory": 9000666, "carol": 9000003}
#: What GitHub answers each of them may do in the test repository: the owner maintains it, carol
#: (a collaborator) may read, mallory (nobody here) nothing.
LEVELS = {OWNER: "maintain", "carol": "read", "mallory": "none"}
#: How GitHub's reviews call each of them (``author_association``).
ASSOCIATIONS = {OWNER: "MEMBER", "carol": "COLLABORATOR"}


def review(
    login: str, state: str, commit: str, *, number: int = 42, review_id: int = 1
) -> dict[str, Any]:
    """One review as the API returns it."""
    user_id = _IDS.get(login, 9000100 + review_id)
    url = f"https://api.github.com/repos/{REPO}/pulls/{number}"
    html = f"https://github.com/{REPO}/pull/{number}#pullrequestreview-{review_id}"
    return {
        "id": review_id,
        "node_id": f"PRR_kwDO{review_id:08d}",
        "user": {
            "login": login,
            "id": user_id,
            "node_id": f"U_kgDO{user_id}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
            "gravatar_id": "",
            "url": f"https://api.github.com/users/{login}",
            "html_url": f"https://github.com/{login}",
            "type": "User",
            "site_admin": False,
        },
        "body": "" if state == "APPROVED" else "see inline comments",
        "state": state,
        "html_url": html,
        "pull_request_url": url,
        "_links": {"html": {"href": html}, "pull_request": {"href": url}},
        "submitted_at": f"2025-06-01T11:{review_id % 60:02d}:00Z",
        "commit_id": commit,
        "author_association": ASSOCIATIONS.get(login.lower(), "CONTRIBUTOR"),
    }


def permission(login: str, level: str) -> dict[str, Any]:
    """GitHub's collaborator-permission answer: ``permission`` is admin, write, read or none
    (maintain reads as write, triage as read), ``role_name`` the role itself."""
    legacy = {"maintain": "write", "triage": "read"}.get(level, level)
    user_id = _IDS.get(login, 9000500)
    return {
        "permission": legacy,
        "role_name": level,
        "user": {
            "login": login, "id": user_id, "node_id": f"U_kgDO{user_id}",
            "type": "User", "site_admin": False,
            "permissions": {
                "admin": level == "admin", "maintain": level in ("admin", "maintain"),
                "push": legacy in ("admin", "write"), "triage": legacy != "none",
                "pull": legacy != "none",
            },
            "role_name": level,
        },
    }  # fmt: skip


def membership(state: str = "active") -> dict[str, Any]:
    """GitHub's team-membership answer for a member (``state``: active or pending)."""
    return {"url": "https://api.github.com/teams/1/memberships/x", "role": "member", "state": state}


def permissions_file(
    path: Path,
    levels: dict[str, str] | None = None,
    teams: dict[str, dict[str, dict[str, Any]]] | None = None,
) -> Path:
    """``--permissions FILE``: each login's collaborator-permission answer (``LEVELS`` unless
    given) and each team's membership answers."""
    answers = {login: permission(login, level) for login, level in (levels or LEVELS).items()}
    path.write_text(json.dumps({"permissions": answers, "teams": teams or {}}, indent=2))
    return path


def reviews_file(path: Path, *reviews: tuple[str, str, str], pages: bool = True) -> Path:
    """Write (login, state, commit) reviews, in order, as ``gh api --paginate --slurp`` does."""
    listed = [review(login, state, commit, review_id=i + 1) for i, (login, state, commit) in
              enumerate(reviews)]  # fmt: skip
    path.write_text(json.dumps([listed] if pages else listed, indent=2), encoding="utf-8")
    return path
