"""Fences around the outside world: Docker and GPUs only for tests that are marked for them.

Tests marked ``docker`` run only with ``--run-docker`` (or ``TWINBUILD_RUN_DOCKER=1``); every other
test gets an engine boundary that refuses to connect, so a unit test cannot reach a daemon by
accident. Tests marked ``gpu`` run only where a GPU is present.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.session_engine import SessionEngine, start
from tests.xdist_docker import make_scheduler, misplaced


class DockerBlocked(RuntimeError):
    """The engine boundary in a test not marked ``docker`` (not an EngineError: never caught)."""


BLOCKED = "blocked in tests without @pytest.mark.docker"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-docker",
        action="store_true",
        default=False,
        help="run tests marked docker (they start or use an engine); or env TWINBUILD_RUN_DOCKER=1",
    )


def _docker_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--run-docker")) or os.environ.get("TWINBUILD_RUN_DOCKER") == "1"


_ENGINE = pytest.StashKey[SessionEngine]()


def pytest_configure(config: pytest.Config) -> None:
    """With --run-docker, start the session's own engine (in the controlling process only)."""
    if not _docker_enabled(config) or hasattr(config, "workerinput"):
        return
    config.stash[_ENGINE] = start()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under xdist, the session engine's tests on one worker, one after another, and each
    own-engine module as a unit of its own (tests/xdist_docker.py)."""
    return make_scheduler(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    engine = config.stash.get(_ENGINE, None)
    if engine is not None:
        engine.stop()


@functools.cache
def gpu_vendors() -> frozenset[str]:
    """Vendors with a usable GPU here: "nvidia" (nvidia-smi lists one) and/or "amd" (/dev/kfd)."""
    found = set()
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            proc = subprocess.run(
                [smi, "-L"], capture_output=True, text=True, timeout=20, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        if proc is not None and proc.returncode == 0 and "GPU" in proc.stdout:
            found.add("nvidia")
    if Path("/dev/kfd").exists() and any(Path("/dev/dri").glob("renderD*")):
        found.add("amd")
    return frozenset(found)


_PLATFORM_VENDOR = {"cuda": "nvidia", "rocm": "amd"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    docker_on = _docker_enabled(config)
    skip_docker = pytest.mark.skip(reason="needs a Docker engine: pass --run-docker")
    problem = misplaced(items)
    if problem is not None:
        raise pytest.UsageError(problem)
    for item in items:
        if "docker" in item.keywords and not docker_on:
            item.add_marker(skip_docker)
        gpu = item.get_closest_marker("gpu")
        if gpu is not None:
            # @pytest.mark.gpu("cuda") wants that platform's vendor; bare @pytest.mark.gpu any GPU.
            vendors = gpu_vendors()
            wanted = _PLATFORM_VENDOR.get(str(gpu.args[0])) if gpu.args else None
            if not vendors or (wanted is not None and wanted not in vendors):
                what = f"a {wanted} GPU" if wanted else "a GPU"
                item.add_marker(pytest.mark.skip(reason=f"needs {what}: none detected here"))


@pytest.fixture(autouse=True)
def _fence_docker(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Tests without the docker marker cannot make a Docker client, and keep their cache (wheels,
    remembered recipe parses) in the session's temporary folder, not the user's."""
    if request.node.get_closest_marker("docker") is not None:
        return
    monkeypatch.setenv("TWINBUILD_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    import twinbuild.engine.client

    def blocked(*_args: object, **_kwargs: object) -> None:
        raise DockerBlocked(BLOCKED)

    monkeypatch.setattr(twinbuild.engine.client, "connect", blocked)
    monkeypatch.setattr(twinbuild.engine.client, "_open_client", blocked)
    monkeypatch.setattr(twinbuild.engine.client, "_request", blocked)
