"""The test suite's wall time, as `nox -s tests` runs it: unit and Docker tests on xdist workers,
against the engine the test session starts for itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from twinbuild.bench.child import spawn
from twinbuild.bench.session import Session, measured

TARGET_S = 90.0


def bench_suite(s: Session) -> None:
    """One run of the whole suite (it takes a minute or more; once is the honest cost)."""
    if s.quick:
        return
    root = Path(s.extra["repo_root"])
    env = {k: v for k, v in s.env.items() if k != "DOCKER_HOST"}  # the suite starts its own
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "auto",
            "--dist", "loadgroup", "--run-docker", str(root / "tests")]  # fmt: skip
    sample = spawn(argv, env=env, timeout=900)
    s.rows.append(
        measured(
            "6 test suite (nox -s tests)",
            "pytest -n auto --dist loadgroup --run-docker, whole process",
            [sample],
            wall=True,
            target=f"<= {TARGET_S:.0f} s",
            met=sample.wall <= TARGET_S,
            note="unit and Docker tests, the session's own engine and saved base",
        )
    )
