"""The test suite's wall time as `nox -s tests` runs it, beside the layout it replaced.

Now: one pytest run on xdist workers (one more than the cores), the Docker tests as one unit on
one worker (tests/conftest.py) while the others share the unit tests. Before: the unit tests on
xdist workers, then the Docker tests in a second process. Both start their own engine and use
the saved base.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tools.bench.child import Sample, spawn
from tools.bench.session import Session, measured
from tools.bench.stats import ratio

TARGET_S = 90.0
BENCH = "6 test suite (nox -s tests)"


def bench_suite(s: Session) -> None:
    """One run of each layout (each takes a minute or more; once is the honest cost)."""
    if s.quick:
        return
    root = Path(s.extra["repo_root"])
    # the suite starts its own engine, and runs the Docker tests (TWINBUILD_NO_DOCKER unset)
    env = {k: v for k, v in s.env.items() if k not in ("DOCKER_HOST", "TWINBUILD_NO_DOCKER")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    tests = str(root / "tests")
    workers = str(len(os.sched_getaffinity(0)) + 1)  # as the noxfile's tests session
    one = spawn([*pytest, "-n", workers, tests], env=env, timeout=900)
    units = spawn([*pytest, "-n", "auto", "-m", "not docker", tests], env=env, timeout=900)
    docker = spawn([*pytest, "-m", "docker", tests], env=env, timeout=900)
    two = Sample(
        seconds=units.seconds + docker.seconds,
        wall=units.wall + docker.wall,
        rss_mib=max(units.rss_mib, docker.rss_mib),
    )
    s.rows += [
        measured(
            BENCH,
            "before: pytest -n auto -m 'not docker', then pytest -m docker",
            [two],
            wall=True,
            ratio=1.0,
            target="baseline",
        ),
        measured(
            BENCH,
            f"pytest -n {workers} (Docker tests on one worker)",
            [one],
            wall=True,
            ratio=ratio(one.wall, two.wall),
            target=f"<= {TARGET_S:.0f} s",
            met=one.wall <= TARGET_S,
            note=(
                "whole processes; unit and Docker tests, the session's own engine (its kept data "
                "root), saved base"
            ),
        ),
    ]
