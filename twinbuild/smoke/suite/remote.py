"""Run commands and small Python scripts on the testinfra host (container or local machine)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from twinbuild.smoke.flaky import NO_RERUN
from twinbuild.smoke.gpu_checks import SCRIPT_TIMEOUT_S, TIMED_OUT


def run_argv(host: Any, argv: list[str]) -> Any:
    """Run ``argv`` on the host, each word quoted by testinfra."""
    return host.run(" ".join(["%s"] * len(argv)), *argv)


def check(ok: object, message: str) -> None:
    """Fail the test with ``message`` alone (no traceback) unless ``ok``."""
    if not ok:
        pytest.fail(message, pytrace=False)


def run_timed(host: Any, argv: list[str], item: pytest.Item, what: str) -> Any:
    """Run ``argv`` (which starts with ``timeout``); a command that hit it fails the test and is
    marked so ``--rerun-failed-once`` never reruns it: a hang is a failure, never flaky."""
    result = run_argv(host, argv)
    if argv[0] == "timeout" and result.rc in TIMED_OUT:
        item.user_properties.append((NO_RERUN, f"{what}: timed out"))
        tail = (result.stdout + result.stderr).strip()[-400:]
        pytest.fail(
            f"{what}: did not finish within its timeout (exit {result.rc}): a hang; {tail}",
            pytrace=False,
        )
    return result


def last_json(stdout: str) -> dict[str, Any] | None:
    lines = stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def run_script(
    host: Any,
    python: str,
    script: str,
    what: str,
    *,
    item: pytest.Item | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: int = SCRIPT_TIMEOUT_S,
) -> dict[str, Any]:
    """Run ``script`` with ``python`` (under ``timeout`` when ``item`` is given, with ``env``
    added); its last stdout line is JSON. Fail the test otherwise."""
    argv = [python, "-c", script]
    if env:
        argv = ["env", *(f"{k}={v}" for k, v in env.items()), *argv]
    if item is not None:
        result = run_timed(host, ["timeout", "-k", "10", str(timeout_s), *argv], item, what)
    else:
        result = run_argv(host, argv)
    tail = (result.stderr or result.stdout).strip()[-600:]
    check(result.rc == 0, f"{what}: exited {result.rc}: {tail}")
    data = last_json(result.stdout)
    check(data is not None, f"{what}: printed no JSON: {result.stdout.strip()[-300:]!r}")
    assert data is not None  # noqa: S101 -- narrows the type after check()
    return data
