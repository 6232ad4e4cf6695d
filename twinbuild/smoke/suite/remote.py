"""Run commands and small Python scripts on the testinfra host (container or local machine)."""

from __future__ import annotations

import json
from typing import Any

import pytest


def run_argv(host: Any, argv: list[str]) -> Any:
    """Run ``argv`` on the host, each word quoted by testinfra."""
    return host.run(" ".join(["%s"] * len(argv)), *argv)


def check(ok: object, message: str) -> None:
    """Fail the test with ``message`` alone (no traceback) unless ``ok``."""
    if not ok:
        pytest.fail(message, pytrace=False)


def run_script(host: Any, python: str, script: str, what: str) -> dict[str, Any]:
    """Run ``script`` with ``python``; its last stdout line is JSON. Fail the test otherwise."""
    result = run_argv(host, [python, "-c", script])
    tail = (result.stderr or result.stdout).strip()[-600:]
    check(result.rc == 0, f"{what}: exited {result.rc}: {tail}")
    lines = result.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    check(isinstance(data, dict), f"{what}: printed no JSON: {result.stdout.strip()[-300:]!r}")
    assert isinstance(data, dict)  # noqa: S101 -- narrows the type after check()
    return data
