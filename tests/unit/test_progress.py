"""Progress lines: a long step says when it starts and how long it took, cached steps stay quiet."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import pytest

from twinbuild.builder.progress import BuildStream
from twinbuild.util import activity


def _varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        out += bytes([low | (0x80 if n else 0)])
        if not n:
            return out


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _vertex(digest: str, name: str, *, started: int, completed: int | None = None,
            cached: bool = False) -> str:  # fmt: skip
    """A BuildKit StatusResponse with one vertex, in protobuf wire format, base64 as the engine
    sends it in ``moby.buildkit.trace`` messages (fields as in moby/buildkit control.proto)."""
    body = _field(1, digest.encode()) + _field(3, name.encode())
    if cached:
        body += _field(4, 1)
    body += _field(5, _field(1, started))
    if completed is not None:
        body += _field(6, _field(1, completed))
    return base64.b64encode(_field(1, body)).decode()


def _trace(aux: str) -> dict[str, object]:
    return {"id": "moby.buildkit.trace", "aux": aux}


def test_buildkit_step_that_runs_says_started_then_its_time(tmp_path: Path) -> None:
    said: list[str] = []
    stream = BuildStream(tmp_path / "build.log", said.append, label="cuda/local")
    chunks: list[dict[str, object]] = [
        _trace(_vertex("sha256:a", "[1/2] FROM base", started=100, completed=100, cached=True)),
        _trace(_vertex("sha256:b", "[2/2] RUN pip install x", started=100)),
        _trace(_vertex("sha256:b", "[2/2] RUN pip install x", started=100, completed=112)),
        {"aux": {"ID": "sha256:" + "f" * 64}},
    ]
    assert stream.consume(chunks) == "sha256:" + "f" * 64
    assert said[:3] == [
        "[cuda/local] [1/2] FROM base (cached, 0.0s)",
        "[cuda/local] [2/2] RUN pip install x: started",
        "[cuda/local] [2/2] RUN pip install x (ran, 12.0s)",
    ]
    assert re.fullmatch(r"\[cuda/local\] done in \d+\.\ds", said[3])
    assert "started: [2/2] RUN pip install x" in (tmp_path / "build.log").read_text()


def test_step_lines_and_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([10.0, 12.5, 20.0, 21.0])
    said: list[str] = []
    with activity.step("base: mmdebstrap bookworm", said.append, clock=lambda: next(ticks)):
        pass
    with (
        pytest.raises(RuntimeError),
        activity.step("wheelhouse: downloading 3 pins", said.append, clock=lambda: next(ticks)),
    ):
        raise RuntimeError("boom")
    assert said == [
        "base: mmdebstrap bookworm: started",
        "base: mmdebstrap bookworm: done in 2.5s",
        "wheelhouse: downloading 3 pins: started",
        "wheelhouse: downloading 3 pins: failed after 1.0s",
    ]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_live_line_only_on_an_interactive_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TWINBUILD_PLAIN", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert activity.live_wanted(_Tty())
    assert not activity.live_wanted(io.StringIO())  # a pipe or a log file
    monkeypatch.setenv("CI", "true")
    assert not activity.live_wanted(_Tty())  # CI logs get plain lines


def test_live_line_draws_the_running_step_and_goes_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TWINBUILD_PLAIN", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    screen = _Tty()
    live = activity.LiveLine(screen)
    task = live.add("base: mmdebstrap bookworm")
    assert task is not None
    live.remove(task)
    assert "base: mmdebstrap bookworm" in screen.getvalue()
    again = live.add("x")  # a later step starts a fresh line
    assert again is not None
    live.remove(again)
