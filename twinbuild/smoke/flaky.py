"""The rerun policy for GPU tests, and the pytest plugin that applies it and records every outcome.

``--rerun-failed-once``: a failed test marked ``gpu`` runs once more. A pass on the rerun is
recorded as flaky (reported, never hidden); two failures are a failure; there is never a third
attempt. Tests without the marker never rerun: a pin mismatch is not flaky. Nor does a GPU test
that recorded ``NO_RERUN`` in its user properties (``remote.report`` does when a command hit
its timeout): a hang is a failure, never flaky.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest
from _pytest.runner import runtestprotocol

Outcome = Literal["passed", "failed", "skipped"]
RERUN_MARKER = "gpu"
NO_RERUN = "no_rerun"  # a user property: why this failure must not be rerun
MAX_ATTEMPTS = 2
_IGNORED_MARKERS = {"parametrize", "usefixtures", "skip", "skipif", "xfail", "filterwarnings"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    outcome: Outcome
    attempts: int
    flaky: bool


def outcome_of(reports: list[pytest.TestReport]) -> Outcome:
    """One attempt's outcome from its setup/call/teardown reports."""
    if any(r.failed for r in reports):
        return "failed"
    if any(r.skipped for r in reports):
        return "skipped"
    return "passed"


def verdict(attempts: list[Outcome]) -> Verdict:
    """The final word on a test from the outcomes of its attempts (one or two)."""
    if not attempts or len(attempts) > MAX_ATTEMPTS:
        raise ValueError(f"a test runs once or twice, not {len(attempts)} times")
    if len(attempts) == 2 and attempts[0] != "failed":
        raise ValueError("only a failed attempt is rerun")
    last = attempts[-1]
    return Verdict(
        outcome=last, attempts=len(attempts), flaky=len(attempts) == 2 and last == "passed"
    )


def should_rerun(item: pytest.Item, first: Outcome, *, enabled: bool) -> bool:
    if any(key == NO_RERUN for key, _ in item.user_properties):
        return False
    return enabled and first == "failed" and item.get_closest_marker(RERUN_MARKER) is not None


def _message(report: pytest.TestReport) -> str:
    longrepr: Any = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, "Skipped: why")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and report.when == "call":
        return str(crash.message).removeprefix("Failed: ")  # pytest.fail(..., pytrace=False)
    return str(report.longreprtext).strip()


class Recorder:
    """Reruns failed GPU tests once (when enabled) and keeps one record per test."""

    def __init__(self, *, rerun_failed_once: bool) -> None:
        self.rerun = rerun_failed_once
        self.records: list[dict[str, Any]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        outcomes = [outcome_of(reports)]
        if should_rerun(item, outcomes[0], enabled=self.rerun):
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            outcomes.append(outcome_of(reports))
        final = verdict(outcomes)
        for report in reports:
            report.user_properties.append(("attempts", final.attempts))
            report.user_properties.append(("flaky", final.flaky))
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        self.records.append(self._record(item, reports, final))
        return True

    @staticmethod
    def _record(
        item: pytest.Item, reports: list[pytest.TestReport], final: Verdict
    ) -> dict[str, Any]:
        decisive = next((r for r in reports if r.failed), None) or next(
            (r for r in reports if r.skipped), None
        )
        markers = sorted({m.name for m in item.iter_markers()} - _IGNORED_MARKERS)
        return {
            "id": item.nodeid,
            "outcome": final.outcome,
            "attempts": final.attempts,
            "flaky": final.flaky,
            "duration_s": round(sum(r.duration for r in reports), 3),
            "markers": markers,
            "message": _message(decisive) if decisive is not None else "",
        }
