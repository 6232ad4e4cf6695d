"""One HTTP request to a registry, inside a deadline, with an answer no larger than its limit.

Every request twinbuild itself sends to a registry goes through here (the engine pushes and pulls
images with its own client). Whatever the other end does:

- **One deadline covers the whole request** (:class:`Deadline`): name lookup, connect, TLS, the
  request, the status line, the headers and the body. Every wait on the socket is given only the
  time that is left, so a registry that accepts and never answers, or sends a byte every few
  seconds, ends at the deadline and not when it pleases. A :class:`Clock` also caps the total of
  one command's requests.
- **The answer is bounded while it is read**: a ``Content-Length`` over the limit is refused before
  the body is read, and without one reading stops at the first byte past the limit, so memory is
  bounded by the limit, not by what the registry sends. http.client bounds the status line and
  headers (64 KiB a line, 100 headers).
- **Nothing is followed**: a redirect is an answer like any other; the caller decides where it may
  lead (``twinbuild.ship.oci``).
- **Plain HTTP only to loopback**: a request marked ``loopback`` connects only to loopback
  addresses, so ``localhost`` that resolves elsewhere is refused rather than spoken to in clear.

It also holds what every registry client shares: the request deadline
(``TWINBUILD_REGISTRY_TIMEOUT``, :func:`clock`) and which registries are loopback (:func:`loopback`:
plain HTTP, like Docker). Only the clients import it, and only when a registry is asked something:
it brings ``http.client`` and ``ssl`` along.
"""

from __future__ import annotations

import functools
import http.client
import io
import ipaddress
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import SplitResult, urlsplit

from twinbuild import __version__
from twinbuild.errors import EngineError
from twinbuild.util import environ

USER_AGENT = f"twinbuild/{__version__}"


#: The deadline of every registry request twinbuild sends, and of one command's together.
TIMEOUT_ENV_VAR = "TWINBUILD_REGISTRY_TIMEOUT"
DEFAULT_TIMEOUT_S = 60
MAX_TIMEOUT_S = 3600
COMMAND_TIMEOUTS = 10  # all of one command's registry requests together: ten request timeouts


def size_text(n: int) -> str:
    """``4 MiB``, ``64 KiB`` or ``123 bytes``."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


class Clock:
    """The deadlines of one command's registry requests: ``timeout`` seconds each, and ``budget``
    seconds for all of them together; ``hint`` says in messages how to change them."""

    def __init__(
        self,
        *,
        timeout: float,
        budget: float,
        hint: str = "",
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout, self.budget, self.hint = timeout, budget, hint
        self._now = now
        self._end = now() + budget

    def deadline(self) -> Deadline:
        """A fresh deadline for one request (never past the command's budget)."""
        return Deadline(self)

    def now(self) -> float:
        return self._now()

    @property
    def end(self) -> float:
        return self._end

    def grant(self, seconds: float) -> None:
        """More budget: a copy that keeps moving data earns its time chunk by chunk."""
        self._end += seconds


class Deadline:
    """When one request must be done; ``left()`` is what every socket wait is given."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.rearm()

    def rearm(self) -> None:
        """A fresh ``timeout`` from now (for the next chunk of a long transfer)."""
        now = self._clock.now()
        self._end = min(now + self._clock.timeout, self._clock.end)
        self.budget_bound = self._clock.end <= now + self._clock.timeout

    def left(self) -> float:
        """Seconds left; TimeoutError when none are."""
        remaining = self._end - self._clock.now()
        if remaining <= 0:
            raise TimeoutError("deadline passed")
        return remaining


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One request; ``what`` (the step, e.g. ``read REPO:TAG``) starts every message about it."""

    method: str
    url: str  # http:// or https://
    what: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    limit: int = 64 << 10  # most bytes of answer body read
    limit_note: str = ""  # why that limit, for the refusal ("a manifest is at most 4 MiB")
    loopback: bool = False  # plain HTTP: connect only to loopback addresses
    peer: str = "registry"  # what messages call the other end: "registry", "index", "server"

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    @property
    def target(self) -> str:
        """``METHOD /path`` as messages name the request."""
        return f"{self.method} {urlsplit(self.url).path}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # lower-case names; of a repeated header, the first
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def text(self) -> str:
        """The body as one short printable line (for an error message: a registry writes it)."""
        text = " ".join(self.body[:400].decode("utf-8", "replace").split())[:200]
        return "".join(c if c.isprintable() else "?" for c in text)


def exchange(request: Request, clock: Clock) -> Answer:
    """Send ``request`` and read its whole answer, both inside one deadline of ``clock``."""
    deadline = clock.deadline()
    with _response(request, deadline, clock) as response:
        body = _body(response, request)
        return Answer(status=response.status, headers=_headers(response), body=body)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    """An answer whose body is read chunk by chunk, each chunk inside a fresh deadline."""

    status: int
    headers: Mapping[str, str]
    chunks: Iterator[bytes]

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@contextmanager
def streaming(request: Request, clock: Clock, *, chunk: int, total: int) -> Iterator[Stream]:
    """The answer to ``request`` with its body as chunks of at most ``chunk`` bytes, ``total`` in
    all (more is refused). Each chunk must arrive within the request timeout and earns the
    command that much more budget: a long copy moves on as long as data does."""
    deadline = clock.deadline()
    with _response(request, deadline, clock) as response:
        _announced(response, request, total)

        def chunks() -> Iterator[bytes]:
            seen = 0
            while True:
                clock.grant(clock.timeout)
                deadline.rearm()
                data = response.read(min(chunk, total + 1 - seen))
                if not data:
                    return
                seen += len(data)
                if seen > total:
                    raise _too_large(request, total, "")
                yield data

        yield Stream(status=response.status, headers=_headers(response), chunks=chunks())


class _Refused(Exception):
    """A connection twinbuild will not make; the reason goes into the request's message."""


@contextmanager
def _response(
    request: Request, deadline: Deadline, clock: Clock
) -> Iterator[http.client.HTTPResponse]:
    parts = urlsplit(request.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EngineError(f"{request.what}: {request.url!r} is not an http(s) address")
    try:
        conn = _Connection(parts, deadline, loopback=request.loopback)
    except (ValueError, http.client.InvalidURL) as exc:  # a port out of range, a space in a host
        raise EngineError(
            f"{request.what}: {request.url!r} is not an http(s) address: {exc}"
        ) from None
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    headers = {"User-Agent": USER_AGENT, **request.headers}
    response: http.client.HTTPResponse | None = None
    try:
        conn.request(request.method, path or "/", body=request.body or None, headers=headers)
        response = conn.getresponse()
        yield response
    except TimeoutError:
        raise _late(request, deadline, clock) from None
    except _Refused as exc:
        raise EngineError(f"{request.what}: {exc}; refusing {request.target}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise EngineError(
            f"{request.what}: the {request.peer} {request.host} does not answer {request.target} "
            f"({_reason(exc)})"
        ) from None
    finally:
        if response is not None:
            response.close()
        conn.close()


def _late(request: Request, deadline: Deadline, clock: Clock) -> EngineError:
    hint = f" ({clock.hint})" if clock.hint else ""
    if deadline.budget_bound:
        return EngineError(
            f"{request.what}: the {request.peer} {request.host} had not answered {request.target} "
            f"when this command's {clock.budget:g}s for {request.peer} requests ran out{hint}"
        )
    return EngineError(
        f"{request.what}: the {request.peer} {request.host} sent no complete answer to "
        f"{request.target} within {clock.timeout:g}s{hint}"
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"its name does not resolve: {exc.strerror}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS: {exc.reason or exc}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:160] if text else type(exc).__name__


def _too_large(request: Request, limit: int, detail: str) -> EngineError:
    note = f"; {request.limit_note}" if request.limit_note else ""
    said = f" ({detail})" if detail else ""
    return EngineError(
        f"{request.what}: the {request.peer} {request.host} answered {request.target} with more "
        f"than {size_text(limit)}{said}{note}; refusing it"
    )


def _announced(response: http.client.HTTPResponse, request: Request, limit: int) -> None:
    """Refuse, before reading, a body whose ``Content-Length`` is over ``limit``."""
    length = response.getheader("Content-Length") or ""
    if length.isascii() and length.isdigit() and int(length) > limit:
        raise _too_large(request, limit, f"it announced {size_text(int(length))}")


def _body(response: http.client.HTTPResponse, request: Request) -> bytes:
    if request.method == "HEAD":  # its Content-Length is the object's; no body follows
        return b""
    _announced(response, request, request.limit)
    data = response.read(request.limit + 1)
    if len(data) > request.limit:
        raise _too_large(request, request.limit, "")
    return data


def _headers(response: http.client.HTTPResponse) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in response.getheaders():
        found.setdefault(name.lower(), value)
    return found


# --- the connection ---------------------------------------------------------------------------


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


class _Connection(http.client.HTTPConnection):
    """http.client over a socket whose every wait is given what is left of the deadline."""

    def __init__(self, parts: SplitResult, deadline: Deadline, *, loopback: bool) -> None:
        self._tls_on = parts.scheme == "https"
        super().__init__(parts.hostname or "", parts.port or (443 if self._tls_on else 80))
        self._deadline, self._loopback = deadline, loopback

    def connect(self) -> None:
        sock = _connect(self.host, self.port, self._deadline, loopback=self._loopback)
        if self._tls_on:
            sock.settimeout(self._deadline.left())
            try:
                sock = _tls().wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        self.sock = cast(socket.socket, _TimedSocket(sock, self._deadline))


def _connect(host: str, port: int, deadline: Deadline, *, loopback: bool) -> socket.socket:
    addresses = _resolve(host, port, deadline)
    if loopback:
        addresses = [a for a in addresses if ipaddress.ip_address(a[1][0]).is_loopback]
        if not addresses:
            raise _Refused(
                f"{host} does not resolve to a loopback address here, and twinbuild speaks plain "
                "HTTP only to loopback"
            )
    last: OSError = OSError(f"{host} has no address")
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(deadline.left())
            sock.connect(address)
        except TimeoutError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            last = exc
        else:
            return sock
    raise last


def _resolve(host: str, port: int, deadline: Deadline) -> list[tuple[int, tuple[str, int]]]:
    """The addresses of ``host``: a literal address as it is, a name looked up in a thread so the
    lookup too ends at the deadline."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (host, port))]
    answers: queue.Queue[list[tuple[int, tuple[str, int]]] | OSError] = queue.Queue(1)

    def look_up() -> None:
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            answers.put(exc)
        except UnicodeError as exc:  # a name IDNA cannot encode ('.', a label over 63)
            answers.put(OSError(f"{host!r} is not a host name ({exc})"))
        else:
            answers.put([(f, (str(a[0]), int(a[1]))) for f, _, _, _, a in found])

    threading.Thread(target=look_up, name=f"resolve {host}", daemon=True).start()
    try:
        got = answers.get(timeout=deadline.left())
    except queue.Empty:
        raise TimeoutError(f"looking up {host}") from None
    if isinstance(got, OSError):
        raise got
    return got


class _TimedSocket:
    """What http.client uses of a socket (``sendall``, ``makefile``, ``close``), each wait bounded
    by the deadline. Like a socket, it stays open while a reader made by ``makefile`` is:
    http.client closes the connection once it sees an answer that ends with it, then reads on."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self._sock, self._deadline = sock, deadline
        self._readers = 0
        self._closed = False

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(self._deadline.left())  # sendall's timeout covers all of it
        self._sock.sendall(data)

    def makefile(self, mode: str = "rb", *_args: object, **_kwargs: object) -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_TimedReader(self, self._sock, self._deadline))

    def close(self) -> None:
        self._closed = True
        if self._readers == 0:
            self._sock.close()

    def reader_closed(self) -> None:
        self._readers -= 1
        if self._closed and self._readers == 0:
            self._sock.close()


class _TimedReader(io.RawIOBase):
    def __init__(self, owner: _TimedSocket, sock: socket.socket, deadline: Deadline) -> None:
        super().__init__()
        self._owner, self._sock, self._deadline = owner, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        self._sock.settimeout(self._deadline.left())
        return self._sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._owner.reader_closed()
        super().close()


def internal_host(host: str) -> bool:
    """An address no registry should send twinbuild to: loopback, private, link-local..."""
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not ip.is_global


def request_timeout(env: Mapping[str, str] | None = None) -> int:
    """Seconds one registry request may take, connect to last byte (``TWINBUILD_REGISTRY_TIMEOUT``,
    whole seconds in ASCII digits, 1 to 3600; default 60)."""
    seconds = environ.whole(
        TIMEOUT_ENV_VAR, low=1, high=MAX_TIMEOUT_S, env=env,
        hint=f"set whole seconds, e.g. {DEFAULT_TIMEOUT_S}, or unset it for the default",
    )  # fmt: skip
    return DEFAULT_TIMEOUT_S if seconds is None else seconds


def clock(env: Mapping[str, str] | None = None) -> Clock:
    """The deadlines of one command's registry requests: each within the request timeout, all of
    them within ``COMMAND_TIMEOUTS`` of it."""
    timeout = request_timeout(env)
    return Clock(
        timeout=timeout,
        budget=timeout * COMMAND_TIMEOUTS,
        hint=f"{TIMEOUT_ENV_VAR}={timeout} sets it; a command gets {COMMAND_TIMEOUTS} times that",
    )


def loopback(registry: str) -> bool:
    """Whether ``host[:port]`` is a literal loopback address or ``localhost``: decided by parsing
    the host, so ``127.attacker.example`` is a name like any other (TLS, verified)."""
    host = registry.split("/", 1)[0]
    if host.startswith("["):
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
