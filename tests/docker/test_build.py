"""Real builds of the mini project's local images against the engine (marked docker)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import MINI_VARIANTS, edit, image, mini_project
from tests.unit.gitrepos import git, init, isolate_git
from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.image import BuildResult, build_image, image_tag
from twinbuild.cli.main import main
from twinbuild.engine.client import Engine, connect
from twinbuild.errors import BuildFailed, EngineError
from twinbuild.manifest.loader import load

# The session engine's tests run on one xdist worker, one after another (tests/xdist_docker.py):
# they share the session engine, where image tags are global.
pytestmark = pytest.mark.docker

CUDA_ONLY = """
[pins.click]
kind = "pypi"
version = "8.1.7"
variants = ["cuda"]
asymmetry = "only to test a CUDA-only change"
layer = "late"
why = "test pin"
"""


BUILT: list[str] = []


@pytest.fixture
def engine() -> Iterator[Engine]:
    """The engine; every image a test built is removed afterwards, so reruns build afresh. Its
    layers stay (the session engine goes at the end): the next module's build of the same mini
    project takes them from the engine's cache instead of installing every wheel again."""
    with connect() as found:
        try:
            yield found
        finally:
            for image_id in set(BUILT):
                with contextlib.suppress(EngineError):
                    found.remove_image(image_id, force=True, prune=False)
            BUILT.clear()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The mini project as a git checkout with a remote, as a clone of ours is."""
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(mini_project(tmp_path / "repo"))
    manifest = root / "pins/manifest.toml"
    manifest.write_text(manifest.read_text() + CUDA_ONLY)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "mini")
    git(root, "remote", "add", "origin", "git@github.com:acme/twinbuild.git")
    return root


def _build(root: Path, engine: Engine, platform: str, *, force: bool = False) -> BuildResult:
    options = BuildOptions(root=root, profile="local", force=force)
    manifest = load(root / "pins/manifest.toml")
    result = build_image(manifest, engine, image(platform), options, say=lambda _: None)
    if not result.up_to_date:  # one found up to date may be another module's: not ours to remove
        BUILT.append(result.image_id)
    return result


def _tagged(engine: Engine, platform: str) -> str:
    found = engine.inspect_image(image_tag(image(platform), "local"))
    assert found is not None
    return str(found["Id"])


def test_build_twice_then_cuda_only_change_rebuilds_cuda_only(
    project: Path, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    first = {p: _build(project, engine, p, force=True) for p in MINI_VARIANTS}
    for platform, result in first.items():
        labels = engine.image_labels(result.image_id)
        # render shows the base the build really used (one derivation of the tag)
        assert main(["render", platform, "--manifest", str(project / "pins/manifest.toml")]) == 0
        assert f"  BASE_IMAGE={labels['org.twinbuild.base-ref']}\n" in capsys.readouterr().out
        assert labels["org.twinbuild.variant"] == platform
        assert labels["org.twinbuild.inputs-hash"] == result.inputs_hash
        assert labels["org.opencontainers.image.source"] == "https://github.com/acme/twinbuild"
        assert labels["org.opencontainers.image.revision"] == git(project, "rev-parse", "HEAD")
        assert (project / f"build/local/{platform}/amd64/image.json").exists()
        assert (project / f"build/local/{platform}/amd64/build.log").read_text()
    skipped = {s.pin for s in first["cuda"].skipped}
    assert skipped == {"torch_memory_saver", "megatron-bridge", "megatron-lm"}

    again = {p: _build(project, engine, p) for p in MINI_VARIANTS}
    assert all(r.up_to_date for r in again.values())
    assert {p: r.image_id for p, r in again.items()} == {p: r.image_id for p, r in first.items()}

    edit(project / "pins/manifest.toml", 'version = "8.1.7"', 'version = "8.1.8"')
    after = {p: _build(project, engine, p) for p in MINI_VARIANTS}
    assert after["rocm"].up_to_date
    assert after["rocm"].image_id == first["rocm"].image_id
    assert not after["cuda"].up_to_date
    assert after["cuda"].image_id != first["cuda"].image_id
    assert _tagged(engine, "cuda") == after["cuda"].image_id


def test_failed_step_tags_nothing_and_keeps_the_previous_image(
    project: Path, engine: Engine
) -> None:
    good = _build(project, engine, "rocm")
    recipe = project / "images/local/Dockerfile"
    edit(recipe, "FROM common AS rocm\n", "FROM common AS rocm\nRUN echo about to fail && false\n")
    with pytest.raises(BuildFailed) as info:
        _build(project, engine, "rocm")
    message = str(info.value)
    assert message.startswith("rocm (linux/amd64): build failed at ")
    assert "RUN echo about to fail && false" in message
    assert "nothing was tagged" in message
    assert _tagged(engine, "rocm") == good.image_id


def test_sigterm_stops_the_build_and_tags_nothing(project: Path, engine: Engine) -> None:
    good = _build(project, engine, "rocm")
    recipe = project / "images/local/Dockerfile"
    marker = f"sleep 60 # {uuid.uuid4().hex}"  # never built before, so never up to date
    edit(recipe, "FROM common AS rocm\n", f"FROM common AS rocm\nRUN {marker}\n")
    env = {**os.environ, "DOCKER_HOST": engine.docker_host}
    proc = subprocess.Popen(
        [sys.executable, "-m", "twinbuild", "build", "--variant", "rocm", "--root", str(project),
         "--manifest", str(project / "pins/manifest.toml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    log = project / "build/local/rocm/amd64/build.log"
    while time.monotonic() < deadline:
        if log.exists() and marker in log.read_text():
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "twinbuild: stopped by SIGTERM; nothing was tagged" in err
    assert _tagged(engine, "rocm") == good.image_id


def test_two_builds_of_one_image_at_once_are_serialized(project: Path, engine: Engine) -> None:
    recipe = project / "images/local/Dockerfile"
    marker = f"sleep 5 # {uuid.uuid4().hex}"  # a recipe never built before
    edit(recipe, "FROM common AS rocm\n", f"FROM common AS rocm\nRUN {marker}\n")
    env = {**os.environ, "DOCKER_HOST": engine.docker_host}
    argv = [sys.executable, "-m", "twinbuild", "build", "--variant", "rocm", "--root",
            str(project), "--manifest", str(project / "pins/manifest.toml")]  # fmt: skip
    first = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    log = project / "build/local/rocm/amd64/build.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and marker in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    second = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    out_first, _ = first.communicate(timeout=120)
    assert first.returncode == 0
    assert second.returncode == 0, second.stderr
    assert "twinbuild/rocm:local-amd64: built in" in out_first
    # A message, so on stderr (the output contract); the report line is the data, on stdout.
    assert "another build of this image is running; waiting for it" in second.stderr
    assert "twinbuild/rocm:local-amd64: up to date" in second.stdout
    BUILT.append(_tagged(engine, "rocm"))
