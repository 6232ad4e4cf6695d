"""Fences around the outside world: Docker and GPUs only for tests that are marked for them, and
writes only inside the session's temporary folder.

Tests marked ``docker`` run unless ``TWINBUILD_NO_DOCKER=1`` (the one switch, read by
``nox -s tests`` too); the session's own engine starts only when the run can reach one of them.
Every other test gets an engine boundary that refuses to connect, so a unit test cannot reach a
daemon by accident, works in a folder of its own, and cannot write outside the session's
temporary folder (``tests/write_fence.py``): not into the repository, not into the home folder.
Tests marked ``gpu`` run only where a GPU of their variant's vendor (the manifest's) is present.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import session_tmp
from tests.session_engine import SessionEngine, start
from tests.session_registry import SessionRegistry
from tests.write_fence import fenced
from tests.xdist_docker import DOCKER_TESTS, make_scheduler, misplaced


class DockerBlocked(RuntimeError):
    """The engine boundary in a test not marked ``docker`` (not an EngineError: never caught)."""


BLOCKED = "blocked in tests without @pytest.mark.docker"


#: The one switch: ``TWINBUILD_NO_DOCKER=1`` skips the Docker tests (and starts no engine).
NO_DOCKER = "TWINBUILD_NO_DOCKER"
SKIP_DOCKER = f"needs a Docker engine: unset {NO_DOCKER}"
ROOT = Path(__file__).resolve().parents[1]
#: Hypothesis keeps a working folder where it starts (the repository, collecting tests/fuzz):
#: it gets one outside, which the write fence lets it use.
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / f"twinbuild-hypothesis-{os.getuid()}"
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(HYPOTHESIS_HOME))


def _docker_enabled() -> bool:
    return os.environ.get(NO_DOCKER) != "1"


def _reaches_docker_tests(config: pytest.Config) -> bool:
    """Whether this run can collect a Docker test: one of its paths holds or is under
    tests/docker/, and ``-m`` does not leave the ``docker`` marker out."""
    expr = str(config.getoption("markexpr") or "")
    if expr:
        from _pytest.mark.expression import Expression  # how pytest itself reads -m

        def marked(name: str, /, **_kwargs: object) -> bool:
            return name == "docker"

        if not Expression.compile(expr).evaluate(marked):
            return False
    docker = ROOT / DOCKER_TESTS
    paths = [a.split("::", 1)[0] for a in config.args] or list(config.getini("testpaths"))
    for arg in paths:
        path = (config.invocation_params.dir / arg).resolve()
        if path == docker or docker in path.parents or path in docker.parents:
            return True
    return False


_ENGINE = pytest.StashKey[SessionEngine]()


def pytest_configure(config: pytest.Config) -> None:
    """Start the session's own engine (in the controlling process only) when a Docker test may
    run, before any xdist worker exists, so every worker inherits its DOCKER_HOST; and the
    session's temporary folder in memory (tests/session_tmp.py)."""
    session_tmp.in_memory(config)
    if not _docker_enabled() or hasattr(config, "workerinput"):
        return
    if _reaches_docker_tests(config):
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
    session_tmp.release(config)


@pytest.fixture(scope="session")
def session_registry() -> Iterator[SessionRegistry]:
    """The session's registry on 127.0.0.1 (tests/session_registry.py), for the Docker tests
    that push; started by the worker that runs them, the first time one asks."""
    from tests import session_registry

    found = session_registry.start()
    try:
        yield found
    finally:
        found.stop()


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


@functools.cache
def vendor_of(name: str) -> str | None:
    """The GPU vendor of the variant or group ``name``, as the repository's manifest declares."""
    import twinbuild
    from twinbuild.manifest.loader import load

    checkout = Path(twinbuild.__file__).resolve().parents[1]  # the repository under test
    manifest = load(checkout / "pins/manifest.toml")
    members = manifest.members(name)
    return manifest.variants[members[0]].vendor if members else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    docker_on = _docker_enabled()
    skip_docker = pytest.mark.skip(reason=SKIP_DOCKER)
    problem = misplaced(items)
    if problem is not None:
        raise pytest.UsageError(problem)
    for item in items:
        if "docker" in item.keywords and not docker_on:
            item.add_marker(skip_docker)
        gpu = item.get_closest_marker("gpu")
        if gpu is not None:
            # @pytest.mark.gpu("cuda") wants that group's (or variant's) vendor; bare
            # @pytest.mark.gpu any GPU.
            vendors = gpu_vendors()
            wanted = vendor_of(str(gpu.args[0])) if gpu.args else None
            if not vendors or (wanted is not None and wanted not in vendors):
                what = f"a {wanted} GPU" if wanted else "a GPU"
                item.add_marker(pytest.mark.skip(reason=f"needs {what}: none detected here"))


_UNSAFE = re.compile(r"[\W]")


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest's ``tmp_path`` (a new empty folder in the session's, named after the test), made in
    constant time: pytest's own lists the whole session folder to number the next one, 1 ms a
    test once a worker has made 2,000 of them."""
    name = _UNSAFE.sub("_", request.node.name)[:30]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_path_factory.getbasetemp()))


@pytest.fixture(autouse=True)
def _fence(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """Tests without the docker marker cannot make a Docker client, keep their cache (wheels,
    remembered recipe parses) and temporary files in the session's temporary folder, start in an
    empty working folder of their own, and fail on any write outside the session's folder."""
    if request.node.get_closest_marker("docker") is not None:
        yield
        return
    session = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("TWINBUILD_CACHE", str(session / "cache"))
    scratch = session / "tmp"
    scratch.mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))
    # Each test's own empty folder. Not tmp_path_factory.mktemp: that lists the whole session
    # folder to number the next one (1 ms a test once a worker has made 2,000).
    cwd = session / "cwd"
    cwd.mkdir(exist_ok=True)
    monkeypatch.chdir(tempfile.mkdtemp(dir=cwd))
    import twinbuild.engine.client

    def blocked(*_args: object, **_kwargs: object) -> None:
        raise DockerBlocked(BLOCKED)

    monkeypatch.setattr(twinbuild.engine.client, "connect", blocked)
    monkeypatch.setattr(twinbuild.engine.client, "_open_client", blocked)
    monkeypatch.setattr(twinbuild.engine.client, "_request", blocked)
    monkeypatch.setattr(twinbuild.engine.client, "_stream", blocked)
    hypothesis = Path(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])
    with fenced(session, hypothesis, Path(os.devnull).parent, refuse=True):
        yield
