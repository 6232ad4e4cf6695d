"""The smoke runner against real containers: a conforming image passes; one changed value fails.

Images are built here FROM the engine's base with fabricated distributions (tests/docker/
smoke_image), so nothing is downloaded; every build and container uses network none.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MINI
from tests.unit.evidence_builders import github_env, validated
from twinbuild import evidence
from twinbuild.engine import client
from twinbuild.engine.base import ensure_base
from twinbuild.errors import FindingsError
from twinbuild.manifest.loader import load, loads
from twinbuild.manifest.model import PinManifest
from twinbuild.smoke import runner

# The session engine's tests run on one xdist worker, one after another (tests/xdist_docker.py):
# they share the session engine, where image tags are global.
pytestmark = pytest.mark.docker

IMAGE_DIR = Path(__file__).parent / "smoke_image"
GIT = "a" * 40
CHECKOUT = "c" * 40
ARTIFACT_SHA = "58b4261871affb53a542080cc48faed2f8d5ef8d8b67cae9c108dc95c98fbca0"
CUDA_BASE = "sha256:" + "1" * 64
INPUTS = "sha256:" + "c" * 64
NO_GPU = "no nvidia GPU on this machine (looked for nvidia-smi or /dev/nvidia*)"

MANIFEST = f"""schema = 2

[variants.cuda]
archs = ["linux/amd64"]
recipe = "cuda"
runners = {{ build = ["self-hosted", "builder", "cuda"], gpu = ["self-hosted", "gpu", "cuda"] }}
base = {{ repository = "lmsysorg/sglang", tag = "v0", digest = "{CUDA_BASE}" }}
python = "3.11"
toolkit = "12.9"
vendor = "nvidia"
gpu_archs = ["9.0"]
imports = ["tinydist", "gitdist"]
binaries = ["/opt/smoke/bin/all_reduce_perf"]

[variants.rocm]
archs = ["linux/amd64"]
recipe = "rocm"
runners = {{ build = ["self-hosted", "builder", "rocm"], gpu = ["self-hosted", "gpu", "rocm"] }}
base = {{ repository = "rocm/sgl-dev", tag = "v0", digest = "sha256:{"2" * 64}" }}
python = "3.11"
toolkit = "7.0"
vendor = "amd"
gpu_archs = ["gfx942"]

[local]
suite = "bookworm"
# mirror: none (mmdebstrap's default)
packages = ["python3", "python3-venv", "git"]
imports = ["tinydist"]

[pins.tinydist]
kind = "pypi"
version = "1.2.3"
why = "a pypi pin"

[pins.gitdist]
kind = "git"
repo = "https://example.invalid/gitdist"
commit = "{GIT}"
why = "a git pin installed with pip"

[pins.rangedist]
kind = "pypi"
range = ">=0.5,<1"
floating = "any 0.x from 0.5"
why = "a floating pin"

[pins.checkout]
kind = "git"
repo = "https://example.invalid/checkout"
commit = "{CHECKOUT}"
dist = ""
install = "checkout"
path = "/opt/smoke/checkout"
why = "a checkout pin"

[pins.artifact]
kind = "url"
url = "https://example.invalid/artifact.bin"
sha256 = "{ARTIFACT_SHA}"
install = "file"
path = "/opt/smoke/artifact.bin"
why = "a file pin"
"""


@pytest.fixture(scope="module")
def eng() -> Iterator[client.Engine]:
    with client.connect() as e:
        yield e


@pytest.fixture(scope="module")
def base_id(eng: client.Engine) -> str:
    """The embedded base of the mini project's [local] table (built once, then reused)."""
    local = load(MINI / "pins/manifest.toml").local
    found = ensure_base(
        eng, suite=local.suite, mirror=local.mirror, packages=local.packages, arch="linux/amd64"
    )
    return found.image_id


def _build(eng: client.Engine, context: Path, **kwargs: Any) -> str:
    stream = eng.api.build(
        path=str(context), network_mode="none", rm=True, forcerm=True, decode=True, **kwargs
    )
    image_id = None
    log: list[str] = []
    for chunk in stream:
        log.append(str(chunk.get("stream") or chunk.get("error") or ""))
        if "aux" in chunk:
            image_id = chunk["aux"].get("ID")
    assert image_id, "build failed:\n" + "".join(log)[-2000:]
    return str(image_id)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("smoke-project")
    (root / "pins").mkdir()
    (root / "pins/manifest.toml").write_text(MANIFEST)
    for name in ("local", "cuda"):
        (root / "images" / name).mkdir(parents=True)
        shutil.copy(IMAGE_DIR / "Dockerfile", root / "images" / name / "Dockerfile")
    shutil.copy(IMAGE_DIR / "fabricate.py", root / "fabricate.py")
    return root


@pytest.fixture(scope="module")
def manifest(project: Path) -> PinManifest:
    return loads((project / "pins/manifest.toml").read_text(), Path("pins/manifest.toml"))


@pytest.fixture(scope="module")
def images(eng: client.Engine, project: Path, base_id: str) -> Iterator[dict[str, str]]:
    made: dict[str, str] = {}
    labels = {
        "org.twinbuild.variant": "cuda",
        "org.twinbuild.arch": "linux/amd64",
        "org.twinbuild.base-digest": CUDA_BASE,
        "org.twinbuild.inputs-hash": INPUTS,
    }
    try:
        made["good"] = _build(
            eng, project, dockerfile="images/local/Dockerfile", target="cuda",
            buildargs={"BASE_IMAGE": base_id}, labels=labels,
        )  # fmt: skip
        site = '"$(cat /opt/smoke/site)"'
        edits = {
            "version": f"sed -i 's/^Version: 1.2.3$/Version: 1.2.4/' {site}/tinydist-1.2.3.dist-info/METADATA",
            "commit": f"sed -i 's/{GIT}/{'b' * 40}/' {site}/gitdist-0.1.0.dist-info/direct_url.json",
        }  # fmt: skip
        for name, command in edits.items():
            context = project / f"derived-{name}"
            context.mkdir()
            (context / "Dockerfile").write_text(f"FROM {made['good']}\nRUN {command}\n")
            made[name] = _build(eng, context)
        context = project / "derived-env"  # the ROCm value where the cuda recipe sets cuda's
        context.mkdir()
        (context / "Dockerfile").write_text(
            f"FROM {made['good']}\nENV MILES_HARDWARE_PLATFORM=rocm\n"
        )
        made["env"] = _build(eng, context)
        record = project / "build/local/cuda/amd64/image.json"
        record.parent.mkdir(parents=True)
        record.write_text(
            json.dumps(
                {
                    "image_id": made["good"], "tag": "twinbuild/cuda:local-amd64",
                    "inputs_hash": "sha256:" + "0" * 64, "manifest_digest": "sha256:" + "0" * 64,
                    "variant": "cuda", "arch": "linux/amd64", "profile": "local",
                    "base": {"ref": "twinbuild/base:test", "id": base_id},
                    "skipped": [
                        {"pin": "checkout", "reason": "checkout needs GitHub"},
                        {"pin": "artifact", "reason": "production-only artifact"},
                    ],
                    "python": "/opt/venv/bin/python",
                }
            )
        )  # fmt: skip
        yield made
    finally:
        for image_id in reversed(made.values()):
            eng.api.remove_image(image_id, force=True, noprune=True)


def _smoke(manifest: PinManifest, project: Path, tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    runner.smoke(manifest, root=project, variant="cuda", report_dir=tmp_path, echo=False, **kwargs)
    return _summary(tmp_path, kwargs.get("profile") or "local")


def _summary(report_dir: Path, profile: str) -> dict[str, Any]:
    """The one report of the run: ``smoke-cuda-amd64-<profile>.json`` for the recorded build, keyed
    by the image id for any other image (``--image``)."""
    (path,) = report_dir.glob(f"smoke-cuda-amd64-{profile}*.json")
    data: dict[str, Any] = json.loads(path.read_text())
    if path.name != f"smoke-cuda-amd64-{profile}.json":
        assert path.name == f"smoke-cuda-amd64-{profile}-{data['image']['id'][7:19]}.json"
    return data


def _by_id(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in summary["tests"]}


def _smoke_fails(
    manifest: PinManifest, project: Path, tmp_path: Path, image: str
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Smoke ``image`` with the local profile, which must fail: its tests by id, and the failed."""
    with pytest.raises(FindingsError):
        _smoke(manifest, project, tmp_path, image=image, profile="local")
    tests = _by_id(_summary(tmp_path, "local"))
    return tests, [t for t in tests.values() if t["outcome"] == "failed"]


def _containers(eng: client.Engine) -> list[Any]:
    return list(eng.api.containers(all=True, filters={"label": client.OWNER_LABEL}))


def test_smoke_local_build_record_passes(
    eng: client.Engine,
    manifest: PinManifest,
    project: Path,
    images: dict[str, str],
    tmp_path: Path,
) -> None:
    before = _containers(eng)
    summary = _smoke(manifest, project, tmp_path)
    tests = _by_id(summary)
    # skipped: the 13 GPU checks (no GPU here), 3 pins the local profile leaves out and the 2
    # closure checks (the project keeps no pins/lock/)
    assert summary["counts"] == {"passed": 9, "failed": 0, "skipped": 18, "flaky": 0}
    assert tests["test_platform.py::test_architecture"]["outcome"] == "passed"
    assert summary["image"]["id"] == images["good"]
    assert summary["image"]["base_digest"] == CUDA_BASE
    assert summary["image"]["inputs_hash"] == INPUTS
    assert summary["holds"] == {"gitdist": GIT, "rangedist": "0.9", "tinydist": "1.2.3"}
    assert tests["test_conformance.py::test_pin[checkout]"]["message"] == (
        "not in local profile: checkout (checkout needs GitHub)"
    )
    assert tests["test_conformance.py::test_base"]["outcome"] == "passed"
    assert tests["test_platform.py::test_env[MILES_HARDWARE_PLATFORM]"]["outcome"] == "passed"
    assert tests["test_platform.py::test_env[PATH]"]["outcome"] == "passed"
    assert tests["test_platform.py::test_import[tinydist]"]["outcome"] == "passed"
    assert tests["test_platform.py::test_binary[/opt/smoke/bin/all_reduce_perf]"]["message"] == (
        "production contents: the local profile builds no diagnostic binaries"
    )
    gpu = tests["test_gpu.py::test_torch_sees_gpu"]
    assert (gpu["outcome"], gpu["message"], gpu["markers"]) == ("skipped", NO_GPU, ["gpu"])
    assert (tmp_path / "smoke-cuda-amd64-local.junit.xml").is_file()
    assert "| cuda | linux/amd64 | local |" in (tmp_path / "smoke.md").read_text()
    assert _containers(eng) == before  # the container is gone


def test_smoke_production_by_image_id_passes(
    manifest: PinManifest, project: Path, images: dict[str, str], tmp_path: Path
) -> None:
    summary = _smoke(manifest, project, tmp_path, image=images["good"], profile="production")
    tests = _by_id(summary)
    assert summary["counts"]["failed"] == 0, [t["message"] for t in summary["tests"]]
    assert tests["test_conformance.py::test_pin[checkout]"]["outcome"] == "passed"
    assert tests["test_conformance.py::test_pin[artifact]"]["outcome"] == "passed"
    assert tests["test_platform.py::test_binary[/opt/smoke/bin/all_reduce_perf]"]["outcome"] == (
        "passed"
    )
    assert tests["test_platform.py::test_import[gitdist]"]["outcome"] == "passed"
    assert summary["holds"]["checkout"] == CHECKOUT
    assert summary["holds"]["artifact"] == ARTIFACT_SHA
    # The report is what `evidence record` reads: here, with no GPU, it records a failed run.
    # --image: the report is keyed by the image id; `evidence record` finds it by its glob
    (report,) = tmp_path.glob("smoke-cuda-amd64-production-*.json")
    about = validated(json.loads(report.read_text()))  # the commit's hashes: here, its labels
    statement = evidence.record(report, env=github_env(), now=datetime.now(UTC), validated=about)
    assert statement.predicate.results.verdict == "failed"
    assert statement.predicate.build.inputs_hash == INPUTS
    assert statement.subject[0].sha256 == images["good"].removeprefix("sha256:")


def test_smoke_changed_version_fails_naming_pin(
    manifest: PinManifest, project: Path, images: dict[str, str], tmp_path: Path
) -> None:
    with pytest.raises(FindingsError) as err:
        runner.smoke(
            manifest, root=project, variant="cuda", image=images["version"], profile="local",
            report_dir=tmp_path, echo=False,
        )  # fmt: skip
    message = "pins/manifest.toml:31: pin tinydist: expected tinydist==1.2.3, found tinydist 1.2.4"
    assert str(err.value) == (
        f"smoke: 1 failed; first: cuda (linux/amd64) (local): {message} (reports in {tmp_path})"
    )
    tests = _by_id(_summary(tmp_path, "local"))
    assert tests["test_conformance.py::test_pin[tinydist]"]["message"] == message
    assert _summary(tmp_path, "local")["holds"]["tinydist"] == "1.2.4"


def test_smoke_changed_env_fails_naming_the_variable_and_the_recipe_line(
    manifest: PinManifest, project: Path, images: dict[str, str], tmp_path: Path
) -> None:
    """One environment read serves every ENV check, and a value the recipe did not set fails
    its own check alone (the others pass from the same read)."""
    tests, failed = _smoke_fails(manifest, project, tmp_path, images["env"])
    assert [t["id"] for t in failed] == ["test_platform.py::test_env[MILES_HARDWARE_PLATFORM]"]
    assert failed[0]["message"] == (
        "env: expected MILES_HARDWARE_PLATFORM=cuda (set at images/local/Dockerfile:13), "
        "found MILES_HARDWARE_PLATFORM=rocm"
    )
    assert tests["test_platform.py::test_env[PATH]"]["outcome"] == "passed"
    assert tests["test_platform.py::test_env[TWINBUILD_SMOKE_HOME]"]["outcome"] == "passed"


def test_smoke_changed_commit_fails_naming_pin(
    manifest: PinManifest, project: Path, images: dict[str, str], tmp_path: Path
) -> None:
    _, failed = _smoke_fails(manifest, project, tmp_path, images["commit"])
    assert [t["id"] for t in failed] == ["test_conformance.py::test_pin[gitdist]"]
    assert failed[0]["message"] == (
        f"pins/manifest.toml:36: pin gitdist: expected gitdist at commit {GIT}, "
        f"found commit {'b' * 40}"
    )
