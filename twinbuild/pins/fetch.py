"""``pins bump NAME --fetch``: download what a ``url`` pin names and hash it, to pin its sha256.

For an artifact that publishes no checksum (the ROCm 7.2 VMM fix's patched ROCr is a release
asset without one), a maintainer pins it in one step on a machine that reaches its host. The
download streams through ``util.exchange``: every chunk inside a deadline, the whole at most
``MAX_ARTIFACT`` bytes, plain HTTP only to loopback; a redirect is followed only to https (a
release asset's storage host), never to plain HTTP or an internal address, at most a few times.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urljoin, urlsplit

from twinbuild.errors import EngineError

MAX_ARTIFACT = 8 << 30  # a patched library or a tool; an artifact larger than this is refused
CHUNK = 4 << 20
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)


def sha256_of(url: str, *, what: str) -> str:
    """The sha256 (64 hex) of what ``url`` serves, following https redirects."""
    from twinbuild.engine.registry import clock, loopback
    from twinbuild.util.exchange import Request, internal_host, streaming

    ticks = clock()
    target = url
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(target)
        local = loopback(parts.netloc)
        if parts.scheme != "https" and not (parts.scheme == "http" and local):
            raise EngineError(
                f"{what}: {target[:200]!r} is not https; twinbuild downloads pinned artifacts "
                "over https only (plain HTTP from loopback alone)"
            )
        request = Request(method="GET", url=target, what=f"{what}: download", loopback=local)
        with streaming(request, ticks, chunk=CHUNK, total=MAX_ARTIFACT) as stream:
            if stream.status in REDIRECTS:
                moved = urljoin(target, stream.header("Location"))
                host = urlsplit(moved).hostname or ""
                if not local and (urlsplit(moved).scheme != "https" or internal_host(host)):
                    raise EngineError(
                        f"{what}: {target} redirected to {moved[:200]!r}; only an https redirect "
                        "to a public host is followed"
                    )
                target = moved
                continue
            if stream.status != 200:
                raise EngineError(f"{what}: {target} answered {stream.status}; check the url")
            digest = hashlib.sha256()
            for chunk in stream.chunks:
                digest.update(chunk)
            return digest.hexdigest()
    raise EngineError(f"{what}: {url} redirected more than {MAX_REDIRECTS} times; refusing it")
