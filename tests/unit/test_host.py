"""The one host-command runner: a package install is never cut off half-way.

Seen on a fresh machine: ``apt-get install qemu-user-static`` killed while dpkg ran its triggers
left the package database "interrupted", and every later ``apt-get install`` refused to run until
someone typed ``dpkg --configure -a``. Ctrl-C (or SIGTERM, which twinbuild takes as Ctrl-C) during
an install therefore waits for apt-get to finish, then stops the command as before; any other
program is stopped at once. Stand-ins of the test's own play apt-get and the other program.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import FrameType

import pytest

from twinbuild.engine.host import run_command

SLOW = '#!/bin/sh\nsleep 0.6\necho "$@" > "$MARKER"\necho installed\n'


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("apt-get", "dpkg", "other"):
        (folder / name).write_text(SLOW)
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setenv("MARKER", str(tmp_path / "marker"))
    return tmp_path / "marker"


def _interrupt_after(seconds: float) -> None:
    def raise_it(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGALRM, raise_it)
    signal.setitimer(signal.ITIMER_REAL, seconds)


@pytest.mark.parametrize("program", ["apt-get", "dpkg"])
def test_ctrl_c_during_an_install_waits_for_it_then_stops(stand_ins: Path, program: str) -> None:
    previous = signal.getsignal(signal.SIGALRM)
    try:
        _interrupt_after(0.1)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_command([program, "install", "-y", "hello"])
        assert time.monotonic() - started >= 0.5  # it waited for the install
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert stand_ins.read_text() == "install -y hello\n"  # it ran to its end


# subprocess.run kills the child on Ctrl-C and leaves reaping it to the interpreter's exit
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_ctrl_c_during_anything_else_stops_it_at_once(stand_ins: Path) -> None:
    previous = signal.getsignal(signal.SIGALRM)
    try:
        _interrupt_after(0.1)
        with pytest.raises(KeyboardInterrupt):
            run_command(["other", "x"])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    time.sleep(0.8)
    assert not stand_ins.exists()  # killed before it wrote anything


def test_an_install_says_what_it_printed(stand_ins: Path) -> None:
    assert run_command(["apt-get", "install", "hello"]) == (0, "installed\n")
    assert stand_ins.read_text() == "install hello\n"
