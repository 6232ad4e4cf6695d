"""GitHub's list-reviews answer (``GET /repos/{owner}/{repo}/pulls/{number}/reviews``), for tests.

Each review has the fields GitHub's REST API returns for a pull request review (id, node_id, user,
body, state, html_url, pull_request_url, _links, submitted_at, commit_id, author_association),
in the order the API lists them: chronological. ``gate.yml`` fetches it with
``gh api --paginate --slurp``, which wraps each page in a list of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.evidence_builders import REPO

#: The login .github/CODEOWNERS names as the owner of every trust root.
OWNER = "twinbuild-maintainer"
_IDS = {OWNER: 9000001, "mallory": 9000666, "carol": 9000003}


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
        "author_association": "MEMBER" if login == OWNER else "CONTRIBUTOR",
    }


def reviews_file(path: Path, *reviews: tuple[str, str, str], pages: bool = True) -> Path:
    """Write (login, state, commit) reviews, in order, as ``gh api --paginate --slurp`` does."""
    listed = [review(login, state, commit, review_id=i + 1) for i, (login, state, commit) in
              enumerate(reviews)]  # fmt: skip
    path.write_text(json.dumps([listed] if pages else listed, indent=2), encoding="utf-8")
    return path
