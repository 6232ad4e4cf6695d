"""Read BuildKit's progress from the Engine API build stream.

With ``POST /build?version=2`` the engine sends ``{"id": "moby.buildkit.trace", "aux": "<base64>"}``
messages, each a protobuf ``StatusResponse`` (moby/buildkit ``api/services/control``): vertexes
(one per step: digest, name, cached, started, completed, error) and their log lines. Only those
fields are decoded here; a schema-free reader of protobuf's wire format is all it takes.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


@dataclass(slots=True, kw_only=True)
class Vertex:
    digest: str
    name: str = ""
    cached: bool = False
    started: float | None = None
    completed: float | None = None
    error: str = ""


@dataclass(slots=True, kw_only=True)
class Status:
    vertexes: list[Vertex] = field(default_factory=list)
    logs: list[tuple[str, bytes]] = field(default_factory=list)  # (vertex digest, data)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, kind = key >> 3, key & 7
        if kind == _VARINT:
            value, pos = _varint(data, pos)
            yield number, value
        elif kind == _LEN:
            size, pos = _varint(data, pos)
            yield number, data[pos : pos + size]
            pos += size
        elif kind == _I64:
            pos += 8
        elif kind == _I32:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {kind}")


def _timestamp(data: bytes) -> float:
    seconds = nanos = 0
    for number, value in _fields(data):
        if number == 1 and isinstance(value, int):
            seconds = value
        elif number == 2 and isinstance(value, int):
            nanos = value
    return seconds + nanos / 1e9


def _vertex(data: bytes) -> Vertex:
    vertex = Vertex(digest="")
    for number, value in _fields(data):
        if isinstance(value, bytes):
            if number == 1:
                vertex.digest = value.decode(errors="replace")
            elif number == 3:
                vertex.name = value.decode(errors="replace")
            elif number == 5:
                vertex.started = _timestamp(value)
            elif number == 6:
                vertex.completed = _timestamp(value)
            elif number == 7:
                vertex.error = value.decode(errors="replace")
        elif number == 4:
            vertex.cached = bool(value)
    return vertex


def _log(data: bytes) -> tuple[str, bytes]:
    digest, message = "", b""
    for number, value in _fields(data):
        if number == 1 and isinstance(value, bytes):
            digest = value.decode(errors="replace")
        elif number == 4 and isinstance(value, bytes):
            message = value
    return digest, message


def decode(aux: str) -> Status:
    """One trace message; raise ValueError when it is not one."""
    try:
        data = base64.b64decode(aux, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64: {exc}") from None
    status = Status()
    for number, value in _fields(data):
        if not isinstance(value, bytes):
            continue
        if number == 1:
            status.vertexes.append(_vertex(value))
        elif number == 3:
            status.logs.append(_log(value))
    return status
