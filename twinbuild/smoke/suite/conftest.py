"""Fixtures and parametrization of the smoke suite, all from the ``--twinbuild-spec`` JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import testinfra

from twinbuild.smoke import collect
from twinbuild.smoke.conformance import Collected, request_for
from twinbuild.smoke.flaky import Recorder
from twinbuild.smoke.spec import SuiteSpec
from twinbuild.smoke.suite.remote import run_argv

SPEC = pytest.StashKey[SuiteSpec]()
RECORDER = pytest.StashKey[Recorder]()
HOLDS = pytest.StashKey[dict[str, str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("twinbuild")
    group.addoption("--twinbuild-spec", required=True, help="the JSON spec the runner wrote")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a GPU of the image's vendor")
    spec = SuiteSpec.read(Path(str(config.getoption("--twinbuild-spec"))))
    config.stash[SPEC] = spec
    config.stash[HOLDS] = {}
    recorder = Recorder(rerun_failed_once=spec.rerun_failed_once)
    config.stash[RECORDER] = recorder
    config.pluginmanager.register(recorder, "twinbuild-recorder")


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    records = config.stash[RECORDER].records
    out = {"tests": records, "holds": config.stash[HOLDS]}
    Path(config.stash[SPEC].results).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    spec = metafunc.config.stash[SPEC]
    if "pin_case" in metafunc.fixturenames:
        metafunc.parametrize("pin_case", spec.pins, ids=[c.pin.name for c in spec.pins])
    if "env_case" in metafunc.fixturenames:
        metafunc.parametrize("env_case", spec.env, ids=[e.key for e in spec.env])
    if "binary" in metafunc.fixturenames:
        metafunc.parametrize("binary", spec.binaries, ids=spec.binaries)
    if "module" in metafunc.fixturenames:
        metafunc.parametrize("module", spec.imports, ids=spec.imports)
    if "closure_entry" in metafunc.fixturenames:
        entries = closure_entries(spec)
        metafunc.parametrize("closure_entry", entries, ids=entries)


def closure_entries(spec: SuiteSpec) -> list[str]:
    """One closure check per locked distribution, git pin and apt package of the image's lock
    (one that is skipped where there is no lock)."""
    if spec.lock is None:
        return ["no-lock"]
    from twinbuild.smoke.closure import held_to

    lock = held_to(spec.lock, spec.base_capture)
    names = [d.name for d in lock.dists] + [g.dist or g.pin for g in lock.git if g.dist or g.commit]
    return sorted(set(names) | {a.package for a in lock.apt})


@pytest.fixture(scope="session")
def spec(pytestconfig: pytest.Config) -> SuiteSpec:
    return pytestconfig.stash[SPEC]


@pytest.fixture(scope="session")
def holds(pytestconfig: pytest.Config) -> dict[str, str]:
    """pin name -> the version or commit the image really holds (for the JSON summary)."""
    return pytestconfig.stash[HOLDS]


@pytest.fixture(scope="session")
def host(spec: SuiteSpec) -> Any:
    """The testinfra host: ``docker://<container id>`` or ``local://``."""
    return testinfra.get_host(spec.hostspec)


@pytest.fixture(scope="session")
def environment(host: Any) -> dict[str, str]:
    """The host's environment, read once (one ``env`` in the container) for every ENV case."""
    return dict(host.environment())


@pytest.fixture(scope="session")
def collected(host: Any, spec: SuiteSpec) -> Collected:
    """Everything installed, from ONE collector run with the image's Python."""
    request = request_for(c.pin for c in spec.pins if c.skip is None)
    result = run_argv(host, collect.argv(spec.python, request))
    if result.rc != 0:
        pytest.fail(
            f"the collector failed with {spec.python} (exit {result.rc}): "
            f"{(result.stderr or result.stdout).strip()[-500:]}",
            pytrace=False,
        )
    return Collected.from_json(collect.parse(result.stdout))
