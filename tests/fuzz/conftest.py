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
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import TypeVar

from hypothesis import HealthCheck, settings

from tests.write_fence import fenced
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
