"""Who can write to the repository, and who is in a team: GitHub's answers, asked when the gate
decides.

An approval names a login, and a login is only text: CODEOWNERS may name a placeholder anyone can
register, or a maintainer who left or was renamed. So an approval counts only from someone GitHub
says can write now (``admin``, ``maintain`` or ``write``): in Actions the gate asks
``GET /repos/{owner}/{repo}/collaborators/{login}/permission`` with the job's token
(:class:`GitHubAnswers`); a dry run reads the same answers from a file (:class:`FileAnswers`,
``--permissions FILE``). A team owner (``@org/team``) counts only through GitHub's answer to
``GET /orgs/{org}/teams/{team}/memberships/{login}`` (``state: active``); the job's token cannot
read an organization's teams, so in Actions a team usually counts for nothing, and the gate says
so. A missing, malformed or late answer is no answer, and no answer is never an approval.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

from twinbuild.errors import ConfigError, EngineError
from twinbuild.util import strictjson

if TYPE_CHECKING:
    from twinbuild.util.exchange import Clock

#: The permissions that write (``maintain`` as GitHub's ``role_name`` says it).
WRITES = ("admin", "maintain", "write")
LEVELS = (*WRITES, "triage", "read", "none")
#: ``author_association`` of a review by someone who is no owner, member or collaborator: such a
#: reviewer cannot write, whatever else is said (GitHub is not asked).
OUTSIDERS = ("NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "MANNEQUIN")
TIMEOUT = 10.0  # seconds for one answer
BUDGET = 60.0  # seconds for all the answers of one gate run
MAX_BYTES = 1 << 20  # one answer; GitHub's are a few KiB
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_TEAM = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Permission:
    """What GitHub said a login may do here; ``level`` None: no usable answer, ``problem`` why."""

    login: str
    level: str | None
    problem: str = ""

    @property
    def writes(self) -> bool:
        return self.level in WRITES


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """Whether GitHub said ``login`` is an active member of ``team`` (``org/slug``)."""

    team: str
    login: str
    member: bool
    problem: str = ""  # why there is no usable answer (member is then False)


class Answers(Protocol):
    """Where the gate's answers come from; ``source`` names it in the verdict."""

    @property
    def source(self) -> str: ...

    def permission(self, login: str) -> Permission: ...

    def membership(self, team: str, login: str) -> Membership: ...


def permission_of(login: str, answer: object) -> Permission:
    """The collaborator-permission answer about ``login`` (its JSON, parsed), read strictly."""
    if not isinstance(answer, dict):
        return Permission(login=login, level=None, problem="is not a JSON object")
    user = answer.get("user")
    about = user.get("login") if isinstance(user, dict) else None
    if not isinstance(about, str) or about.casefold() != login.casefold():
        return Permission(
            login=login, level=None, problem=f"is about {about!r}, not the reviewer (user.login)"
        )
    level, role = answer.get("permission"), answer.get("role_name")
    if level not in LEVELS:
        return Permission(
            login=login, level=None, problem=f"has permission {level!r}, not one of {LEVELS}"
        )
    if (level, role) in (("write", "maintain"), ("read", "triage")):
        level = role  # the legacy field folds these two roles into their neighbours
    return Permission(login=login, level=str(level))


def membership_of(team: str, login: str, answer: object) -> Membership:
    """The team-membership answer about ``login``: a member only when ``state`` is active."""
    state = answer.get("state") if isinstance(answer, dict) else None
    if state not in ("active", "pending"):
        return Membership(
            team=team, login=login, member=False, problem=f"has state {state!r}, not active"
        )
    return Membership(team=team, login=login, member=state == "active")


@dataclass(slots=True)
class NoAnswers:
    """No answers at all: every reviewer is told why."""

    why: str
    source: str = "no permission answers"

    def permission(self, login: str) -> Permission:
        return Permission(login=login, level=None, problem=self.why)

    def membership(self, team: str, login: str) -> Membership:
        return Membership(team=team, login=login, member=False, problem=self.why)


@dataclass(slots=True)
class FileAnswers:
    """A dry run's answers, as GitHub gives them, from one JSON file::

        {"permissions": {"LOGIN": <collaborator-permission answer>, ...},
         "teams": {"ORG/TEAM": {"LOGIN": <team-membership answer>, ...}, ...}}

    A file that cannot be read is no answer for anyone (each reviewer is told why)."""

    path: Path
    _data: dict[str, object] | None = field(default=None, init=False)
    _problem: str = field(default="", init=False)

    @property
    def source(self) -> str:
        return str(self.path)

    def _load(self) -> dict[str, object]:
        if self._data is None and not self._problem:
            try:
                data = strictjson.load(self.path, max_bytes=MAX_BYTES, what="permission answers")
            except ConfigError as exc:
                self._problem = f"cannot be read ({exc})"
            else:
                if isinstance(data, dict):
                    self._data = data
                else:
                    self._problem = "is not a JSON object"
        return self._data or {}

    def _table(self, key: str) -> Mapping[str, object]:
        found = self._load().get(key)
        table = found if isinstance(found, dict) else {}
        return {str(k).casefold(): v for k, v in table.items()}

    def permission(self, login: str) -> Permission:
        table = self._table("permissions")
        if self._problem:
            return Permission(login=login, level=None, problem=f"{self.path} {self._problem}")
        if login.casefold() not in table:
            return Permission(login=login, level=None, problem=f"is missing from {self.path}")
        found = permission_of(login, table[login.casefold()])
        if found.level is None:
            return Permission(login=login, level=None, problem=f"in {self.path} {found.problem}")
        return found

    def membership(self, team: str, login: str) -> Membership:
        teams = self._table("teams")
        members = teams.get(team.casefold())
        if self._problem or not isinstance(members, dict):
            why = (
                f"{self.path} {self._problem}" if self._problem else f"is missing from {self.path}"
            )
            return Membership(team=team, login=login, member=False, problem=why)
        by_login = {str(k).casefold(): v for k, v in members.items()}
        if login.casefold() not in by_login:
            return Membership(team=team, login=login, member=False)  # listed team, not a member
        found = membership_of(team, login, by_login[login.casefold()])
        if found.problem:
            return Membership(
                team=team, login=login, member=False, problem=f"in {self.path} {found.problem}"
            )
        return found


@dataclass(slots=True)
class GitHubAnswers:
    """GitHub's answers, asked with the job's token inside a deadline each (``TIMEOUT``) and
    ``BUDGET`` for all; each login and team is asked once per run."""

    api: str  # $GITHUB_API_URL
    repository: str  # owner/name
    token: str
    timeout: float = TIMEOUT
    budget: float = BUDGET
    _cache: dict[str, object] = field(default_factory=dict, init=False)
    _clock: Clock | None = field(default=None, init=False)

    @property
    def source(self) -> str:
        return "GitHub"

    def permission(self, login: str) -> Permission:
        if not _LOGIN.fullmatch(login):
            return Permission(login=login, level=None, problem="is not asked: not a login")
        path = f"/repos/{self.repository}/collaborators/{quote(login)}/permission"
        answer, problem = self._ask(path, f"ask GitHub whether @{login} can write")
        if problem:
            return Permission(login=login, level=None, problem=problem)
        found = permission_of(login, answer)
        if found.level is None:
            return Permission(login=login, level=None, problem=f"from GitHub {found.problem}")
        return found

    def membership(self, team: str, login: str) -> Membership:
        match = _TEAM.fullmatch(team)
        if match is None or not _LOGIN.fullmatch(login):
            return Membership(team=team, login=login, member=False, problem="is not asked")
        org, slug = match.groups()
        path = f"/orgs/{org}/teams/{quote(slug.lower())}/memberships/{quote(login)}"
        answer, problem = self._ask(path, f"ask GitHub whether @{login} is in @{team}")
        if problem:
            return Membership(team=team, login=login, member=False, problem=problem)
        found = membership_of(team, login, answer)
        if found.problem:
            return Membership(
                team=team, login=login, member=False, problem=f"from GitHub {found.problem}"
            )
        return found

    def _ask(self, path: str, what: str) -> tuple[object, str]:
        """(the parsed answer, '') or (None, why there is none)."""
        if path in self._cache:
            return self._cache[path], ""
        from twinbuild.util.exchange import Clock, Request, exchange  # only when GitHub is asked

        if self._clock is None:
            self._clock = Clock(timeout=self.timeout, budget=self.budget)
        url = self.api.rstrip("/") + path
        request = Request(
            method="GET", url=url, what=what, limit=MAX_BYTES, peer="server",
            loopback=url.startswith("http://"),
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            },
        )  # fmt: skip
        try:
            answer = exchange(request, self._clock)
        except EngineError as exc:
            return None, f"has no answer ({exc})"
        if answer.status != 200:
            return None, f"has no answer (HTTP {answer.status}: {answer.text()})"
        try:
            parsed = strictjson.loads(answer.body, source=url, max_bytes=MAX_BYTES, what="answer")
        except ConfigError as exc:
            return None, f"is malformed ({exc})"
        self._cache[path] = parsed
        return parsed, ""


def answers(path: Path | None, *, env: Mapping[str, str]) -> Answers:
    """The gate's answers: the file of a dry run; in GitHub Actions, GitHub, asked with
    ``$GITHUB_TOKEN`` at ``$GITHUB_API_URL``; elsewhere none (every approval is told why)."""
    if path is not None:
        return FileAnswers(path)
    if env.get("GITHUB_ACTIONS") != "true":
        return NoAnswers(
            "is not known: outside GitHub Actions pass --permissions FILE (GitHub's "
            "collaborator-permission answers) for a dry run"
        )
    api, token, repository = (
        env.get("GITHUB_API_URL", ""), env.get("GITHUB_TOKEN", ""), env.get("GITHUB_REPOSITORY", "")
    )  # fmt: skip
    if not (api and token and repository):
        return NoAnswers(
            "is not known: the gate step needs $GITHUB_TOKEN (the job's token), "
            "$GITHUB_API_URL and $GITHUB_REPOSITORY to ask GitHub"
        )
    return GitHubAnswers(api=api, repository=repository, token=token)
