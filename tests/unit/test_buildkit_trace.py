"""BuildKit progress messages, as the engine here sent them for a two-step build."""

from __future__ import annotations

import base64

import pytest

from twinbuild.builder.buildkit_trace import decode

# Captured from POST /build?version=2 on Docker 20.10 (the private engine): the context vertex
# started, then completed.
STARTED = (
    "CnwKR3NoYTI1NjplMjQ0NzQwZTcwNTlmZjM4MTkyMmIwMTZlODQyNWE3NTE2M2JkZjA1MGZkNjFhY2I1ODZlMjc0NDBh"
    "ODM1ZmQ4GiRbaW50ZXJuYWxdIGxvYWQgcmVtb3RlIGJ1aWxkIGNvbnRleHQqCwj/3LjYBhDzstIK"
)
COMPLETED = (
    "CokBCkdzaGEyNTY6ZTI0NDc0MGU3MDU5ZmYzODE5MjJiMDE2ZTg0MjVhNzUxNjNiZGYwNTBmZDYxYWNiNTg2ZTI3NDQw"
    "YTgzNWZkOBokW2ludGVybmFsXSBsb2FkIHJlbW90ZSBidWlsZCBjb250ZXh0KgsI/9y42AYQ87LSCjILCP/cuNgGEN/J"
    "sxw="
)
DIGEST = "sha256:e244740e7059ff381922b016e8425a75163bdf050fd61acb586e27440a835fd8"


def test_a_started_vertex() -> None:
    (vertex,) = decode(STARTED).vertexes
    assert vertex.digest == DIGEST
    assert vertex.name == "[internal] load remote build context"
    assert vertex.started is not None
    assert vertex.completed is None
    assert not vertex.cached


def test_a_completed_vertex_has_both_times() -> None:
    (vertex,) = decode(COMPLETED).vertexes
    assert vertex.completed is not None
    assert vertex.started is not None
    assert 0 <= vertex.completed - vertex.started < 1


def test_an_error_and_a_log_line() -> None:
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload

    vertex = field(1, b"sha256:x") + field(3, b"[rocm 2/2] RUN false") + field(7, b"exit code: 1")
    log = field(1, b"sha256:x") + field(4, b"oops\n")
    status = decode(base64.b64encode(field(1, vertex) + field(3, log)).decode())
    assert status.vertexes[0].error == "exit code: 1"
    assert status.logs == [("sha256:x", b"oops\n")]


@pytest.mark.parametrize("aux", ["not base64!", base64.b64encode(b"\x0a\xff").decode()])
def test_garbage_is_a_value_error(aux: str) -> None:
    with pytest.raises(ValueError, match=r"not base64|truncated varint"):
        decode(aux)
