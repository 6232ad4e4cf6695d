"""SIGINT and SIGTERM: one handler, exit code 130, nothing half-done kept.

Python turns SIGINT into ``KeyboardInterrupt`` but lets SIGTERM kill the process where it
stands (exit 143), so a ``pins bump`` stopped by CI left ``pins/.manifest.toml.*.tmp`` behind.
Here both raise :class:`Stopped` (a ``KeyboardInterrupt``) in the main thread, so the code that
was running unwinds: ``write_atomic`` removes its temporary file, ``bake`` its half-staged
folders, ``keygen`` the private key it wrote without its public one; ``twinbuild.cli.main``
says which signal it was and exits 130 (docs/errors.md). SIGKILL cannot be caught; nothing
twinbuild writes is visible before its final rename, so it leaves a stray temporary file at
most, never a half-written one, and the next write of that file removes it
(``util.atomic.leftovers``). :func:`install` puts the handler in place for the whole process,
first thing (``twinbuild/__main__.py``); :func:`held` keeps a signal waiting while two steps
that belong together, or a cleanup, run.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOPPING = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``name`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.name = signal.Signals(signum).name


def stopped_by(exc: KeyboardInterrupt) -> str:
    """The signal's name for an interrupt (a plain ``KeyboardInterrupt`` is SIGINT's)."""
    return exc.name if isinstance(exc, Stopped) else "SIGINT"


def said(exc: KeyboardInterrupt) -> str:
    """The one line a stopped run ends with (docs/errors.md)."""
    return f"twinbuild: stopped by {stopped_by(exc)}; nothing half-done was kept"


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise Stopped(signum)


def _main_thread() -> bool:
    import threading  # only where a block asks: a replayed no-op starts without it (2 ms)

    return threading.current_thread() is threading.main_thread()


def install() -> None:
    """SIGINT and SIGTERM raise :class:`Stopped` from now on, for the whole process: the first
    thing ``twinbuild/__main__.py`` does, before anything heavy is imported."""
    for sig in STOPPING:
        signal.signal(sig, _stop)


@contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done (a cleanup, or two renames that belong
    together, never cut in half); one that came meanwhile is delivered after it."""
    if not _main_thread():
        yield
        return
    # The mask to restore is read before anything is blocked, and the block happens inside the
    # ``try``: a signal that was already pending runs its handler as the blocking call returns,
    # and an exception there must still unblock (else the thread, and every process it starts
    # after, keeps SIGINT and SIGTERM blocked for good: a fuzz test's SIGTERM did that).
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPPING)
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def stopping(make: Callable[[str], BaseException] | None = None) -> Iterator[None]:
    """For the block, SIGINT and SIGTERM raise ``make(name)`` (default :class:`Stopped`); the
    previous handlers come back after it. Outside the main thread (where Python delivers no
    signal) it does nothing."""

    def stop(signum: int, frame: FrameType | None) -> None:
        if make is None:
            _stop(signum, frame)
        else:
            raise make(signal.Signals(signum).name)

    if not _main_thread():
        yield
        return
    previous = {s: signal.signal(s, stop) for s in STOPPING}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
