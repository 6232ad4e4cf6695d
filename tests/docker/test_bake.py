"""`twinbuild bake` through the real front end: Debian's buildx 0.13 on the session engine.

buildx is installed (where missing) by twinbuild's own installer, as CI on a fresh machine gets it.
Real ``docker buildx bake --print`` resolves the generated files; every target it resolves is
built by ``docker buildx build`` from exactly that definition (``bake --build``), and the images
carry the labels ``twinbuild build`` gives the same tree (the inputs hash among them: ``build``
then finds them up to date), pass ``twinbuild smoke``, and ``evidence record`` takes their report.

And real ``docker buildx bake`` itself builds the file ``twinbuild bake --profile local`` wrote,
on an engine of its own that has Docker's default bridge (bake 0.13 cannot set a RUN step's
network, and the private engine has no bridge), in a network namespace of its own: its images,
with no build record anywhere, pass ``twinbuild smoke --image`` by their labels alone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import mini_project
from tests.session_engine import remove, scratch
from tests.unit.gitrepos import git, init, isolate_git
from twinbuild.cli.main import main
from twinbuild.engine import daemon
from twinbuild.engine.buildx import ensure_buildx
from twinbuild.engine.buildx_build import buildx_env
from twinbuild.engine.client import Engine, connect
from twinbuild.engine.wire import ping
from twinbuild.errors import FindingsError
from twinbuild.manifest.loader import load

pytestmark = pytest.mark.docker

CREATED = "org.opencontainers.image.created"
VARIANTS = ("cuda", "rocm")  # the mini project's, each on linux/amd64


@pytest.fixture(scope="module")
def docker() -> str:
    """The docker CLI with buildx: found, or installed by twinbuild (root on Debian)."""
    mirror = load(Path(__file__).parents[2] / "pins/manifest.toml").local.mirror
    return ensure_buildx(mirror=mirror, say=lambda _: None).docker


@pytest.fixture
def engine() -> Iterator[Engine]:
    with connect() as found:
        yield found


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(mini_project(tmp_path / "repo"))
    (root / ".gitignore").write_text("/build/\n/.twinbuild/\n/docker-bake.json\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "mini")
    return root


def _print(docker: str, root: Path, engine: Engine, *targets: str) -> dict[str, Any]:
    proc = subprocess.run(
        [docker, "buildx", "bake", "--print", "-f", "docker-bake.json", *targets], cwd=root,
        env=buildx_env(engine.docker_host), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    resolved: dict[str, Any] = json.loads(proc.stdout)
    return resolved


def _labels(engine: Engine, ref: str) -> dict[str, str]:
    return {k: v for k, v in engine.image_labels(ref).items() if k != CREATED}


def test_real_buildx_resolves_the_production_file_with_its_registry_cache(
    docker: str, engine: Engine, project: Path
) -> None:
    repository = "127.0.0.1:5000/team/twinbuild"
    assert main(["bake", "--root", str(project), "--repository", repository, "-q"]) == 0
    written = json.loads((project / "docker-bake.json").read_text())
    resolved = _print(docker, project, engine)
    assert resolved["group"]["default"] == {"targets": ["cuda-amd64", "rocm-amd64"]}
    assert set(_print(docker, project, engine, "rocm")["target"]) == {"rocm-amd64"}
    targets = resolved["target"]
    assert set(targets) == {"cuda-amd64", "rocm-amd64"}
    for name, target in targets.items():
        ours = written["target"][name]
        for key in ("context", "dockerfile", "args", "labels", "tags", "platforms"):
            assert target[key] == ours[key], (name, key)
        assert target["cache-from"] == [f"type=registry,ref={repository}:buildcache-{name}"]
        assert target["cache-to"] == [f"type=registry,ref={repository}:buildcache-{name},mode=max"]


def test_the_local_profile_builds_through_buildx_as_twinbuild_build_does(
    docker: str,
    engine: Engine,
    project: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["bake", "--root", str(project), "--profile", "local", "--build",
                 "--format", "json"]) == 0  # fmt: skip
    baked = json.loads(capsys.readouterr().out)
    resolved = _print(docker, project, engine)
    targets = resolved["target"]
    assert isinstance(targets, dict)
    assert set(targets) == {"cuda-amd64", "rocm-amd64"}
    built = {b["image"]["variant"]: b for b in baked["built"]}
    for platform in VARIANTS:
        target = targets[f"{platform}-amd64"]
        image = built[platform]["image_id"]
        # exactly the resolved definition: its labels are on the image (beside the base's own)
        assert dict(engine.image_labels(image)).items() >= target["labels"].items()
        assert target["tags"] == [f"twinbuild/{platform}:local-amd64"]
        assert engine.inspect_image(f"twinbuild/{platform}:local-amd64")["Id"] == image  # type: ignore[index]

    # smoke takes the baked image, and evidence record takes its report
    # (by the build record bake wrote: it names the baked image and the pins its profile skips)
    reports = tmp_path / "reports"
    for platform in VARIANTS:
        recorded = json.loads((project / f"build/local/{platform}/amd64/image.json").read_text())
        assert recorded["image_id"] == built[platform]["image_id"]
        assert main(["smoke", "--root", str(project), "--variant", platform, "--report-dir",
                     str(reports / platform), "-q"]) == 0  # fmt: skip
    capsys.readouterr()
    head = git(project, "rev-parse", "HEAD").strip()
    env_file = tmp_path / "run.env"
    env_file.write_text(
        "GITHUB_REPOSITORY=acme/twinbuild\nGITHUB_EVENT_NAME=workflow_run\n"
        "GITHUB_WORKFLOW_REF=acme/twinbuild/.github/workflows/validate-gpu.yml@refs/heads/main\n"
        "GITHUB_RUN_ID=1\nGITHUB_RUN_ATTEMPT=1\nGITHUB_ACTOR=maintainer\n"
        "RUNNER_NAME=local\nRUNNER_ENVIRONMENT=self-hosted\n"
    )
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)  # a dry run, as on a laptop
    for platform in VARIANTS:
        assert main(["evidence", "record", "--variant", platform, "--arch", "linux/amd64",
                     "--report-dir",
                     str(reports / platform), "--out", str(tmp_path / "statements"),
                     "--commit", head, "--pr", "1", "--repo", str(project),
                     "--env-file", str(env_file), "--repository-id", "42",
                     "--format", "json"]) == 0  # fmt: skip
        recorded = json.loads(capsys.readouterr().out)
        assert recorded["variant"] == platform
        assert Path(recorded["statement"]).is_file()

    # twinbuild build of the same tree finds them up to date: the same inputs hash and labels
    assert main(["build", "--root", str(project), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.count(": up to date (") == 2, out
    baked_labels = {p: _labels(engine, built[p]["image_id"]) for p in VARIANTS}
    assert main(["build", "--root", str(project), "--force", "-q", "--format", "json"]) == 0
    forced = {r["image"]["variant"]: r for r in json.loads(capsys.readouterr().out)}
    for platform in VARIANTS:
        assert _labels(engine, forced[platform]["image_id"]) == baked_labels[platform]
        assert (
            forced[platform]["inputs_hash"] == baked_labels[platform]["org.twinbuild.inputs-hash"]
        )


@pytest.fixture(scope="module")
def bridged() -> Iterator[str]:
    """An engine of its own with Docker's default bridge network, started in a network namespace
    of its own (``unshare --net``): its bridge and its containers reach nothing outside it."""
    dockerd, unshare = shutil.which("dockerd"), shutil.which("unshare")
    if os.geteuid() != 0 or dockerd is None or unshare is None:
        pytest.skip("starts a dockerd in a network namespace: needs root, dockerd and unshare")
    folder = scratch("tb-br-")
    paths = daemon.EnginePaths.under(folder)
    paths.root.mkdir(parents=True)
    paths.config.write_text("{}\n")
    argv = [a for a in daemon.dockerd_argv(dockerd, paths) if a != "--bridge=none"]
    with paths.log.open("w") as log:
        proc = subprocess.Popen(
            [unshare, "--net", "--", *argv], stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not ping(paths.docker_host):
            assert proc.poll() is None, paths.log.read_text()[-2000:]
            assert time.monotonic() < deadline, "the bridged engine did not answer in 120 s"
            time.sleep(0.2)
        yield paths.docker_host
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        remove(folder)


def _smoke_report(project: Path, reports: Path, tag: str) -> tuple[int, dict[str, Any]]:
    code = main(
        ["smoke", "--root", str(project), "--image", tag, "--report-dir", str(reports), "-q"]
    )
    [report] = reports.glob("smoke-*-local*.json")
    summary: dict[str, Any] = json.loads(report.read_text())
    return code, summary


def test_an_image_real_bake_built_smokes_by_its_own_labels(
    docker: str,
    bridged: str,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DOCKER_HOST", bridged)
    assert main(["bake", "--root", str(project), "--profile", "local", "-q"]) == 0
    proc = subprocess.run(
        [docker, "buildx", "bake", "-f", "docker-bake.json"], cwd=project,
        env=buildx_env(bridged), capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (project / "build").exists()  # no build record: the image alone tells smoke
    for variant in VARIANTS:
        tag = f"twinbuild/{variant}:local-amd64"
        code, summary = _smoke_report(project, tmp_path / variant, tag)
        assert code == 0, [t["message"] for t in summary["tests"] if t["outcome"] == "failed"]
        tests = {t["id"]: t for t in summary["tests"]}
        assert tests["test_conformance.py::test_pin[megatron-bridge]"]["message"] == (
            "not in local profile: megatron-bridge (no local mirror of "
            "https://github.com/NVIDIA-NeMo/Megatron-Bridge; pass --mirror megatron-bridge=PATH "
            "to include it)"
        )
        assert tests["test_conformance.py::test_pin[flash-linear-attention]"]["outcome"] == (
            "passed"
        )

    # The same image with a label that says nothing was left out fails each pin it lacks: the
    # label, not a guess, is what excused them.
    proc = subprocess.run(
        [docker, "buildx", "bake", "-f", "docker-bake.json", "--set",
         "cuda-amd64.labels.org.twinbuild.left-out=", "cuda-amd64"], cwd=project,
        env=buildx_env(bridged), capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    code, summary = _smoke_report(project, tmp_path / "unlabelled", "twinbuild/cuda:local-amd64")
    assert code == FindingsError.exit_code
    failed = {t["id"]: t["message"] for t in summary["tests"] if t["outcome"] == "failed"}
    assert sorted(failed) == [
        "test_conformance.py::test_pin[megatron-bridge]",
        "test_conformance.py::test_pin[megatron-lm]",
        "test_conformance.py::test_pin[torch_memory_saver]",
    ]
    assert (
        "found no distribution megatron-bridge installed"
        in failed["test_conformance.py::test_pin[megatron-bridge]"]
    )
    capsys.readouterr()
