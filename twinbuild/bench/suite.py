"""The test suite's wall time, as `nox -s tests` runs it: the unit tests on xdist workers, then the
Docker tests in one process against the engine the test session starts for itself."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from twinbuild.bench.child import Sample, spawn
from twinbuild.bench.session import Session, measured

TARGET_S = 90.0


def bench_suite(s: Session) -> None:
    """One run of the whole suite (it takes a minute or more; once is the honest cost)."""
    if s.quick:
        return
    root = Path(s.extra["repo_root"])
    env = {k: v for k, v in s.env.items() if k != "DOCKER_HOST"}  # the suite starts its own
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    # As nox -s tests runs it: unit tests on xdist workers, then the Docker tests in one process.
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    units = spawn([*pytest, "-n", "auto", "-m", "not docker", str(root / "tests")], env=env,
                  timeout=900)  # fmt: skip
    docker = spawn([*pytest, "--run-docker", "-m", "docker", str(root / "tests")], env=env,
                   timeout=900)  # fmt: skip
    sample = Sample(
        seconds=units.seconds + docker.seconds,
        wall=units.wall + docker.wall,
        rss_mib=max(units.rss_mib, docker.rss_mib),
    )
    s.rows.append(
        measured(
            "6 test suite (nox -s tests)",
            "pytest -n auto -m 'not docker', then pytest --run-docker -m docker; whole processes",
            [sample],
            wall=True,
            target=f"<= {TARGET_S:.0f} s",
            met=sample.wall <= TARGET_S,
            note="unit and Docker tests, the session's own engine and saved base",
        )
    )
