"""A pull request's reviews, from GitHub's list-reviews answer: who approved which commit.

``gate.yml`` fetches ``GET /repos/{owner}/{repo}/pulls/{number}/reviews`` with the workflow token
(``pull-requests: read``) as ``gh api --paginate --slurp`` writes it (a list of pages, each a list
of reviews; one plain list is read too), in GitHub's order: chronological. What stands for each
reviewer is their latest review that decides anything (``APPROVED``, ``CHANGES_REQUESTED``, or an
approval that was ``DISMISSED``); a later comment changes nothing, as on GitHub. An approval counts
only for the commit it names: an approval of an older push is not one of the head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

from twinbuild.errors import ConfigError
from twinbuild.util import strictjson

State = Literal["APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING"]
STATES: tuple[State, ...] = get_args(State)
DECIDING: tuple[State, ...] = ("APPROVED", "CHANGES_REQUESTED", "DISMISSED")
MAX_BYTES = 16 * 1024 * 1024  # a GitHub API answer, as every other one is bounded


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    login: str | None  # None: the account was deleted (GitHub shows "ghost")
    state: State
    commit: str | None  # the commit it reviewed; None when that commit is gone
    #: GitHub's ``author_association`` (OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, ...):
    #: the first filter of who can write; None when the answer leaves it out.
    association: str | None = None


def load(path: Path) -> tuple[Review, ...]:
    """Every review in the file, in GitHub's (chronological) order."""
    data = strictjson.load(path, max_bytes=MAX_BYTES, what="reviews answer")
    if not isinstance(data, list):
        raise ConfigError(
            f"{path}: not a list of reviews; pass the answer of "
            "`gh api --paginate --slurp repos/OWNER/REPO/pulls/N/reviews`"
        )
    slurped = bool(data) and all(isinstance(page, list) for page in data)
    pages = data if slurped else [data]
    found: list[Review] = []
    for p, page in enumerate(pages):
        for i, item in enumerate(cast(list[Any], page)):
            found.append(_review(item, f"{path}: [{p}][{i}]" if slurped else f"{path}: [{i}]"))
    return tuple(found)


def standing(reviews: Sequence[Review]) -> dict[str, Review]:
    """Each reviewer's latest deciding review, keyed by login in lower case (logins are not
    case-sensitive on GitHub)."""
    out: dict[str, Review] = {}
    for review in reviews:
        if review.login is not None and review.state in DECIDING:
            out[review.login.casefold()] = review
    return out


def _review(item: object, where: str) -> Review:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: a review is an object, got {type(item).__name__}")
    state = item.get("state")
    if state not in STATES:
        raise ConfigError(
            f"{where}.state: {state!r} is not a review state ({', '.join(STATES)}); "
            "is this the list-reviews answer?"
        )
    user = item.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    if user is not None and not isinstance(login, str):
        raise ConfigError(f"{where}.user.login: expected the reviewer's login")
    commit = item.get("commit_id")
    if commit is not None and not isinstance(commit, str):
        raise ConfigError(f"{where}.commit_id: expected a commit SHA or null")
    association = item.get("author_association")
    if association is not None and not isinstance(association, str):
        raise ConfigError(f"{where}.author_association: expected a string such as MEMBER")
    return Review(login=login, state=cast(State, state), commit=commit, association=association)
