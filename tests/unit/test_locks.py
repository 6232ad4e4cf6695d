"""The hash-locked requirements CI installs from (locks/, ``nox -s lock``).

Each lock must pin, with hashes, exactly what pyproject.toml asks of its kind of job, at versions
pyproject allows; the gate's lock holds nothing the gate does not run (no Docker SDK, no pytest);
every workflow ``pip install`` installs from a lock with ``--require-hashes`` and fetches nothing
else; and every nox session that installs does so from a lock.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tools.lock import LOCKS, LOCKS_WANTED, Lock, Locked, read_lock, requirements
from twinbuild.cli.main import exit_code
from twinbuild.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
_LOCKED_INSTALL = re.compile(
    r"(?:\.venv/bin/)?python3? -m pip install --require-hashes -r (?P<where>(?:\./tool/)?)locks/"
    r"(?P<lock>[a-z]+)\.txt"
)
_PROJECT_INSTALL = re.compile(
    r"(?:\.venv/bin/)?python3? -m pip install --no-deps --no-build-isolation (?:\.|\./tool)"
)


def _locked(lock: Lock) -> dict[str, Locked]:
    path = LOCKS / f"{lock.name}.txt"
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing: run nox -s lock"
    return {canonicalize_name(name): entry for name, entry in read_lock(path).items()}


@pytest.mark.parametrize("lock", LOCKS_WANTED, ids=lambda lock: lock.name)
def test_the_lock_pins_what_pyproject_asks_at_allowed_versions(lock: Lock) -> None:
    locked = _locked(lock)
    wanted = {canonicalize_name(Requirement(r).name): Requirement(r) for r in requirements(lock)}
    stale = sorted(set(wanted) - {n for n, e in locked.items() if e.top_level})
    extra = sorted({n for n, e in locked.items() if e.top_level} - set(wanted))
    assert not stale, f"locks/{lock.name}.txt lacks {stale} that pyproject.toml asks: nox -s lock"
    assert not extra, f"locks/{lock.name}.txt asks {extra} that pyproject.toml no longer does"
    for name, req in wanted.items():
        assert req.specifier.contains(locked[name].version, prereleases=True), (
            f"locks/{lock.name}.txt pins {name}=={locked[name].version}, outside {req}"
        )


@pytest.mark.parametrize("lock", LOCKS_WANTED, ids=lambda lock: lock.name)
def test_every_locked_package_has_a_hash_and_the_build_backend_is_there(lock: Lock) -> None:
    locked = _locked(lock)
    assert all(entry.hashes for entry in locked.values())
    if lock.project:  # pip install --no-build-isolation . builds with the locked backend
        assert "setuptools" in locked


def test_the_gate_installs_only_what_it_runs() -> None:
    gate = _locked(next(lock for lock in LOCKS_WANTED if lock.name == "gate"))
    for name in ("docker", "pytest", "pytest-testinfra", "filelock", "requests", "oras"):
        assert name not in gate, f"the gate's lock holds {name}, which the gate never runs"


def test_nothing_pins_oras() -> None:
    """The registry work removed oras; no lock or requirement may bring it back unseen."""
    for path in [ROOT / "pyproject.toml", *LOCKS.glob("*.txt")]:
        assert not re.search(r"^\s*\"?oras\b", path.read_text(encoding="utf-8"), re.M), path


def _run_steps() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job_name, job in data["jobs"].items():
            for step in job.get("steps", []):
                if "run" in step:
                    found.append((f"{path.name}:{job_name}", str(step["run"]), path.name))
    return found


def test_every_workflow_pip_install_is_hash_checked_from_a_lock() -> None:
    installs = [(where, run) for where, run, _ in _run_steps() if "pip install" in run]
    assert len(installs) >= 10  # every job that runs twinbuild installs it
    names = {lock.name for lock in LOCKS_WANTED}
    for where, run in installs:
        for command in re.split(r"\s*&&\s*|\n", run.strip()):
            if "pip install" not in command:
                assert command.startswith("python3 -m venv "), f"{where}: {command}"
                continue
            locked = _LOCKED_INSTALL.fullmatch(command)
            if locked:
                assert locked.group("lock") in names, f"{where}: no lock {locked.group('lock')}"
            else:
                assert _PROJECT_INSTALL.fullmatch(command), (
                    f"{where}: {command!r} installs something no lock hash-checks"
                )


def test_ci_run_installs_nox_from_its_lock() -> None:
    """.ci/run, CI on a clean checkout, installs nox as the workflows do, and nothing else."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    installs = [line.split("#")[0].strip() for line in lines if "pip install" in line]
    assert installs == ["python3 -m pip install -q --require-hashes -r locks/nox.txt"]


def test_the_gate_job_installs_the_default_branch_gate_lock() -> None:
    gate = [run for where, run, _ in _run_steps() if where == "gate.yml:gate" and "pip" in run]
    assert gate == [
        "python -m pip install --require-hashes -r locks/gate.txt && "
        "python -m pip install --no-deps --no-build-isolation ."
    ]


def test_every_nox_session_that_installs_does_so_from_a_lock() -> None:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_install"
    ]
    assert calls
    names = {lock.name for lock in LOCKS_WANTED}
    for call in calls:
        lock = call.args[1]
        assert isinstance(lock, ast.Constant), ast.unparse(call)
        assert lock.value in names, ast.unparse(call)


@pytest.mark.parametrize(("module", "extra"), [("docker", "docker"), ("testinfra", "smoke")])
def test_a_command_without_its_extra_says_which_to_install(
    module: str, extra: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate's lock has no Docker SDK: a build there is one line naming the extra."""
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ModuleNotFoundError

    def run() -> int:
        importlib.import_module(module)
        return 0

    assert exit_code(run) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"pip install 'twinbuild[{extra}]'" in err
