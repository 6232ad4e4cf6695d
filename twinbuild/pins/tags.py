"""A base image's newer tags of the same shape: the registry side of ``pins outdated``.

The registry is asked ``GET /v2/<name>/tags/list`` (OCI distribution), anonymously, with the rules
every twinbuild registry request keeps (:mod:`twinbuild.util.exchange`,
:mod:`twinbuild.engine.registry_token`). A tag of the same shape as the pinned one is the same
text around a newer dotted version: ``v0.5.16`` -> ``v0.5.17``, and
``v0.5.16-rocm720-mi35x`` -> ``v0.5.17-rocm720-mi35x`` but never ``-rocm700-mi30x``.

The registry is the one the repository names (``docker.io`` for a bare name), or ``registry``
(``--base-registry``: a mirror, or Docker Hub's API host, which is not ``docker.io`` itself).
"""

from __future__ import annotations

import json
import re
from urllib.parse import urljoin

from packaging.version import InvalidVersion, Version

from twinbuild.engine.api import registry_of
from twinbuild.engine.registry_token import Challenge, bearer_token
from twinbuild.errors import EngineError
from twinbuild.util.exchange import Clock, Request, exchange, loopback

#: The largest tags page read, and how many pages are followed.
PAGE_MAX = 8 << 20
MAX_PAGES = 20
_SHAPE = re.compile(r"^(?P<head>[^0-9]*)(?P<version>[0-9]+(?:\.[0-9]+)+)(?P<tail>.*)$")


def name_in(repository: str, registry: str) -> str:
    """The repository's name on its registry (``library/`` for a bare Docker Hub name)."""
    name = repository.removeprefix(f"{registry}/") if "/" in repository else repository
    if registry == "docker.io" and "/" not in name:
        name = f"library/{name}"
    return name


def newest(current: str, tags: list[str]) -> str | None:
    """The newest of ``tags`` with ``current``'s shape, or None when it has no version in it."""
    shape = _SHAPE.match(current)
    if shape is None:
        return None
    best: tuple[Version, str] | None = None
    for tag in tags:
        found = _SHAPE.match(tag)
        if found is None or (found["head"], found["tail"]) != (shape["head"], shape["tail"]):
            continue
        try:
            version = Version(found["version"])
        except InvalidVersion:
            continue
        if best is None or version > best[0]:
            best = (version, tag)
    return best[1] if best else None


def list_tags(repository: str, *, clock: Clock, registry: str | None = None) -> list[str]:
    """Every tag of ``repository``; EngineError where the registry does not answer."""
    host = registry or registry_of(repository)
    name = name_in(repository, registry_of(repository))
    local = loopback(host)
    scheme = "http" if local else "https"
    what = f"pins outdated {repository}"
    url = f"{scheme}://{host}/v2/{name}/tags/list?n=1000"
    headers: dict[str, str] = {}
    tags: list[str] = []
    for _ in range(MAX_PAGES):
        request = Request(
            method="GET", url=url, what=what, headers=headers, limit=PAGE_MAX,
            limit_note="a tags page is at most 8 MiB", loopback=local,
        )  # fmt: skip
        answer = exchange(request, clock)
        if answer.status == 401 and "Authorization" not in headers:
            challenge = Challenge.parse(answer.header("WWW-Authenticate"))
            if challenge is None or challenge.scheme != "bearer":
                raise EngineError(f"{what}: the registry {host} wants a login to list tags")
            scope = f"repository:{name}:pull"
            token = bearer_token(host, challenge, [scope], clock=clock, what=what)
            headers = {"Authorization": f"Bearer {token}"}
            continue
        if answer.status != 200:
            raise EngineError(
                f"{what}: the registry {host} answered {answer.status} for the tags of {name}: "
                f"{answer.text()}"
            )
        tags += _page(answer.body, what)
        following = _next(answer.header("Link"))
        if following is None:
            return tags
        url = urljoin(url, following)
        if not url.startswith(f"{scheme}://{host}/"):
            raise EngineError(f"{what}: the registry {host} links its next page elsewhere")
    raise EngineError(f"{what}: the registry {host} lists more than {MAX_PAGES} pages of tags")


def _page(body: bytes, what: str) -> list[str]:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise EngineError(f"{what}: the registry's tags answer is malformed (no JSON)") from None
    # A registry answers {"name": ..., "tags": [...]} (tags null for a repository without
    # any); {} or [] or a list of numbers is no answer about tags at all, not "no newer tag".
    tags = doc.get("tags", ...) if isinstance(doc, dict) else ...
    if tags is None and isinstance(doc, dict) and isinstance(doc.get("name"), str):
        return []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise EngineError(
            f"{what}: the registry's tags answer is malformed (not a JSON object with a list of "
            "tags); ask again later, or pass --base-registry for a mirror"
        )
    return tags


def _next(link: str) -> str | None:
    """The ``rel="next"`` target of a ``Link`` header."""
    found = re.match(r'\s*<([^>]+)>\s*;\s*rel="?next"?', link)
    return found.group(1) if found else None
