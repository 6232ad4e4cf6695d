"""Run commands on the testinfra host (container or local machine), and report GPU verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from twinbuild.smoke.flaky import NO_RERUN
from twinbuild.smoke.gpu_probe import Ran, Shell, Verdict


def run_argv(host: Any, argv: Sequence[str]) -> Any:
    """Run ``argv`` on the host, each word quoted by testinfra."""
    return host.run(" ".join(["%s"] * len(argv)), *argv)


def shell(host: Any) -> Shell:
    """The host as a :data:`gpu_probe.Shell`."""

    def run(argv: Sequence[str]) -> Ran:
        result = run_argv(host, argv)
        return Ran(rc=int(result.rc), stdout=str(result.stdout), stderr=str(result.stderr))

    return run


def check(ok: object, message: str) -> None:
    """Fail the test with ``message`` alone (no traceback) unless ``ok``."""
    if not ok:
        pytest.fail(message, pytrace=False)


def report(verdict: Verdict, item: pytest.Item) -> None:
    """A verdict as the test's outcome: skipped with its reason, or failed with its problems; a
    hang is marked so ``--rerun-failed-once`` never reruns it (a hang is a failure, never flaky)."""
    if verdict.outcome == "skipped":
        pytest.skip(verdict.message)
    if verdict.outcome == "failed":
        if verdict.hung:
            item.user_properties.append((NO_RERUN, f"{verdict.check}: timed out"))
        pytest.fail(verdict.message, pytrace=False)
