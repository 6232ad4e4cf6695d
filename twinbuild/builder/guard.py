"""What makes a build safe to run twice and to interrupt: one build of one image at a time (a file
lock beside its record), and SIGTERM treated like Ctrl-C, so a stopped build tags nothing."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from twinbuild.errors import Interrupted, LockBusy
from twinbuild.util.activity import Say


@contextmanager
def lock(path: Path, tag: str, timeout: float, say: Say) -> Iterator[None]:
    import filelock  # here, not at the top: an up-to-date image never takes the lock

    held = filelock.FileLock(path)
    try:
        held.acquire(timeout=0.1)
    except filelock.Timeout:
        say(f"{tag}: another build of this image is running; waiting for it ({path})")
        try:
            held.acquire(timeout=timeout)
        except filelock.Timeout:
            raise LockBusy(
                f"{tag}: still locked by another build after {timeout:.0f}s ({path}); "
                "wait for it or stop it"
            ) from None
    try:
        yield
    finally:
        held.release()


@contextmanager
def signals() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the build stops and nothing is tagged."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(f"stopped by {signal.Signals(signum).name}; nothing was tagged")

    if not _main_thread():
        yield
        return
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
