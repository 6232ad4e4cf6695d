"""Progress lines: a long step says when it starts and how long it took, cached steps stay quiet."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.fake_engine import buildx_output
from twinbuild.builder.progress import BuildProgress
from twinbuild.util import activity

RUN_STEP = '[3/3] RUN echo "installing good" && cat /tmp/pins.txt'


def _read(tmp_path: Path, lines: list[str]) -> tuple[BuildProgress, list[str], str]:
    said: list[str] = []
    progress = BuildProgress(tmp_path / "build.log", said.append, label="cuda/local")
    for line in lines:
        progress.line(line)
    progress.close()
    return progress, said, (tmp_path / "build.log").read_text()


def test_real_buildx_progress_says_each_step_once_and_logs_its_output(tmp_path: Path) -> None:
    progress, said, log = _read(tmp_path, buildx_output("good"))
    assert said == [
        "[cuda/local] [1/3] FROM docker.io/twinbuild/base:7f45fa8f6c5d (ran, 0.0s)",
        "[cuda/local] [2/3] COPY pins.txt /tmp/pins.txt (cached, 0.0s)",
        f"[cuda/local] {RUN_STEP}: started",  # only a step that really runs says it started
        f"[cuda/local] {RUN_STEP} (ran, 0.6s)",
        "[cuda/local] exporting to image: started",
        "[cuda/local] exporting to image (ran, 0.1s)",
    ]
    assert progress.failed_step is None
    assert f"started: {RUN_STEP}\n" in log
    assert f"{RUN_STEP[:40]} | installing good\n{RUN_STEP[:40]} | click==8.1.7\n" in log
    assert "[internal] load build definition from Dockerfile" in log  # logged, not said


def test_real_buildx_failure_names_the_step_and_keeps_buildx_own_last_line(
    tmp_path: Path,
) -> None:
    progress, said, log = _read(tmp_path, buildx_output("failed"))
    step = '[3/3] RUN echo "ERROR: no matching distribution found for click==8.1.7" && exit 1'
    assert progress.failed_step == step
    assert said[-1] == f"[cuda/local] {step} (failed, 0.5s)"
    assert log.endswith(
        'ERROR: failed to solve: executor failed running [/bin/sh -c echo "ERROR: no matching '
        'distribution found for click==8.1.7" && exit 1]: exit code: 1\n'
    )
    assert progress.tail(1).startswith("  | ERROR: failed to solve: ")


def test_a_garbled_object_is_logged_as_unreadable_and_reading_goes_on(tmp_path: Path) -> None:
    good = buildx_output("good")
    _, said, log = _read(tmp_path, ["{", '  "vertexes": [', "}", *good])
    assert "(unreadable buildx progress: " in log
    assert f"[cuda/local] {RUN_STEP} (ran, 0.6s)" in said


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
