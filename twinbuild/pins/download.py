"""The sha256 of a url pin's new download, fetched and hashed where the network allows.

``pins bump kubectl --version 1.37.0`` moves the url; the old sha256 cannot stay, so without
``--sha256`` the new file is fetched once and hashed as it streams (never kept). Every request
goes through :mod:`twinbuild.util.exchange`: a deadline per chunk, a bound on the size, https
only (plain http only to a loopback server), a few redirects followed to https addresses only,
never from a public server to an internal one. ``pins bump --fetch`` (a url pin whose artifact
publishes no checksum, as the ROCm 7.2 VMM fix's patched ROCr) hashes through it too.
"""

from __future__ import annotations

import hashlib
from urllib.parse import urljoin, urlsplit

from twinbuild.errors import ConfigError, EngineError
from twinbuild.util import environ
from twinbuild.util.exchange import Clock, Request, internal_host, loopback, streaming

#: The largest download hashed (a CUDA toolkit runfile is ~4 GiB).
MAX_DOWNLOAD = 8 << 30
_CHUNK = 1 << 20
_REDIRECTS = 5
TIMEOUT_VAR = "TWINBUILD_DOWNLOAD_TIMEOUT"


def _loopback(url: str) -> bool:
    """A literal loopback address or ``localhost``, by parsing the host (``util.exchange``):
    ``127.attacker.example`` is a name like any other."""
    return loopback(urlsplit(url).netloc)


def _check(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and _loopback(url)):
        return
    raise ConfigError(
        f"{where}: {url[:200]!r}: not an https address (plain http only to this machine); "
        "pass --sha256 from the release's checksum file"
    )


def clock() -> Clock:
    """Deadlines of a download: ``TWINBUILD_DOWNLOAD_TIMEOUT`` seconds without data (60)."""
    hint = "set whole seconds, e.g. 60, or unset it for the default"
    seconds = float(environ.whole(TIMEOUT_VAR, low=1, high=3600, hint=hint) or 60)
    return Clock(timeout=seconds, budget=seconds, hint=f"${TIMEOUT_VAR} sets it")


def sha256_of(url: str, *, what: str, timeout: Clock | None = None) -> str:
    """The hex sha256 of what ``url`` serves; EngineError where it cannot be fetched.

    A redirect is followed only to https (or, from a loopback server, to loopback), and never
    from a public server to an internal address (``util.exchange.internal_host``)."""
    ticking = timeout or clock()
    target, local = url, _loopback(url)
    for _ in range(_REDIRECTS + 1):
        _check(target, what)
        request = Request(
            method="GET", url=target, what=what, loopback=_loopback(target), peer="server",
            limit_note=f"a pinned download is at most {MAX_DOWNLOAD >> 30} GiB",
        )  # fmt: skip
        with streaming(request, ticking, chunk=_CHUNK, total=MAX_DOWNLOAD) as answer:
            if answer.status in (301, 302, 303, 307, 308):
                moved = urljoin(target, answer.header("Location"))
                if not local and internal_host(urlsplit(moved).hostname or ""):
                    raise EngineError(
                        f"{what}: {target[:200]} redirected to {moved[:200]!r}; only an https "
                        "redirect to a public host is followed"
                    )
                target = moved
                continue
            if answer.status != 200:
                raise EngineError(
                    f"{what}: the server {urlsplit(target).netloc} answered {answer.status} "
                    f"for {target[:200]}; check the url, or pass --url and --sha256"
                )
            digest = hashlib.sha256()
            for data in answer.chunks:
                digest.update(data)
            return digest.hexdigest()
    raise EngineError(f"{what}: {url[:200]} redirected more than {_REDIRECTS} times; refusing it")
