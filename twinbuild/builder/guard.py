"""What makes a build safe to run twice and to interrupt: one build of one image at a time (a file
lock beside its record), and SIGTERM treated like Ctrl-C, so a stopped build tags nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from twinbuild.errors import Interrupted, LockBusy
from twinbuild.util.activity import Say
from twinbuild.util.signals import stopping


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


def signals() -> AbstractContextManager[None]:
    """SIGTERM behaves like Ctrl-C: the build stops and nothing is tagged."""
    return stopping(lambda name: Interrupted(f"stopped by {name}; nothing was tagged"))
