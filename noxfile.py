"""nox sessions: thin wrappers over the ``twinbuild`` CLI.

CI runs ``lint`` and ``tests`` (pr.yml; .ci/run runs ``main`` first), ``main-all-archs`` nightly
(nightly.yml); its other jobs call ``twinbuild`` directly (docs/layout.md, "What CI runs").
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]


class _NoUvProbeLine(logging.Filter):
    """nox looks for uv even with the venv backend and logs "uv binary not found." in every
    session; we choose venv on purpose (Debian's python3 has it), so that line only confuses."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "uv binary not found."


logging.getLogger("nox").addFilter(_NoUvProbeLine())

PYPROJECT = nox.project.load_toml("pyproject.toml")
PYTHON = "3.11"


def _install(session: nox.Session, lock: str) -> None:
    """The session's hash-checked lock (locks/<lock>.txt, written by ``nox -s lock``), then
    twinbuild itself (editable, nothing more fetched), unless this reused virtual environment
    got exactly these from the same lock and pyproject.toml last time: a warm run starts at once."""
    locked = Path("locks") / f"{lock}.txt"
    wanted = hashlib.sha256(Path("pyproject.toml").read_bytes() + locked.read_bytes()).hexdigest()
    stamp = Path(session.virtualenv.location) / ".twinbuild-installed"
    if stamp.is_file() and stamp.read_text() == wanted:
        session.log(f"{locked} unchanged since this environment's install: nothing to install")
        return
    session.install("--require-hashes", "-r", str(locked))
    # compat: one path line in a .pth, not setuptools' import finder, which every interpreter
    # start imports (pathlib, re, fnmatch: half of `python -c pass`, docs/benchmarks.md #42)
    session.install(
        "--no-deps", "--no-build-isolation", "--config-settings", "editable_mode=compat", "-e", "."
    )
    stamp.write_text(wanted)


def _engine_up(session: nox.Session) -> None:
    """Start (or find) an engine and export its DOCKER_HOST to the rest of the session.

    Its progress (installing docker.io takes a minute) goes to stderr, shown as it happens;
    stdout carries only the ``export DOCKER_HOST=...`` line, captured here.
    """
    out = session.run("twinbuild", "engine", "up", silent=True, stderr=None)
    for line in out.splitlines() if isinstance(out, str) else ():
        if line.startswith("export DOCKER_HOST="):
            session.env["DOCKER_HOST"] = line.removeprefix("export DOCKER_HOST=")


@nox.session(python=PYTHON, tags=["lint"])
def lint(session: nox.Session) -> None:
    """Lint pins, recipes (twinbuild lint, hadolint) and workflows, then ruff and mypy."""
    _install(session, "lint")
    session.run("twinbuild", "lint", *session.posargs)
    session.run("twinbuild", "workflows", "check")
    # The recipes' Dockerfile lint; .hadolint.yaml says why each ignored rule does not apply.
    recipes = sorted(str(path) for path in Path("images").glob("*/Dockerfile"))
    session.run("hadolint", "--config", ".hadolint.yaml", *recipes)
    session.run("ruff", "check", "twinbuild", "tools", "tests", "noxfile.py")
    session.run("ruff", "format", "--check", "twinbuild", "tools", "tests", "noxfile.py")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite in one pytest run on parallel workers; the Docker tests on one of them,
    against an engine of their own (tests/conftest.py), while the others share the rest."""
    _install(session, "tests")
    # Compiled modules are kept, outside the checkout: without them every worker, and every
    # child pytest and `python -m twinbuild` the tests run, compiles (and assertion-rewrites)
    # the same sources again: 10 s of a collection's 12 s where PYTHONDONTWRITEBYTECODE is set.
    session.env["PYTHONPYCACHEPREFIX"] = str(Path(session.virtualenv.location) / "pycache")
    session.env["PYTHONDONTWRITEBYTECODE"] = None  # None: unset for what the session runs
    if os.environ.get("TWINBUILD_NO_DOCKER") != "1":  # the one switch; tests/conftest.py reads it
        _engine_up(session)  # installs docker.io where it is missing, showing its progress
    # One worker more than the cores: the Docker tests' worker mostly waits on dockerd and the
    # registry, so a third worker on two cores keeps both busy (95% against 84%; 148 s against
    # 158 s warm here, docs/benchmarks.md). `-- -n N` overrides it.
    workers = len(os.sched_getaffinity(0)) + 1
    session.run("pytest", "-n", str(workers), *session.posargs)


@nox.session(python=PYTHON)
def engine(session: nox.Session) -> None:
    """Start the private Docker engine (installs Debian's docker.io as root if needed)."""
    _install(session, "image")
    session.run("twinbuild", "engine", *(session.posargs or ["up"]))


@nox.session(python=PYTHON, default=False, tags=["images"])
def build(session: nox.Session) -> None:
    """Build both images (local profile by default; pass --profile production, --platform P)."""
    _install(session, "image")
    _engine_up(session)
    session.run("twinbuild", "build", *session.posargs)


@nox.session(python=PYTHON, default=False, tags=["images"])
def smoke(session: nox.Session) -> None:
    """Smoke-test the built images against the manifest with pytest-testinfra."""
    _install(session, "image")
    _engine_up(session)
    session.run("twinbuild", "smoke", *session.posargs)


def _main(session: nox.Session, *args: str) -> None:
    """Lint, then build and smoke-test the local images; ``args`` go to build and smoke."""
    _install(session, "lint")
    session.run("twinbuild", "lint")
    session.run("twinbuild", "workflows", "check")
    _engine_up(session)
    session.run("twinbuild", "build", "--profile", "local", *args)
    session.run("twinbuild", "smoke", "--profile", "local", *args)


@nox.session(python=PYTHON, default=False)
def main(session: nox.Session) -> None:
    """The main job: lint, build and smoke-test this host's local images (-- --all-archs: all)."""
    # --all-archs (passed to build and smoke): the emulated images too, under QEMU, which the
    # build installs and registers as root.
    _main(session, *session.posargs)


@nox.session(python=PYTHON, default=False, name="main-all-archs")
def main_all_archs(session: nox.Session) -> None:
    """The main job on every architecture, the emulated ones under QEMU (CI runs it nightly)."""
    _main(session, "--all-archs", *session.posargs)


@nox.session(python=PYTHON, default=False)
def ship(session: nox.Session) -> None:
    """Build, push (private registry unless TWINBUILD_REGISTRY) and smoke; reports name digests."""
    _install(session, "image")
    _engine_up(session)
    if not os.environ.get("TWINBUILD_REGISTRY"):
        session.run("twinbuild", "registry", "up")
    session.run("twinbuild", "build", "--profile", "local", *session.posargs)
    session.run("twinbuild", "push", "--profile", "local", *session.posargs)
    session.run("twinbuild", "smoke", "--profile", "local", *session.posargs)


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks side by side with docker; writes build/bench/bench.md and bench.json."""
    _install(session, "tests")  # row 6 runs the test suite as nox -s tests does (xdist)
    _engine_up(session)
    session.run("python", "-m", "tools.bench", *session.posargs)  # tools/bench: not installed


@nox.session(python=PYTHON, default=False, tags=["mutate"])
def mutate(session: nox.Session) -> None:
    """Mutation testing of the guard modules (mutmut); kill rates per module in docs/testing.md."""
    # Dependencies only: an installed twinbuild would shadow the mutated copy the tests must import.
    project = PYPROJECT["project"]
    session.install(*project["dependencies"], *project["optional-dependencies"]["docker"])
    session.install(*nox.project.dependency_groups(PYPROJECT, "mutate"))
    session.run("python", "-m", "tests.mutate", *session.posargs)


@nox.session(python=PYTHON, default=False)
def lock(session: nox.Session) -> None:
    """Rewrite the hash-locked requirements in locks/ from pyproject.toml (pip-compile)."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lock"))
    session.run("python", "-m", "tools.lock", *session.posargs)  # tools/lock.py
