"""One HTTP/1.0 request to the Engine API over its socket, for the few small questions asked
before anything is built (ping, inspect, list, tag).

Not ``http.client``: it brings ``email`` and ``ssl`` along, and on a no-op build those imports
cost more than the questions. Not even ``socket``: its Python layer brings ``selectors``,
``array`` and the address-family enums along (3-4 ms of a 40 ms replayed no-op,
:mod:`twinbuild.builder.noop`), where the C type it wraps, ``_socket.socket``, does all this asks.
HTTP/1.0 keeps the answer simple: the engine sends the body whole, without chunks, and closes the
connection.
"""

from __future__ import annotations

import _socket

from twinbuild.errors import EngineError

MAX_ANSWER = 64 * 2**20  # an image list of a busy engine is a few MB; more is not an answer


def request(
    docker_host: str, method: str, path: str, *, timeout: float = 120.0
) -> tuple[int, bytes]:
    """``(status, body)`` of ``METHOD path`` on ``docker_host`` (``unix://`` or ``tcp://``).

    Raises OSError when nothing answers (the caller words the message).
    """
    family, address = _address(docker_host)
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(address)
        sock.sendall(f"{method} {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode("ascii"))
        chunks: list[bytes] = []
        size = 0
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER:
                raise EngineError(f"{method} {path}: the engine's answer passed {MAX_ANSWER} bytes")
    finally:
        sock.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        raise OSError(f"not an HTTP answer from {docker_host}: {head[:60]!r}")
    return int(status_line[1]), body


def _address(docker_host: str) -> tuple[int, str | tuple[str, int]]:
    """The socket family and address of ``docker_host``. A plain ``unix:///path`` is read here;
    any other form is parsed and checked by :func:`values.engine_address` (a ConfigError naming
    it), imported only then: it brings ``dataclasses`` along, a third of a replayed no-op's
    start (:mod:`twinbuild.builder.noop`)."""
    plain = docker_host.removeprefix("unix://")
    if plain != docker_host and plain.startswith("/") and not set(plain) & set("?#%\0"):
        return _socket.AF_UNIX, plain
    from twinbuild.util import values

    where = values.engine_address(docker_host)
    family = _socket.AF_UNIX if where.scheme == "unix" else _socket.AF_INET
    if where.scheme == "tcp" and ":" in where.host:
        family = _socket.AF_INET6
    return family, where.address


def ping(docker_host: str, timeout: float = 2.0) -> bool:
    """True when ``GET /_ping`` on ``docker_host`` answers ``OK``."""
    try:
        status, body = request(docker_host, "GET", "/_ping", timeout=timeout)
    except OSError:
        return False
    return status == 200 and body[:16] == b"OK"
