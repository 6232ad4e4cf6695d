"""The runner's pieces without Docker: stage chains, recipe ENV, skips, host mode, errors."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest

from tests.fake_engine import FakeEngine
from tests.helpers import image, mini_project, with_arm64
from twinbuild.builder.build_record import BuildRecord, SkippedPin, record_path
from twinbuild.errors import ConfigError, FindingsError
from twinbuild.manifest.loader import load
from twinbuild.smoke import cases, runner, targets
from twinbuild.smoke.spec import EnvCase, SuiteSpec

RECIPE = """ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS common
ENV A=1 PATH=/opt/venv/bin:$PATH
ARG X=dflt
ENV B=${X}

FROM common AS cuda
ENV A=2 C=${TORCH_MEMORY_SAVER_COMMIT}

FROM common AS rocm
ENV R=1
"""


def test_stage_chain_and_env(tmp_path: Path) -> None:
    recipe = tmp_path / "Dockerfile"
    recipe.write_text(RECIPE)
    assert cases.stage_chain(recipe, "cuda") == ["common", "cuda"]
    assert cases.stage_chain(recipe, None) == ["common", "rocm"]
    with pytest.raises(ConfigError, match=r"no stage 'x'; stages: common, cuda, rocm"):
        cases.stage_chain(recipe, "x")
    env = cases.recipe_env(
        recipe,
        "cuda",
        {"TORCH_MEMORY_SAVER_COMMIT": "f" * 40},
        shown=Path("images/local/Dockerfile"),
    )
    assert env == [
        EnvCase(key="A", value="2", where="images/local/Dockerfile:8"),
        EnvCase(key="PATH", value="/opt/venv/bin:$PATH", where="images/local/Dockerfile:3"),
        EnvCase(key="B", value="dflt", where="images/local/Dockerfile:5"),
        EnvCase(key="C", value="f" * 40, where="images/local/Dockerfile:8"),
    ]


def test_env_pattern_lets_the_base_fill_variables() -> None:
    from twinbuild.smoke.suite.test_platform import env_pattern

    assert env_pattern("/opt/venv/bin:$PATH").fullmatch("/opt/venv/bin:/usr/bin:/bin")
    assert not env_pattern("/opt/venv/bin:$PATH").fullmatch("/usr/bin:/bin")
    assert not env_pattern("a.b").fullmatch("axb")


def test_local_skips_from_the_build_record_or_fixed_reasons(tmp_path: Path) -> None:
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    record = BuildRecord(
        image_id="sha256:i", skipped=(SkippedPin(pin="torch_memory_saver", reason="needs nvcc"),)
    )
    target = targets.Target(
        image=image("cuda"), profile="local", image_id="sha256:i", python="p", record=record
    )
    skips = {c.pin.name: c.skip for c in cases.pin_cases(manifest, target)}
    assert skips == {
        "torch_memory_saver": "not in local profile: torch_memory_saver (needs nvcc)",
        "megatron-bridge": None,
        "flash-linear-attention": None,
        "megatron-lm": None,  # the record is what the build did
    }
    unrecorded = targets.Target(
        image=image("cuda"), profile="local", image_id="sha256:i", python="p"
    )
    assert [c.skip for c in cases.pin_cases(manifest, unrecorded) if c.skip] == [
        "not in local profile: megatron-lm (checkout of https://github.com/NVIDIA/Megatron-LM "
        "needs GitHub; the local profile builds only pip installs)"
    ]


def test_local_skips_from_the_images_own_label_whichever_way_it_was_built(
    tmp_path: Path,
) -> None:
    """An image `docker buildx bake` made has no build record here: its label says what its
    build left out, and only a pin the local profile may leave out is excused by it."""
    from tests.fake_engine import image_doc

    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    labels = {"org.twinbuild.left-out": "flash-linear-attention,megatron-bridge,megatron-lm"}
    record = BuildRecord(image_id="sha256:i")  # a record that says otherwise: the label wins
    for held in (None, record):
        target = targets.Target(
            image=image("cuda"), profile="local", image_id="sha256:i", python="p",
            inspect=image_doc("sha256:i", labels), record=held,
        )  # fmt: skip
        skips = {c.pin.name: c.skip for c in cases.pin_cases(manifest, target)}
        assert skips == {
            "torch_memory_saver": None,  # not named: the image says it holds it
            "megatron-bridge": "not in local profile: megatron-bridge (no local mirror of "
            "https://github.com/NVIDIA-NeMo/Megatron-Bridge; pass --mirror megatron-bridge=PATH "
            "to include it)",
            "flash-linear-attention": None,  # a PyPI pin the profile always installs: checked
            "megatron-lm": "not in local profile: megatron-lm (checkout of "
            "https://github.com/NVIDIA/Megatron-LM needs GitHub; the local profile builds only "
            "pip installs)",
        }
    nothing = image_doc("sha256:i", {"org.twinbuild.left-out": ""})
    target = targets.Target(
        image=image("cuda"), profile="local", image_id="sha256:i", python="p", inspect=nothing
    )
    assert [c.skip for c in cases.pin_cases(manifest, target) if c.skip] == []


def test_built_target_needs_a_record_and_the_image(tmp_path: Path) -> None:
    eng = FakeEngine()
    with pytest.raises(ConfigError) as err:
        targets.built_target(eng, tmp_path, image("cuda"), "local")
    assert str(err.value) == (
        f"{tmp_path}/build/local/cuda/amd64/image.json: no build record; run `twinbuild build "
        "--variant cuda --arch linux/amd64 --profile local` first, or pass --image REF"
    )
    path = record_path(tmp_path, "local", image("cuda"))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"image_id": "sha256:gone"}))
    with pytest.raises(ConfigError) as err:
        targets.built_target(eng, tmp_path, image("cuda"), "local")
    assert str(err.value) == (
        f"{path}: names sha256:gone, which the engine at unix:///fake.sock lacks; rebuild it"
    )


def test_image_target_resolves_to_the_id_and_reads_labels(tmp_path: Path) -> None:
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    labels = {"org.twinbuild.variant": "rocm", "org.twinbuild.arch": "linux/amd64"}
    inspect = {"Id": "sha256:abc", "Architecture": "amd64", "Config": {"Labels": labels}}
    eng = FakeEngine(images={"twinbuild/rocm:local": inspect})
    target = targets.image_target(eng, tmp_path, "twinbuild/rocm:local", manifest, None, None, None)
    assert (target.image_id, target.image, target.profile, target.python) == (
        "sha256:abc", image("rocm"), "production", "python3",
    )  # fmt: skip
    with pytest.raises(ConfigError) as err:
        targets.image_target(eng, tmp_path, "other:tag", manifest, None, None, None)
    assert str(err.value) == "--image other:tag: the engine at unix:///fake.sock has no such image"


def test_image_and_host_exclude_each_other(tmp_path: Path) -> None:
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    with pytest.raises(ConfigError, match="--image and --host exclude each other"):
        runner.smoke(manifest, root=tmp_path, image="x", host=True)


def test_host_mode_runs_the_suite_on_this_machine(tmp_path: Path) -> None:
    """The whole suite through testinfra's local backend: the mini pins are not installed here."""
    root = mini_project(tmp_path)
    manifest = load(root / "pins/manifest.toml")
    reports = tmp_path / "reports"
    with pytest.raises(FindingsError) as err:
        runner.smoke(
            manifest, root=root, variant="cuda", host=True, gpu=False, report_dir=reports,
            echo=False,
        )  # fmt: skip
    first = "pins/manifest.toml"  # the manifest path as loaded
    assert str(err.value).startswith(
        f"smoke: 4 failed; first: cuda (linux/amd64) (production): {root}/{first}:29"
    )
    data = json.loads((reports / "smoke-cuda-amd64-production-host.json").read_text())
    tests = {t["id"]: t for t in data["tests"]}
    assert data["image"]["id"] is None
    assert tests["test_platform.py::test_architecture"]["outcome"] == "passed"  # natively
    assert tests["test_conformance.py::test_base"]["message"] == (
        "host mode: no image to compare with the base"
    )
    assert (
        tests["test_gpu.py::test_torch_sees_gpu"]["message"] == "GPU checks turned off (--no-gpu)"
    )
    assert tests["test_conformance.py::test_pin[flash-linear-attention]"]["message"] == (
        f"{root}/{first}:43: pin flash-linear-attention: expected flash-linear-attention==0.4.2, "
        "found no distribution flash-linear-attention installed"
    )
    assert (reports / "smoke.md").read_text().startswith("## twinbuild smoke\n")


def test_an_image_that_runs_as_another_architecture_fails(tmp_path: Path) -> None:
    """An arm64 image whose programs are really x86_64 ones (here: this x86_64 machine taken for
    arm64) fails its smoke, naming both architectures: a mislabelled image is not an arm64 one."""
    root = mini_project(tmp_path)
    manifest = load(with_arm64(root) / "pins/manifest.toml")
    reports = tmp_path / "reports"
    with pytest.raises(FindingsError):
        runner.smoke(
            manifest, root=root, variant="cuda", arch="linux/arm64", host=True, gpu=False,
            report_dir=reports, echo=False,
        )  # fmt: skip
    data = json.loads((reports / "smoke-cuda-arm64-production-host.json").read_text())
    tests = {t["id"]: t for t in data["tests"]}
    assert tests["test_platform.py::test_architecture"]["outcome"] == "failed"
    assert tests["test_platform.py::test_architecture"]["message"] == (
        f"architecture: expected linux/arm64 (aarch64), found {platform.machine()}"
    )


def test_spec_round_trips(tmp_path: Path) -> None:
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    target = targets.Target(
        image=image("rocm"), profile="production", image_id=None, python="python3"
    )
    gcase = cases.gpu_case(manifest, target, None, None)
    spec = cases.build_spec(
        None, manifest, tmp_path, target, hostspec="local://", results=tmp_path / "r.json",
        gpu=gcase, rerun_failed_once=True,
    )  # fmt: skip
    assert SuiteSpec.read(spec.write(tmp_path / "spec.json")) == spec


def test_each_run_is_headed_by_its_platform_and_image() -> None:
    from twinbuild.smoke.targets import Target, heading

    image_id = "sha256:" + "ab" * 32
    built = Target(image=image("rocm"), profile="local", image_id=image_id, python="python3",
                   inspect={"RepoTags": ["x:1"]}, record=BuildRecord(image_id=image_id, tag="twinbuild/rocm:local"))  # fmt: skip
    assert (
        heading(built)
        == "== smoke rocm amd64 (local): image abababababab (twinbuild/rocm:local) =="
    )
    loose = Target(image=image("cuda"), profile="production", image_id=image_id, python="python3")
    assert heading(loose) == "== smoke cuda amd64 (production): image abababababab =="
    host = Target(image=image("cuda"), profile="production", image_id=None, python="python3")
    assert heading(host) == "== smoke cuda amd64 (production): this machine =="


def test_bare_gpu_host_runs_only_the_gpu_checks_and_they_fail_without_a_stack(
    tmp_path: Path,
) -> None:
    """--host --gpu on a machine that claims a GPU but has no torch: pins and imports skip as not
    this mode's business; every GPU check runs and fails (never passes vacuously)."""
    from twinbuild.smoke import gpu

    root = mini_project(tmp_path)
    manifest = load(root / "pins/manifest.toml")
    target = targets.Target(
        image=image("cuda"), profile="production", image_id=None, python="/nonexistent/python",
        gpu_only=True,
    )  # fmt: skip
    info = gpu.GpuInfo(
        vendor="nvidia", model="NVIDIA H200", driver="580.65.06", runtime="13.0", count=1
    )
    outcome = runner.smoke_target(
        manifest, root, target, eng=None, gpu=True, report_dir=tmp_path / "r", echo=False,
        detect=lambda _platform: info,
    )  # fmt: skip
    tests = {t["id"].split("::")[1]: t for t in outcome.summary.to_json()["tests"]}
    pins = [t for k, t in tests.items() if k.startswith("test_pin[")]
    assert pins
    assert all(t["outcome"] == "skipped" for t in pins)
    assert pins[0]["message"] == cases.BARE_HOST.format(what="pins")
    gpu_tests = {k: t for k, t in tests.items() if "gpu" in t["markers"]}
    assert set(gpu_tests) == {
        "test_torch_sees_gpu", "test_matmul_matches_cpu", "test_memory_saver_free_while_paused",
        "test_memory_saver_torch_mode", "test_memory_saver_tags", "test_memory_saver_cpu_backup",
        "test_all_reduce_every_gpu", "test_all_reduce_bandwidth", "test_driver_and_toolkit",
        "test_visible_devices", "test_gpu_arch_is_built_for", "test_torch_built_for_gpu",
        "test_kernels_built_for_gpu",
    }  # fmt: skip
    assert all(t["outcome"] == "failed" for t in gpu_tests.values()), gpu_tests
    assert tests["test_torch_sees_gpu"]["message"].startswith("torch GPU backend: exited 127:"), (
        tests["test_torch_sees_gpu"]["message"]
    )


def test_python_needs_host(tmp_path: Path) -> None:
    manifest = load(mini_project(tmp_path) / "pins/manifest.toml")
    with pytest.raises(ConfigError, match="--python names this machine's interpreter"):
        runner.smoke(manifest, root=tmp_path, python="/opt/venv/bin/python")
