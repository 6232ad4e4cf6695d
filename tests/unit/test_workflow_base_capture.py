"""base-capture.yml's lock job, its own shell steps run as Actions runs them.

The capture jobs (``twinbuild base capture`` on the builders, where the bases can be pulled) hand
the lock job one capture per image as artifacts; the test does the download (copies the capture
file where ``download-artifact`` puts it), then runs the job's ``run:`` steps from the workflow
file with bash, the real ``twinbuild lock`` against a real index on 127.0.0.1 and the real git:
a capture equal to the committed one passes, and a base that moved fails the job naming the
files to commit, with the lock made again from the new capture.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import lock_argv, mini_project, with_pins
from tests.pyindex import PyIndex
from tests.unit.gitrepos import commit_all, init, isolate_git, needs_git
from twinbuild.cli.main import main
from twinbuild.closure import lockfile
from twinbuild.closure.capture import capture_path, render_capture

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github/workflows/base-capture.yml"
INSTALL = (
    "python3 -m venv .venv && .venv/bin/python -m pip install --require-hashes -r "
    "locks/image.txt && .venv/bin/python -m pip install --no-deps --no-build-isolation ."
)
PINS = """
[pins.solid]
kind = "pypi"
version = "1.0"
why = "an exact pin with a dependency"
"""

pytestmark = needs_git


def steps(job: str) -> list[dict[str, Any]]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = data["jobs"][job]["steps"]
    return found


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PyIndex]:
    with PyIndex(tmp_path / "index") as served:
        served.publish("dep-a", "1.0")
        served.publish("dep-a", "1.1")
        served.publish("solid", "1.0", ("dep-a>=1.0",))
        yield served


@pytest.fixture
def project(tmp_path: Path, index: PyIndex, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path / "home")
    root = mini_project(tmp_path)
    with_pins(root, PINS)
    capture(root, "1.0")
    assert main(lock_argv(root, index.url)) == 0
    init(root)
    commit_all(root, "captured and locked")
    return root


def capture(root: Path, dep_version: str) -> None:
    """What ``twinbuild base capture`` writes for the cuda image's base (the artifact)."""
    base = "lmsysorg/sglang:v0.5.6-cu129@sha256:" + "1" * 64
    path = capture_path(root, "cuda-amd64")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_capture(base, {"dep-a": dep_version}, {}), encoding="utf-8")


def run_lock_job(root: Path, index: PyIndex, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Every ``run:`` step of the lock job but the install, as Actions runs them; the last
    step's result (or the first that failed)."""
    venv = root / ".venv/bin"
    venv.mkdir(parents=True, exist_ok=True)
    (venv / "twinbuild").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m twinbuild "$@"\n')
    (venv / "twinbuild").chmod(0o755)
    job = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["lock"]
    assert job["env"] == {"TWINBUILD_INDEX_URL": "${{ vars.TWINBUILD_INDEX_URL }}"}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TWINBUILD_INDEX_URL": index.url,
           "TWINBUILD_CACHE": str(tmp_path / "cache")}  # fmt: skip
    result = None
    ran = 0
    for step in steps("lock"):
        if "run" not in step or step["run"].strip() == INSTALL:
            continue
        script = tmp_path / "step.sh"
        script.write_text(step["run"], encoding="utf-8")
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=root, env=env, capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        ran += 1
        if result.returncode != 0:
            break
    assert ran >= 1
    assert result is not None
    return result


def test_the_lock_job_passes_when_the_bases_hold_what_is_committed(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    before = lockfile.lock_path(project, "cuda-amd64").read_bytes()
    capture(project, "1.0")  # the artifact: the same capture
    result = run_lock_job(project, index, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pins/lock/ is what the bases hold" in result.stdout
    assert lockfile.lock_path(project, "cuda-amd64").read_bytes() == before


def test_the_lock_job_fails_naming_what_to_commit_when_a_base_moved(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    capture(project, "1.1")  # the base now ships dep-a 1.1
    result = run_lock_job(project, index, tmp_path)
    assert result.returncode == 1
    assert "pins/lock/base/cuda-amd64.toml" in result.stdout
    assert "pins/lock/cuda-amd64.toml" in result.stdout
    assert "pins/lock/rocm-amd64.toml" not in result.stdout
    assert "::error title=base capture::" in result.stdout
    assert "`twinbuild base capture --variant V --arch A`" in result.stdout
    # the lock made again from the new capture: the base's dep-a, marked as the base's
    locked = lockfile.read(lockfile.lock_path(project, "cuda-amd64"))
    dep = locked.dist("dep-a")
    assert dep is not None
    assert (dep.version, dep.origin) == ("1.1", "base")
    assert locked.base.captured


def test_a_base_digest_bump_makes_the_capture_stale_for_the_lint(project: Path) -> None:
    from twinbuild.lint.locks import lint_locks
    from twinbuild.manifest.loader import load

    manifest = project / "pins/manifest.toml"
    assert [f for f in lint_locks(load(manifest), project) if f.code == "TB203"] == []
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("1" * 64, "9" * 64, 1), encoding="utf-8")  # the bump
    found = [f for f in lint_locks(load(manifest), project) if f.code == "TB203"]
    stale = [f for f in found if f.path == "pins/lock/base/cuda-amd64.toml"]
    assert len(stale) == 1
    assert "@sha256:" + "1" * 64 in stale[0].message  # what it captured
    assert "@sha256:" + "9" * 64 in stale[0].message  # the base it should capture
    assert "`twinbuild lock`" in stale[0].message
    assert [f.path for f in found if f not in stale] == ["pins/lock/cuda-amd64.toml"]
