"""The fuzz suite's rules: a fixed, database-less profile, a time bound and a write fence.

Every property says the same thing about one reader: whatever the input, the call ends, within
:data:`TIME_BOUND_S`, in a result or the project's own error (a ``TwinbuildError``, which the CLI
prints as one line with its exit code), and writes nothing outside the test's temporary folder.

The default profile is derandomized and keeps no example database, so CI and a laptop run the
same examples and the suite stays well under a minute on two cores. For a longer hunt, run
``TWINBUILD_FUZZ=deep pytest tests/fuzz`` (random, many more examples).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import TypeVar

from hypothesis import HealthCheck, settings

from twinbuild.errors import TwinbuildError

TIME_BOUND_S = 10.0
"""One call may take this long before it counts as a hang (the slowest seen is a few ms)."""

settings.register_profile(
    "ci",
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=timedelta(seconds=TIME_BOUND_S),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    print_blob=True,
)
settings.register_profile(
    "deep",
    max_examples=5000,
    derandomize=False,
    database=None,
    deadline=timedelta(seconds=TIME_BOUND_S),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("TWINBUILD_FUZZ", "ci"))

_T = TypeVar("_T")


class Hang(BaseException):
    """The call under test ran past the time bound."""


class WroteOutside(AssertionError):
    """The call under test wrote outside its temporary folder."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,), "os.chown": (0,),
    "os.truncate": (0,), "os.utime": (0,), "shutil.rmtree": (0,), "os.rename": (0, 1),
    "os.replace": (0, 1), "os.symlink": (1,), "os.link": (1,),
}  # fmt: skip
_fence: list[str] = []  # the allowed folder while a call runs, else empty
_seen: list[str] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if not _fence:
        return
    paths: list[object] = []
    if event == "open" and len(args) >= 3:
        path, mode, flags = args[0], args[1], args[2]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        )
        if writing:
            paths.append(path)
    elif event in _PATH_EVENTS:
        paths.extend(args[i] for i in _PATH_EVENTS[event] if i < len(args))
    for path in paths:
        if isinstance(path, int) or path is None:
            continue  # a descriptor: its opening was checked
        name = os.fsdecode(path) if isinstance(path, str | bytes) else str(path)
        absolute = os.path.abspath(name)  # noqa: PTH100 (no syscalls inside an audit hook)
        if not (absolute == _fence[0] or absolute.startswith(_fence[0] + os.sep)):
            _seen.append(f"{event} {absolute}")


sys.addaudithook(_audit)


@contextlib.contextmanager
def fenced(folder: Path) -> Iterator[None]:
    """Record every write outside ``folder`` while the block runs; fail if there was one."""
    _seen.clear()
    _fence.append(os.path.realpath(folder))
    try:
        yield
    finally:
        _fence.clear()
    if _seen:
        raise WroteOutside(f"wrote outside {folder}: {_seen[:5]}")


@contextlib.contextmanager
def time_bound(seconds: float = TIME_BOUND_S) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds`` (a hang never reaches a deadline)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"no result after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(call: Callable[[], _T], *, folder: Path) -> _T | TwinbuildError:
    """``call()``'s result or the project's error; anything else fails the property."""
    with fenced(folder), time_bound():
        try:
            return call()
        except TwinbuildError as exc:
            error = exc
    assert str(error).strip(), "a TwinbuildError must say what went wrong"
    return error
