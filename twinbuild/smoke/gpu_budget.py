"""The GPU proof's time budget: one total, spent step by step in priority order.

A GPU host is lent for a few minutes, so the proof spends a budget (default 480 s) in the order
that proves the most first. Each step has its own limit; it gets that limit or what is left of the
budget, whichever is less, and is not started when less than its floor is left (a step that cannot
finish proves nothing). The clock is given, so the rehearsal and the tests spend modelled seconds
on a clock they control and the same logic decides what runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

DEFAULT_BUDGET_S = 480


class Clock(Protocol):
    def now(self) -> float: ...


class Monotonic:
    """The real clock."""

    def now(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told (the rehearsal's modelled seconds, the tests')."""

    def __init__(self) -> None:
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limit:
    """What one step may spend: ``limit_s`` at most, not started below ``floor_s``."""

    limit_s: float
    floor_s: float


class Budget:
    """``total_s`` seconds on ``clock`` from the moment it is made."""

    def __init__(self, total_s: float, clock: Clock) -> None:
        self.total_s = total_s
        self.clock = clock
        self.started = clock.now()

    def spent(self) -> float:
        return self.clock.now() - self.started

    def left(self) -> float:
        return max(0.0, self.total_s - self.spent())

    def grant(self, step: Limit) -> float | None:
        """The seconds this step gets now, or None when less than its floor is left."""
        left = self.left()
        if left < step.floor_s:
            return None
        return min(step.limit_s, left)

    def refusal(self, step: Limit) -> str:
        return (
            f"not run: the budget ran out ({self.left():.0f} s of {self.total_s:.0f} s left, "
            f"this step needs at least {step.floor_s:.0f} s)"
        )
