"""The deadline of the engine's push and pull (twinbuild/engine/transfer.py) without an engine.

What the real engine does against a registry that stalls, drips, loops or never ends is in
tests/docker/test_engine_deadline.py. Here: which of the engine's messages count as moving, and
the stream read from a socket served by the test that speaks as the engine does when its
registry keeps it busy without getting anywhere (``Retrying in N seconds`` for ever).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from twinbuild.engine import transfer
from twinbuild.engine.transfer import Limit, Progress, pull_call, push_call
from twinbuild.errors import EngineError

MiB = 1 << 20


def test_waiting_and_retrying_never_count_as_moving() -> None:
    progress = Progress()
    assert progress.moved({"status": "Preparing", "id": "a"})
    assert not progress.moved({"status": "Waiting", "id": "a"})
    for n in (5, 4, 3, 2, 1, 5, 4):  # the countdown, and the next retry's
        assert not progress.moved({"status": f"Retrying in {n} seconds", "id": "a"})
    assert not progress.moved({"status": "Preparing", "id": "a"})  # the same step again
    assert progress.moved({"status": "Pushed", "id": "a"})
    assert progress.moved({"status": "Preparing", "id": "b"})  # another layer's step


def test_bytes_move_it_every_8_mib() -> None:
    progress = Progress()
    step = {"status": "Pushing", "id": "a"}
    assert progress.moved({**step, "progressDetail": {"current": 1}})  # the step is new
    moved = [progress.moved({**step, "progressDetail": {"current": n * MiB}}) for n in range(1, 33)]
    assert sum(moved) == 4  # 32 MiB in 1 MiB messages: four re-arms
    # a drip of the same byte count again and again moves nothing
    assert not any(
        progress.moved({**step, "progressDetail": {"current": 32 * MiB}}) for _ in range(100)
    )


def test_a_result_moves_it() -> None:
    assert Progress().moved({"aux": {"Digest": "sha256:" + "a" * 64}})


def test_the_requests_name_the_image() -> None:
    push = push_call("127.0.0.1:5000/twinbuild-ci/cu13", "local-amd64", auth="e30=",
                     what="push x", registry="127.0.0.1:5000")  # fmt: skip
    assert push.path == "/images/127.0.0.1:5000/twinbuild-ci/cu13/push?tag=local-amd64"
    assert push.headers == {"X-Registry-Auth": "e30="}
    digest = "sha256:" + "b" * 64
    pull = pull_call(f"r.example/a/b@{digest}", auth="e30=", what="pull x", registry="r.example")
    assert pull.path == f"/images/create?fromImage=r.example%2Fa%2Fb&tag=sha256%3A{'b' * 64}"
    assert pull_call("r.example:5000/a:v1", auth="", what="", registry="").path == (
        "/images/create?fromImage=r.example%3A5000%2Fa&tag=v1"
    )


# --- the stream --------------------------------------------------------------------------------


class Engine:
    """A socket that answers one request as the engine does: the head, then ``lines`` one every
    ``every`` seconds (``forever``: then the last again, until ``stop``), then it closes; records
    when the client left."""

    def __init__(
        self, folder: Path, head: bytes, lines: list[bytes], every: float, *, forever: bool
    ) -> None:
        self.path = folder / "engine.sock"
        self.head, self.lines, self.every, self.forever = head, lines, every, forever
        self.stop = threading.Event()
        self.client_left = threading.Event()
        self.request = b""
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(1)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def host(self) -> str:
        return f"unix://{self.path}"

    def _serve(self) -> None:
        conn, _ = self._server.accept()
        with conn:
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(4096)
            try:
                conn.sendall(self.head)
                for i in range(1_000_000 if self.forever else len(self.lines)):
                    line = self.lines[min(i, len(self.lines) - 1)]
                    if self.stop.wait(self.every if i else 0):
                        return
                    conn.sendall(line + b"\r\n")
            except OSError:  # BrokenPipe or reset: the client closed the stream
                self.client_left.set()

    def close(self) -> None:
        self.stop.set()
        self._server.close()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[list[Engine]]:
    made: list[Engine] = []
    yield made
    for engine in made:
        engine.close()


def _engine(made: list[Engine], tmp: Path, lines: list[dict[str, object]], *, every: float,
            status: bytes = b"200 OK", forever: bool = True) -> Engine:  # fmt: skip
    head = b"HTTP/1.0 " + status + b"\r\nContent-Type: application/json\r\n\r\n"
    engine = Engine(tmp, head, [json.dumps(x).encode() for x in lines], every, forever=forever)
    made.append(engine)
    return engine


CALL = push_call("127.0.0.1:9/twinbuild-ci/x", "t", auth="e30=", what="push 127.0.0.1:9/x:t",
                 registry="127.0.0.1:9")  # fmt: skip


def test_an_engine_that_only_retries_is_cancelled_at_the_deadline(
    serve: list[Engine], tmp_path: Path
) -> None:
    """Five messages a second, none of them moving: the 1 s deadline passes all the same (the
    engine here would go on for ever), and the stream is closed: the engine sees its client go."""
    retries: list[dict[str, object]] = [
        {"status": f"Retrying in {n} seconds", "id": "a"} for n in (5, 4, 3, 2, 1)
    ]
    lines: list[dict[str, object]] = [
        {"status": "The push refers to repository [127.0.0.1:9/twinbuild-ci/x]"},
        {"status": "Preparing", "id": "a"},
        *retries,
    ]
    engine = _engine(serve, tmp_path, lines, every=0.2)
    seen: list[dict[str, object]] = []
    with pytest.raises(EngineError) as refused:
        seen.extend(transfer.stream(engine.host, CALL, Limit(seconds=1, hint="T=1 sets it")))
    message = str(refused.value)
    assert message.startswith("push 127.0.0.1:9/x:t: the push through the engine moved nothing "
                              "for 1s (the registry 127.0.0.1:9 stalls"), message  # fmt: skip
    assert "its last word: 'Retrying in " in message
    assert message.endswith("cancelled it (T=1 sets it)")
    assert "\n" not in message
    assert engine.client_left.wait(30), "the stream was not closed"
    assert engine.request.startswith(b"POST /images/127.0.0.1:9/twinbuild-ci/x/push?tag=t ")
    assert b"\r\nX-Registry-Auth: e30=\r\n" in engine.request
    assert len(seen) >= 5  # the deadline passed while messages kept coming


def test_an_engine_that_says_nothing_is_cancelled(serve: list[Engine], tmp_path: Path) -> None:
    engine = _engine(serve, tmp_path, [{"status": "Preparing", "id": "a"}], every=60)
    with pytest.raises(EngineError, match=r"moved nothing for 1s.*last word: 'Preparing'"):
        list(transfer.stream(engine.host, CALL, Limit(seconds=1, hint="")))


def test_moving_re_arms_the_deadline(serve: list[Engine], tmp_path: Path) -> None:
    """Layers finishing every 0.3 s under a 1 s deadline: 8 of them, 2.4 s in all, and the end."""
    lines: list[dict[str, object]] = [{"status": "Pushed", "id": f"l{i}"} for i in range(8)]
    lines.append({"aux": {"Digest": "sha256:" + "c" * 64}})
    engine = _engine(serve, tmp_path, lines, every=0.3)
    got = []
    for message in transfer.stream(engine.host, CALL, Limit(seconds=1, hint="")):
        got.append(message)
        if "aux" in message:
            break
    assert [m.get("id") for m in got[:8]] == [f"l{i}" for i in range(8)]


def test_the_engine_refusing_is_one_line_with_its_message(
    serve: list[Engine], tmp_path: Path
) -> None:
    engine = _engine(serve, tmp_path, [{"message": "An image does not exist locally with the "
                                         "tag: 127.0.0.1:9/twinbuild-ci/x"}],
                     every=0, status=b"404 Not Found", forever=False)  # fmt: skip
    with pytest.raises(EngineError) as refused:
        list(transfer.stream(engine.host, CALL, Limit(seconds=30, hint="")))
    assert str(refused.value) == (
        "push 127.0.0.1:9/x:t: An image does not exist locally with the tag: "
        "127.0.0.1:9/twinbuild-ci/x"
    )


def test_a_line_that_is_not_json_is_refused(serve: list[Engine], tmp_path: Path) -> None:
    engine = _engine(serve, tmp_path, [{"status": "Preparing"}], every=0, forever=False)
    engine.lines = [b"<html>"]
    with pytest.raises(EngineError, match="a line that is not JSON"):
        list(transfer.stream(engine.host, CALL, Limit(seconds=30, hint="")))


def test_no_engine_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"the engine at unix://.* stopped answering"):
        list(transfer.stream(f"unix://{tmp_path}/none.sock", CALL, Limit(seconds=5, hint="")))
