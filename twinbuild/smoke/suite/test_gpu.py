"""GPU checks: only where a GPU of the image's vendor is present and handed to the container.

Each test is one ``gpu_probe`` check (the GPU proof runs the same ones): it measures in the image
through testinfra and lets ``gpu_checks``/``gpu_arch``/``gpu_collective`` decide; every command
runs under a timeout, and one that hits it fails without a rerun.
"""

from __future__ import annotations

from typing import Any

import pytest

from twinbuild.smoke import gpu_probe
from twinbuild.smoke.gpu_probe import Probe, Shell, Verdict
from twinbuild.smoke.spec import SuiteSpec
from twinbuild.smoke.suite.remote import report, shell

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _gpu_given(spec: SuiteSpec) -> None:
    if spec.gpu is None:
        pytest.skip("GPU checks not asked for")
    if spec.gpu.skip is not None:
        pytest.skip(spec.gpu.skip)


@pytest.fixture(scope="session")
def probe(spec: SuiteSpec) -> Probe:
    gpu = spec.gpu
    assert gpu is not None  # noqa: S101 -- the autouse fixture skipped otherwise
    return Probe(
        vendor=gpu.vendor, variant=spec.variant, python=spec.python, toolkit=gpu.toolkit,
        archs=tuple(gpu.archs), kernel_modules=tuple(gpu.kernel_modules),
        perf=gpu.perf_binary, floors=tuple(gpu.floors),
        host_driver=str((gpu.info or {}).get("driver") or ""),
    )  # fmt: skip


@pytest.fixture(scope="session")
def run(host: Any) -> Shell:
    return shell(host)


@pytest.fixture
def devices(run: Shell, probe: Probe, request: pytest.FixtureRequest) -> dict[str, Any]:
    """What the container got and what torch sees (one run of ``gpu_scripts.DEVICES``)."""
    got = gpu_probe.read_devices(run, probe)
    if isinstance(got, Verdict):
        report(got, request.node)
    assert isinstance(got, dict)  # noqa: S101 -- report() failed otherwise
    return got


def _model(devices: dict[str, Any], spec: SuiteSpec) -> str:
    names = devices.get("names") or []
    info = (spec.gpu.info if spec.gpu is not None else None) or {}
    return str(names[0]) if names else str(info.get("model") or "")


def test_torch_sees_gpu(run: Shell, probe: Probe, request: pytest.FixtureRequest) -> None:
    report(gpu_probe.torch_backend(run, probe), request.node)


def test_matmul_matches_cpu(run: Shell, probe: Probe, request: pytest.FixtureRequest) -> None:
    report(gpu_probe.matmul(run, probe), request.node)


def test_memory_saver_free_while_paused(
    run: Shell, probe: Probe, request: pytest.FixtureRequest
) -> None:
    report(gpu_probe.memory_saver(run, probe, "memory-saver-free"), request.node)


def test_memory_saver_torch_mode(run: Shell, probe: Probe, request: pytest.FixtureRequest) -> None:
    report(gpu_probe.memory_saver(run, probe, "memory-saver-torch-mode"), request.node)


def test_memory_saver_tags(run: Shell, probe: Probe, request: pytest.FixtureRequest) -> None:
    report(gpu_probe.memory_saver(run, probe, "memory-saver-tags"), request.node)


def test_memory_saver_cpu_backup(run: Shell, probe: Probe, request: pytest.FixtureRequest) -> None:
    report(gpu_probe.memory_saver(run, probe, "memory-saver-cpu-backup"), request.node)


def test_all_reduce_every_gpu(
    run: Shell, probe: Probe, devices: dict[str, Any], spec: SuiteSpec,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    results, _ = gpu_probe.all_reduce(
        run, probe, gpus=int(devices.get("count") or 0), model=_model(devices, spec)
    )
    report(results, request.node)


def test_all_reduce_bandwidth(
    run: Shell, probe: Probe, devices: dict[str, Any], spec: SuiteSpec,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    _, bandwidth = gpu_probe.all_reduce(
        run, probe, gpus=int(devices.get("count") or 0), model=_model(devices, spec)
    )
    report(bandwidth, request.node)


def test_driver_and_toolkit(
    probe: Probe, devices: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    report(gpu_probe.driver(devices, probe), request.node)


def test_visible_devices(
    probe: Probe, devices: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    report(gpu_probe.visible(devices, probe), request.node)


def test_gpu_arch_is_built_for(
    probe: Probe, devices: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    report(gpu_probe.declared_arch(devices, probe), request.node)


def test_torch_built_for_gpu(
    probe: Probe, devices: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    report(gpu_probe.torch_arch(devices, probe), request.node)


def test_kernels_built_for_gpu(
    run: Shell, probe: Probe, devices: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    report(gpu_probe.kernel_arch(run, probe, devices), request.node)
