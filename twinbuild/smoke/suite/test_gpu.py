"""GPU checks: only where a GPU of the image's platform is present and handed to the container.

Each test measures in the image (``gpu_scripts``, ``all_reduce_perf``) and lets ``gpu_checks``
decide; every command runs under a timeout, and one that hits it fails without a rerun.
"""

from __future__ import annotations

from typing import Any

import pytest

from twinbuild.smoke import gpu_checks, gpu_scripts
from twinbuild.smoke.spec import SuiteSpec
from twinbuild.smoke.suite.remote import check, run_script, run_timed

pytestmark = pytest.mark.gpu

BACKEND = """
import json, torch
ok = torch.cuda.is_available()
print(json.dumps({
    "available": ok,
    "count": torch.cuda.device_count() if ok else 0,
    "cuda": torch.version.cuda,
    "hip": getattr(torch.version, "hip", None),
    "name": torch.cuda.get_device_name(0) if ok else None,
}))
"""

MATMUL = """
import json, torch
torch.backends.cuda.matmul.allow_tf32 = False
g = torch.Generator().manual_seed(0)
a = torch.randn(512, 512, generator=g)
b = torch.randn(512, 512, generator=g)
cpu = a @ b
gpu = (a.cuda() @ b.cuda()).cpu()
print(json.dumps({
    "max_abs_err": (cpu - gpu).abs().max().item(),
    "close": torch.allclose(cpu, gpu, rtol=1e-4, atol=1e-3),
}))
"""


@pytest.fixture(autouse=True)
def _gpu_given(spec: SuiteSpec) -> None:
    if spec.gpu is None:
        pytest.skip("GPU checks not asked for")
    if spec.gpu.skip is not None:
        pytest.skip(spec.gpu.skip)


@pytest.fixture
def devices(spec: SuiteSpec, host: Any, request: pytest.FixtureRequest) -> dict[str, Any]:
    """What the container got and what torch sees (one run of ``gpu_scripts.DEVICES``)."""
    return run_script(host, spec.python, gpu_scripts.DEVICES, "GPU devices", item=request.node)


def _fail_on(problems: list[str]) -> None:
    check(not problems, "; ".join(problems))


def test_torch_sees_gpu(spec: SuiteSpec, host: Any, request: pytest.FixtureRequest) -> None:
    got = run_script(host, spec.python, BACKEND, "torch GPU backend", item=request.node)
    check(got["available"], f"torch.cuda.is_available() is False in the {spec.platform} image")
    check(got["count"] >= 1, f"torch sees {got['count']} GPUs")
    if spec.platform == "cuda":
        check(got["cuda"] and not got["hip"], f"expected a CUDA build of torch, found {got}")
    else:
        check(got["hip"], f"expected a ROCm (HIP) build of torch, found {got}")


def test_matmul_matches_cpu(spec: SuiteSpec, host: Any, request: pytest.FixtureRequest) -> None:
    got = run_script(host, spec.python, MATMUL, "GPU matmul", item=request.node)
    check(got["close"], f"GPU matmul differs from the CPU result by up to {got['max_abs_err']}")


def test_memory_saver_pause_free_resume(
    spec: SuiteSpec, host: Any, request: pytest.FixtureRequest
) -> None:
    where = run_script(
        host, spec.python, gpu_scripts.PRELOAD_LIBRARY, "torch_memory_saver library",
        item=request.node,
    )  # fmt: skip
    got = run_script(
        host, spec.python, gpu_scripts.MEMORY_SAVER, "torch_memory_saver pause/free/resume",
        item=request.node, env={"LD_PRELOAD": str(where["ld_preload"])},
    )  # fmt: skip
    _fail_on(gpu_checks.memory_saver(got))


def test_all_reduce_every_gpu(
    spec: SuiteSpec, host: Any, devices: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    perf = spec.gpu.perf_binary if spec.gpu is not None else None
    if perf is None:
        pytest.skip("no all_reduce_perf among the platform's binaries")
    gpus = int(devices["count"])
    check(gpus >= 1, "torch sees no GPU; all_reduce_perf has nothing to run on")
    argv = gpu_checks.collective_argv(perf, gpus)
    result = run_timed(host, argv, request.node, perf)
    out = result.stdout + result.stderr
    run = gpu_checks.parse_collective(result.stdout)
    tail = out.strip()[-600:]
    _fail_on(gpu_checks.collective(run, rc=result.rc, gpus=gpus, tail=tail, perf=perf))


def test_driver_and_toolkit(spec: SuiteSpec, devices: dict[str, Any]) -> None:
    assert spec.gpu is not None  # noqa: S101 -- the autouse fixture skipped otherwise
    if spec.gpu.vendor == "nvidia":
        driver = devices["driver"] or str((spec.gpu.info or {}).get("driver") or "")
        _fail_on(
            gpu_checks.nvidia_driver(
                toolkit=spec.gpu.toolkit, driver=driver, torch_cuda=devices["torch_cuda"]
            )
        )
    else:
        _fail_on(
            gpu_checks.rocm_toolkit(
                toolkit=spec.gpu.toolkit,
                rocm_version=devices["rocm"],
                torch_hip=devices["torch_hip"],
            )
        )


def test_visible_devices(spec: SuiteSpec, devices: dict[str, Any]) -> None:
    assert spec.gpu is not None  # noqa: S101 -- the autouse fixture skipped otherwise
    _fail_on(
        gpu_checks.visible_devices(
            vendor=spec.gpu.vendor,
            nodes=int(devices["nodes"]),
            torch_count=int(devices["count"]),
            env=devices["env"],
        )
    )


def test_gpu_arch_is_built_for(spec: SuiteSpec, devices: dict[str, Any]) -> None:
    assert spec.gpu is not None  # noqa: S101 -- the autouse fixture skipped otherwise
    _fail_on(
        gpu_checks.gpu_arch(vendor=spec.gpu.vendor, archs=spec.gpu.archs, found=devices["archs"])
    )
