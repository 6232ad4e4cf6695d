"""Say when a long step starts and how long it took; on a terminal, keep a live status line.

Installing docker.io, mmdebstrap, wheel downloads and build steps each take from seconds to a
minute. Each prints ``<what>: started`` and then ``<what>: done in 12.3s`` (or ``failed after``),
so a CI log shows where the time went. On an interactive terminal a live line under the log also
shows every step still running with its elapsed time. ``rich`` draws it and is imported only then,
so a run with nothing long to do (the no-op build) never pays for it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

#: What prints a line for a person: `print`, a step's live status, a test's list.append. Declared
#: here once; every function that reports progress takes one.
Say = Callable[[str], None]


def live_wanted(stream: TextIO) -> bool:
    """A live line only on an interactive terminal: never in CI logs, pipes or dumb terminals."""
    if os.environ.get("CI") or os.environ.get("TWINBUILD_PLAIN") == "1":
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class LiveLine:
    """The steps running now, drawn under the log while there is at least one (threads share it)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._progress: Any = None  # rich.progress.Progress while a step runs
        self._tasks = 0

    def add(self, what: str) -> int | None:
        stream = self._stream or sys.stderr
        if not live_wanted(stream):
            return None
        with self._lock:
            if self._progress is None:
                from rich.console import Console
                from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

                self._progress = Progress(
                    SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=Console(file=stream), transient=True,
                )  # fmt: skip
                self._progress.start()  # print() to stdout/stderr now lands above the line
            self._tasks += 1
            task: int = self._progress.add_task(what, total=None)
            return task

    def remove(self, task: int | None) -> None:
        if task is None:
            return
        with self._lock:
            if self._progress is None:
                return
            self._progress.remove_task(task)
            self._tasks -= 1
            if self._tasks == 0:
                self._progress.stop()
                self._progress = None


LIVE = LiveLine()


@contextmanager
def step(what: str, say: Say, *, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """``what: started`` now, ``what: done in Xs`` (or ``failed after Xs``) when the block ends."""
    start = clock()
    say(f"{what}: started")
    task = LIVE.add(what)
    ok = False
    try:
        yield
        ok = True
    finally:
        LIVE.remove(task)
        say(f"{what}: {'done in' if ok else 'failed after'} {clock() - start:.1f}s")


def to_stderr(line: str) -> None:
    """A ``say`` for status lines that must stay off stdout (``eval "$(twinbuild engine env)"``)."""
    print(line, file=sys.stderr, flush=True)
