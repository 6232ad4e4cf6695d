"""What a smoke report and the evidence statement both say of a run, read one way: the GPUs it
saw and its counts. Both JSON files write these two objects with the same keys; each reader
(:mod:`twinbuild.smoke.smoke_report`, :mod:`twinbuild.evidence.statement`) takes them from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from twinbuild.util.strictjson import Fields


class Judged(Protocol):
    """A test's result as the counts read it."""

    @property
    def outcome(self) -> str: ...

    @property
    def flaky(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    flaky: int = 0

    @classmethod
    def of(cls, tests: Iterable[Judged]) -> Counts:
        listed = list(tests)
        outcomes = [t.outcome for t in listed]
        return cls(
            passed=outcomes.count("passed"),
            failed=outcomes.count("failed"),
            skipped=outcomes.count("skipped"),
            flaky=sum(1 for t in listed if t.flaky),
        )

    def describe(self) -> str:
        return (
            f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped, "
            f"{self.flaky} flaky"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """The GPUs a run saw."""

    vendor: str  # "nvidia" | "amd"
    model: str
    driver: str
    runtime: str  # CUDA version the driver supports, or the ROCm version
    count: int


def read_gpu(g: Fields | None) -> Gpu | None:
    """The ``gpu`` object (null: none seen); a key a reader takes besides these, it reads first."""
    if g is None:
        return None
    gpu = Gpu(
        vendor=g.text("vendor"),
        model=g.text("model"),
        driver=g.text("driver"),
        runtime=g.text("runtime"),
        count=g.integer("count"),
    )
    g.done()
    return gpu


def read_counts(c: Fields) -> Counts:
    """The ``counts`` object."""
    counts = Counts(
        passed=c.integer("passed"),
        failed=c.integer("failed"),
        skipped=c.integer("skipped"),
        flaky=c.integer("flaky"),
    )
    c.done()
    return counts
