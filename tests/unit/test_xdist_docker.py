"""The Docker tests run on one xdist worker, one after another, while other workers share the rest.

Run for real: pytest with xdist in a child process, on a tree laid out as ours is.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.xdist_docker import misplaced, unit_of

REPO = Path(__file__).resolve().parents[2]
RECORD = """
import os, time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.xdist_docker import misplaced, unit_of

def _record(name):
    start = time.monotonic()
    time.sleep({pause})
    with Path({log!r}).open("a") as f:
        f.write(f"{{name}} {{os.environ['PYTEST_XDIST_WORKER']}} {{start}} {{time.monotonic()}}\\n")
"""
CONFTEST = """
import pytest
from tests.xdist_docker import make_scheduler

@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log)
"""


def _tree(root: Path, *, ours: bool) -> Path:
    log = root / "log"
    # Two Docker modules: grouping by module (xdist's loadscope) would run them at once.
    for folder, module, tests, pause in (
        ("docker", "d1", range(3), 0.1),
        ("docker", "d2", range(3, 6), 0.1),
        ("docker/own_engine", "o", range(2), 0.1),
        *(("unit", f"u{i}", range(i, i + 1), 0.05) for i in range(4)),
    ):
        (root / "tests" / folder).mkdir(parents=True, exist_ok=True)
        prefix = module[0]
        body = RECORD.format(pause=pause, log=str(log))
        body += "".join(f"\ndef test_{prefix}{i}():\n    _record('{prefix}{i}')\n" for i in tests)
        (root / "tests" / folder / f"test_{module}.py").write_text(body)
    (root / "conftest.py").write_text(CONFTEST if ours else "")
    return log


def _run(root: Path, *, ours: bool) -> dict[str, tuple[str, float, float]]:
    log = _tree(root, ours=ours)
    # xdist alone: the other plugins (hypothesis, testinfra) cost each of three processes time
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "xdist", "-n", "2", "-p", "no:cacheprovider",
         "tests"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = (line.split() for line in log.read_text().splitlines())
    return {name: (worker, float(a), float(b)) for name, worker, a, b in rows}


def test_docker_tests_share_one_worker_and_never_overlap(tmp_path: Path) -> None:
    ran = _run(tmp_path, ours=True)
    docker = sorted((v for k, v in ran.items() if k.startswith("d")), key=lambda v: v[1])
    assert len(docker) == 6
    assert len({worker for worker, _, _ in docker}) == 1
    assert all(a[2] <= b[1] for a, b in itertools.pairwise(docker))
    units = {worker for name, (worker, _, _) in ran.items() if name.startswith("u")}
    assert units - {docker[0][0]}, "the other worker ran no unit test"
    # a module with an engine of its own is one unit of its own, beside the shared one
    assert len({worker for name, (worker, _, _) in ran.items() if name.startswith("o")}) == 1
    assert ran["o0"][0] != docker[0][0]


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/docker/test_build.py::test_a", "tests/docker/"),
        ("tests/docker/test_ship.py::test_b[x]", "tests/docker/"),
        ("tests/docker/own_engine/test_e.py::test_c", "tests/docker/own_engine/test_e.py"),
        ("tests/unit/test_lint.py::test_d", "tests/unit/test_lint.py::test_d"),
        ("tests/dockerfile/test_x.py::test_e", "tests/dockerfile/test_x.py::test_e"),
        ("tests/unit/test_renovate.py::test_f", "tests/unit/test_renovate.py"),
    ],
)
def test_the_unit_of_each_test(nodeid: str, unit: str) -> None:
    assert unit_of(nodeid) == unit


def test_an_own_engine_test_without_its_engine_is_refused() -> None:
    item = SimpleNamespace(nodeid="tests/docker/own_engine/test_e.py::test_c", fixturenames=[])
    fine = SimpleNamespace(nodeid=item.nodeid, fixturenames=["tmp_path", "private"])
    shared = SimpleNamespace(nodeid="tests/docker/test_build.py::test_a", fixturenames=[])
    assert misplaced([fine, shared]) is None
    assert misplaced([fine, item]) == (
        "tests/docker/own_engine/test_e.py::test_c: a test under tests/docker/own_engine/ runs "
        "beside the session engine's tests, so it must use the 'private' engine; move it to "
        "tests/docker/"
    )


def test_without_it_xdist_spreads_them(tmp_path: Path) -> None:
    """The control: xdist's own scheduler puts Docker tests on both workers."""
    ran = _run(tmp_path, ours=False)
    assert len({worker for name, (worker, _, _) in ran.items() if name.startswith("d")}) == 2
