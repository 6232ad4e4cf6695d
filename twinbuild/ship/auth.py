"""Registry authentication: answer a 401's challenge with the engine's stored login.

A registry says how it wants to be asked in ``WWW-Authenticate``: ``Basic`` (an htpasswd
registry) takes the stored username and password with every request; ``Bearer`` (a token
registry) trades them, or nothing for an anonymous pull, at its ``realm`` for a token scoped to
the repositories of the request. The realm is an address the registry chose, so it is held to the
same rule as everything else a registry sends: https, or for a loopback registry a loopback
address, never followed through a redirect, its answer bounded, inside the command's deadline
(``twinbuild.engine.registry_token``, which `pins outdated` asks anonymously too).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence

from twinbuild.engine.api import Credentials
from twinbuild.engine.registry_token import Challenge, TokenRefused, bearer_token
from twinbuild.errors import CredentialsMissing
from twinbuild.util.exchange import Clock

__all__ = ["Auth", "Challenge", "scope"]


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
        try:
            return bearer_token(
                self.registry, challenge, scopes, clock=self._clock, what=what,
                basic=_basic(credentials) if credentials else None,
            )  # fmt: skip
        except TokenRefused:
            raise self.refused(what) if credentials else self.missing(what) from None


def _basic(credentials: Credentials | None) -> str:
    if credentials is None:
        return ""
    raw = f"{credentials.username}:{credentials.password}".encode()
    return base64.b64encode(raw).decode("ascii")
