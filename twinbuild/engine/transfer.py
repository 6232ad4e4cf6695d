"""The engine's own push and pull, inside a deadline of twinbuild's own.

The engine talks to the registry with its own client, so twinbuild cannot put a deadline on those
requests; what it can bound is the operation. ``POST /images/NAME/push`` and
``POST /images/create`` stream one JSON message per step; twinbuild reads that stream over the
engine's socket itself (HTTP/1.0: no chunks, the engine closes the connection at the end) and
gives every wait on it only the time left. The operation must **move** within the deadline: a
layer reaching a step it had not reached (``Pushed``, ``Download complete``, ...), or 8 MiB more
sent, received or extracted, re-arms it (:class:`Progress`). Anything else (``Waiting``,
``Retrying in 5 seconds``, the same step again) does not, so a registry that never answers,
drips, redirects in a loop or streams an endless body ends at the deadline, whatever the engine
keeps doing about it. When the deadline passes, the connection is closed: the engine cancels an
operation whose client went away, and contacts the registry no more.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from twinbuild.errors import EngineError
from twinbuild.util import values

#: Bytes moved (sent, received or extracted, all layers together) that re-arm the deadline: what
#: twinbuild's own streamed copy reads in one chunk within the request timeout.
PROGRESS_BYTES = 8 << 20
MAX_HEAD = 64 << 10  # the status line and headers of the engine's answer
MAX_LINE = 1 << 20  # one progress message; the engine writes a few hundred bytes
MAX_ERROR = 64 << 10  # the body of an answer that is not 200
#: Steps that never count as moving: a layer queued behind others, a retry counting down.
_IDLE = ("Waiting", "Retrying")


@dataclass(frozen=True, slots=True, kw_only=True)
class Limit:
    """How long the operation may go without moving, and how messages say to change it."""

    seconds: float
    hint: str  # "TWINBUILD_REGISTRY_TIMEOUT=60 sets it"


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One streaming request to the engine: ``what`` starts every message about it."""

    method: str
    path: str
    headers: Mapping[str, str]
    what: str  # "push 127.0.0.1:5000/twinbuild-ci/cu13:local-amd64"
    registry: str  # the registry the engine talks to, for messages
    action: str  # "push" or "pull"


def push_call(repository: str, tag: str, *, auth: str, what: str, registry: str) -> Call:
    """``POST /images/REPOSITORY/push?tag=TAG`` with the login the engine hands the registry."""
    return Call(
        method="POST",
        path=f"/images/{quote(repository, safe='/:')}/push?{urlencode({'tag': tag})}",
        headers={"X-Registry-Auth": auth}, what=what, registry=registry, action="push",
    )  # fmt: skip


def pull_call(ref: str, *, auth: str, what: str, registry: str) -> Call:
    """``POST /images/create?fromImage=REPOSITORY&tag=TAG`` (a digest is a tag here, as the
    Docker SDK sends it)."""
    if "@" in ref:
        repository, _, tag = ref.partition("@")
    else:
        repository, _, tag = ref.rpartition(":")
        if not repository or "/" in tag:
            repository, tag = ref, "latest"
    return Call(
        method="POST",
        path=f"/images/create?{urlencode({'fromImage': repository, 'tag': tag})}",
        headers={"X-Registry-Auth": auth}, what=what, registry=registry, action="pull",
    )  # fmt: skip


class Progress:
    """Whether each message of the engine's stream moved the operation forward."""

    def __init__(self, step: int = PROGRESS_BYTES) -> None:
        self._step = step
        self._reached: set[tuple[str, str]] = set()
        self._current: dict[tuple[str, str], int] = {}
        self._moved = 0  # bytes since the deadline was last re-armed by bytes

    def moved(self, message: Mapping[str, Any]) -> bool:
        status = str(message.get("status", ""))
        if "aux" in message:
            return True  # the result (a push's digest): the end is near
        if not status or status.startswith(_IDLE):
            return False
        layer = str(message.get("id", ""))
        key = (layer, status)
        detail = message.get("progressDetail")
        current = detail.get("current") if isinstance(detail, Mapping) else None
        if isinstance(current, int) and not isinstance(current, bool):
            before = self._current.get(key, 0)
            if current > before:
                self._current[key] = current
                self._moved += current - before
            if key not in self._reached:
                self._reached.add(key)
                return True
            if self._moved >= self._step:
                self._moved = 0
                return True
            return False
        if key in self._reached:
            return False
        self._reached.add(key)
        return True


def stream(
    docker_host: str,
    call: Call,
    limit: Limit,
    *,
    now: Callable[[], float] = time.monotonic,
) -> Iterator[dict[str, Any]]:
    """The messages of ``call``, each as the engine sent it, until the engine ends the stream.

    Raises :class:`EngineError` with one line when the engine refuses the request, goes away, or
    the operation does not move for ``limit.seconds``: then the connection is closed first, which
    cancels the engine's operation.
    """
    where = values.engine_address(docker_host)
    family = socket.AF_UNIX if where.scheme == "unix" else socket.AF_INET
    if where.scheme == "tcp" and ":" in where.host:
        family = socket.AF_INET6
    progress = Progress()
    end = now() + limit.seconds
    last = ""

    def left() -> float:
        remaining = end - now()
        if remaining <= 0:
            raise TimeoutError
        return remaining

    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(left())
            sock.connect(where.address)
            head = "".join(f"{k}: {v}\r\n" for k, v in call.headers.items())
            sock.sendall(
                f"{call.method} {call.path} HTTP/1.0\r\nHost: docker\r\n{head}"
                "Content-Length: 0\r\n\r\n".encode("ascii")
            )
            reader = _Lines(sock, left)
            status = _status(reader.head(), call)
            if status != 200:
                raise _refused(call, status, reader.rest(MAX_ERROR))
            for line in reader:
                message = _message(line, call)
                if message is None:
                    continue
                last = str(message.get("status") or last)
                if progress.moved(message):
                    end = now() + limit.seconds
                yield message
        except TimeoutError:
            sock.close()  # first: the engine cancels the operation when its client goes away
            said = f"; its last word: {_printable(last)!r}" if last else ""
            raise EngineError(
                f"{call.what}: the {call.action} through the engine moved nothing for "
                f"{limit.seconds:g}s (the registry {call.registry} stalls, drips, redirects in a "
                f"loop or never ends an answer{said}); cancelled it ({limit.hint})"
            ) from None
        except OSError as exc:
            raise EngineError(
                f"{call.what}: the engine at {docker_host} stopped answering "
                f"({type(exc).__name__}); run `twinbuild engine status`"
            ) from None
    finally:
        sock.close()


class _Lines:
    """The engine's answer on ``sock``, every wait given what is left of the deadline."""

    def __init__(self, sock: socket.socket, left: Callable[[], float]) -> None:
        self._sock, self._left = sock, left
        self._buffer = b""
        self._done = False

    def _fill(self) -> bool:
        self._sock.settimeout(self._left())
        data = self._sock.recv(65536)
        if not data:
            self._done = True
            return False
        self._buffer += data
        return True

    def head(self) -> bytes:
        while b"\r\n\r\n" not in self._buffer:
            if len(self._buffer) > MAX_HEAD or not self._fill():
                raise OSError("no complete HTTP answer")
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        return head

    def rest(self, most: int) -> bytes:
        while len(self._buffer) <= most and self._fill():
            pass
        return self._buffer[:most]

    def __iter__(self) -> Iterator[bytes]:
        while True:
            line, sep, rest = self._buffer.partition(b"\n")
            if sep:
                self._buffer = rest
                yield line
                continue
            if len(self._buffer) > MAX_LINE:
                raise OSError(f"a message of the engine passed {MAX_LINE} bytes")
            if not self._fill():
                if self._buffer.strip():
                    yield self._buffer
                return


def _status(head: bytes, call: Call) -> int:
    words = head.split(b"\r\n", 1)[0].split()
    if len(words) < 2 or not words[1].isdigit() or not words[1].isascii():
        raise EngineError(f"{call.what}: not an HTTP answer from the engine: {head[:60]!r}")
    return int(words[1])


def _refused(call: Call, status: int, body: bytes) -> EngineError:
    try:
        found = json.loads(body)
        message = str(found.get("message", "")) if isinstance(found, dict) else ""
    except ValueError:
        message = body.decode("utf-8", "replace")
    return EngineError(f"{call.what}: {_printable(message)[:200] or f'HTTP {status}'}")


def _message(line: bytes, call: Call) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        found = json.loads(line)
    except ValueError:
        raise EngineError(
            f"{call.what}: the engine sent a line that is not JSON: {line[:60]!r}"
        ) from None
    if not isinstance(found, dict):
        raise EngineError(f"{call.what}: the engine sent {type(found).__name__}, not a message")
    return found


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))
