"""A registry's login challenge and its token service: what both registry clients share.

A registry says how it wants to be asked in ``WWW-Authenticate``: ``Basic`` (an htpasswd
registry) or ``Bearer`` (a token registry), whose ``realm`` trades credentials, or nothing for an
anonymous pull, for a token scoped to the request's repositories. The realm is an address the
registry chose, so it is held to the same rule as everything else a registry sends: https, or for
a loopback registry a loopback address, never followed through a redirect, its answer bounded,
inside the command's deadline. ``twinbuild.ship.auth`` answers with the engine's stored login,
``twinbuild pins outdated`` anonymously.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

from twinbuild.errors import EngineError
from twinbuild.util.exchange import Clock, Request, exchange, loopback

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


class TokenRefused(EngineError):
    """The token service answered 401 or 403: the credentials (or their absence) are refused."""


def bearer_token(
    registry: str,
    challenge: Challenge,
    scopes: Sequence[str],
    *,
    clock: Clock,
    what: str,
    basic: str | None = None,
) -> str:
    """A token for ``scopes`` from ``challenge``'s realm; ``basic``: the login it trades, base64
    ``user:password`` (None: ask anonymously). :class:`TokenRefused` on 401 or 403."""
    realm = challenge.params.get("realm", "")
    parts = urlsplit(realm)
    local = loopback(registry)
    allowed = parts.scheme == "https" or (
        parts.scheme == "http" and local and loopback(parts.netloc)
    )
    if not allowed or not parts.hostname or (local and not loopback(parts.netloc)):
        raise EngineError(
            f"{what}: the registry {registry} sends its logins to {realm!r}; twinbuild "
            "sends credentials only over https (a loopback registry: only to loopback), "
            "refusing it"
        )
    query = [("scope", s) for s in scopes]
    if challenge.params.get("service"):
        query.insert(0, ("service", challenge.params["service"]))
    separator = "&" if parts.query else "?"
    headers = {"Authorization": "Basic " + basic} if basic else {}
    request = Request(
        method="GET", url=f"{realm}{separator}{urlencode(query)}",
        what=f"{what} (token)", headers=headers, limit=TOKEN_MAX,
        limit_note="a token answer is a few KiB", loopback=parts.scheme == "http",
    )  # fmt: skip
    reply = exchange(request, clock)
    if reply.status in (401, 403):
        raise TokenRefused(f"{what}: the token service {parts.netloc} answered {reply.status}")
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
