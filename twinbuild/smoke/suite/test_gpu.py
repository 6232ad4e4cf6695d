"""GPU checks: only where a GPU of the image's platform is present and handed to the container."""

from __future__ import annotations

from typing import Any

import pytest

from twinbuild.smoke.spec import SuiteSpec
from twinbuild.smoke.suite.remote import check, run_argv, run_script

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

# Pause must hand memory back to the device, resume must restore the tensors bit for bit (CPU
# backup), and freeing a tensor while paused must not crash: the pinned merge commit fixes that.
MEMORY_SAVER = """
import gc, json, torch
import torch_memory_saver as tms
saver = getattr(tms, "torch_memory_saver", None) or getattr(tms, "memory_saver", None)
if saver is None:
    saver = tms.TorchMemorySaver()
if hasattr(saver, "hook_mode"):
    saver.hook_mode = "torch"
n = 64 << 20
torch.cuda.init()
try:
    region = saver.region(enable_cpu_backup=True)
except TypeError:
    region = saver.region()
with region:
    kept = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dropped = torch.ones(n, dtype=torch.uint8, device="cuda")
reference = kept.cpu().clone()
torch.cuda.synchronize()
free_before = torch.cuda.mem_get_info()[0]
saver.pause()
torch.cuda.synchronize()
free_paused = torch.cuda.mem_get_info()[0]
del dropped
gc.collect()
saver.resume()
torch.cuda.synchronize()
print(json.dumps({
    "released": free_paused - free_before,
    "size": n,
    "bit_exact": bool(torch.equal(kept.cpu(), reference)),
}))
"""

VISIBLE = """
import json, os, torch
print(json.dumps({
    "hip": os.environ.get("HIP_VISIBLE_DEVICES"),
    "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "count": torch.cuda.device_count(),
}))
"""


@pytest.fixture(autouse=True)
def _gpu_given(spec: SuiteSpec) -> None:
    if spec.gpu is None:
        pytest.skip("GPU checks not asked for")
    if spec.gpu.skip is not None:
        pytest.skip(spec.gpu.skip)


def test_torch_sees_gpu(spec: SuiteSpec, host: Any) -> None:
    got = run_script(host, spec.python, BACKEND, "torch GPU backend")
    check(got["available"], f"torch.cuda.is_available() is False in the {spec.platform} image")
    check(got["count"] >= 1, f"torch sees {got['count']} GPUs")
    if spec.platform == "cuda":
        check(got["cuda"] and not got["hip"], f"expected a CUDA build of torch, found {got}")
    else:
        check(got["hip"], f"expected a ROCm (HIP) build of torch, found {got}")


def test_matmul_matches_cpu(spec: SuiteSpec, host: Any) -> None:
    got = run_script(host, spec.python, MATMUL, "GPU matmul")
    check(got["close"], f"GPU matmul differs from the CPU result by up to {got['max_abs_err']}")


def test_memory_saver_pause_resume(spec: SuiteSpec, host: Any) -> None:
    got = run_script(host, spec.python, MEMORY_SAVER, "torch_memory_saver pause/resume")
    check(
        got["released"] >= got["size"],
        f"torch_memory_saver pause released {got['released']} bytes, expected >= {got['size']}",
    )
    check(got["bit_exact"], "torch_memory_saver resume did not restore the tensor bit-exactly")


def test_all_reduce_perf_one_gpu(spec: SuiteSpec, host: Any) -> None:
    perf = spec.gpu.perf_binary if spec.gpu is not None else None
    if perf is None:
        pytest.skip("no all_reduce_perf among the platform's binaries")
    argv = [perf, "-b", "8", "-e", "8M", "-f", "2", "-g", "1"]
    result = run_argv(host, argv)
    out = result.stdout + result.stderr
    check(result.rc == 0, f"{' '.join(argv)} exited {result.rc}: {out.strip()[-600:]}")
    check("Avg bus bandwidth" in out, f"{perf} printed no bus bandwidth: {out.strip()[-300:]}")


def test_visible_devices_agree(spec: SuiteSpec, host: Any) -> None:
    if spec.platform != "rocm":
        pytest.skip("HIP_VISIBLE_DEVICES applies to the ROCm image only")
    got = run_script(host, spec.python, VISIBLE, "visible devices")
    if got["hip"] is not None and got["cuda"] is not None:
        check(
            got["hip"] == got["cuda"],
            f"HIP_VISIBLE_DEVICES={got['hip']} but CUDA_VISIBLE_DEVICES={got['cuda']}",
        )
    listed = got["hip"] if got["hip"] is not None else got["cuda"]
    if listed:
        wanted = len([d for d in listed.split(",") if d.strip()])
        check(got["count"] == wanted, f"{listed!r} lists {wanted} GPUs; torch sees {got['count']}")
