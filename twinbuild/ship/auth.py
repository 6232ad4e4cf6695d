"""Registry authentication: answer a 401's challenge with the engine's stored login.

A registry says how it wants to be asked in ``WWW-Authenticate``: ``Basic`` (an htpasswd
registry) takes the stored username and password with every request; ``Bearer`` (a token
registry) trades them, or nothing for an anonymous pull, at its ``realm`` for a token scoped to
the repositories of the request. The realm is an address the registry chose, so it is held to the
same rule as everything else a registry sends: https, or for a loopback registry a loopback
address, never followed through a redirect, its answer bounded, inside the command's deadline.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

from twinbuild.engine.api import Credentials
from twinbuild.engine.registry import loopback
from twinbuild.errors import CredentialsMissing, EngineError
from twinbuild.util.exchange import Clock, Request, exchange

TOKEN_MAX = 64 << 10  # a token answer is a few KiB
_PARAM = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"([^"]*)"|([^\s,]+))')


@dataclass(frozen=True, slots=True, kw_only=True)
class Challenge:
    """One ``WWW-Authenticate`` header: its scheme (lower case) and parameters."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, header: str) -> Challenge | None:
        scheme, _, rest = header.strip().partition(" ")
        if not scheme:
            return None
        params = {m[1].lower(): m[2] if m[2] is not None else m[3] for m in _PARAM.finditer(rest)}
        return cls(scheme=scheme.lower(), params=params)


def scope(repository: str, *, write: bool) -> str:
    return f"repository:{repository}:{'pull,push' if write else 'pull'}"


class Auth:
    """How to authorize the requests of one registry: learnt from its first 401 per scope."""

    def __init__(
        self,
        registry: str,
        *,
        clock: Clock,
        credentials: Callable[[str], Credentials | None],
    ) -> None:
        self.registry, self._clock, self._lookup = registry, clock, credentials
        self._loaded = False
        self._credentials: Credentials | None = None
        self._basic = False
        self._tokens: dict[str, str] = {}

    def header(self, scopes: Sequence[str]) -> dict[str, str]:
        """The ``Authorization`` header for a request in ``scopes``, when one is known."""
        if self._basic and self._credentials is not None:
            return {"Authorization": "Basic " + _basic(self._credentials)}
        token = self._tokens.get(" ".join(scopes))
        return {"Authorization": f"Bearer {token}"} if token else {}

    def answer(self, challenge: str, scopes: Sequence[str], what: str, *, tried: bool) -> None:
        """Learn how to pass the challenge of a 401 for a request in ``scopes``; ``tried``: the
        request already carried what we have, so the registry refused it."""
        if tried:
            raise self.refused(what)
        found = Challenge.parse(challenge)
        credentials = self._stored()
        if found is None or found.scheme not in ("basic", "bearer"):
            raise CredentialsMissing(
                f"{what}: the registry {self.registry} asks for {challenge[:60]!r}, which "
                "twinbuild cannot answer; use a registry with Basic or token authentication"
            )
        if found.scheme == "basic":
            if credentials is None:
                raise self.missing(what)
            self._basic = True
            return
        wanted = list(scopes)
        if found.params.get("scope") and found.params["scope"] not in wanted:
            wanted.insert(0, found.params["scope"])
        self._tokens[" ".join(scopes)] = self._token(found, wanted, credentials, what)

    def missing(self, what: str) -> CredentialsMissing:
        return CredentialsMissing(
            f"{what}: the registry {self.registry} wants credentials and none are stored for it; "
            f"run `docker login {self.registry}` (they go to $DOCKER_CONFIG/config.json) and retry"
        )

    def refused(self, what: str) -> CredentialsMissing:
        if self._stored() is None:
            return self.missing(what)
        return CredentialsMissing(
            f"{what}: the registry {self.registry} refused the credentials stored for it; run "
            f"`docker login {self.registry}` again (they go to $DOCKER_CONFIG/config.json)"
        )

    def _stored(self) -> Credentials | None:
        if not self._loaded:
            self._credentials, self._loaded = self._lookup(self.registry), True
        return self._credentials

    def _token(
        self,
        challenge: Challenge,
        scopes: Sequence[str],
        credentials: Credentials | None,
        what: str,
    ) -> str:
        realm = challenge.params.get("realm", "")
        parts = urlsplit(realm)
        local = loopback(self.registry)
        allowed = parts.scheme == "https" or (
            parts.scheme == "http" and local and loopback(parts.netloc)
        )
        if not allowed or not parts.hostname or (local and not loopback(parts.netloc)):
            raise EngineError(
                f"{what}: the registry {self.registry} sends its logins to {realm!r}; twinbuild "
                "sends credentials only over https (a loopback registry: only to loopback), "
                "refusing it"
            )
        query = [("scope", s) for s in scopes]
        if challenge.params.get("service"):
            query.insert(0, ("service", challenge.params["service"]))
        separator = "&" if parts.query else "?"
        headers = {"Authorization": "Basic " + _basic(credentials)} if credentials else {}
        request = Request(
            method="GET", url=f"{realm}{separator}{urlencode(query)}",
            what=f"{what} (token)", headers=headers, limit=TOKEN_MAX,
            limit_note="a token answer is a few KiB", loopback=parts.scheme == "http",
        )  # fmt: skip
        reply = exchange(request, self._clock)
        if reply.status in (401, 403):
            raise self.refused(what) if credentials else self.missing(what)
        if reply.status != 200:
            raise EngineError(
                f"{what}: the token service {parts.netloc} answered {reply.status}: {reply.text()}"
            )
        try:
            doc = json.loads(reply.body)
        except (ValueError, RecursionError):
            doc = None
        token = (doc.get("token") or doc.get("access_token")) if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token or not token.isascii():
            raise EngineError(
                f"{what}: the token service {parts.netloc} answered no token (expected a JSON "
                "object with a 'token'); refusing it"
            )
        return token


def _basic(credentials: Credentials | None) -> str:
    if credentials is None:
        return ""
    raw = f"{credentials.username}:{credentials.password}".encode()
    return base64.b64encode(raw).decode("ascii")
