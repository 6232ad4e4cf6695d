"""Each GPU check's pass/fail decision, on healthy and on broken readings (no GPU needed).

The readings have the shape of the scripts' last JSON line (twinbuild/smoke/gpu_scripts.py);
the broken ones are what a broken image or host gives: the pre-fix torch_memory_saver (PR #95),
a tag that does not separate regions, a region without CPU backup, a driver too old, a torch
built for another CUDA major.
"""

from __future__ import annotations

from typing import Any

import pytest

from twinbuild.smoke import gpu_checks

MIB = 1 << 20
FREE = 140_000 * MIB  # an H200's free memory, give or take
LIB = "/usr/local/lib/python3.12/dist-packages/torch_memory_saver_hook_mode_preload_cu13.abi3.so"
PRELOAD = {"hook_mode": "preload", "library": LIB, "ld_preload": LIB, "preload_active": True}


def _reading(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = {"stage": "done", **base}
    out.update(changes)
    return out


# -- free while paused (preload) --------------------------------------------------------------------


def _free(**changes: Any) -> dict[str, Any]:
    """A healthy run of gpu_scripts.MEMORY_SAVER_FREE (two 256 MiB buffers)."""
    n = 256 * MIB
    return _reading(
        {
            **PRELOAD, "region_bytes": 2 * n, "freed_bytes": n, "free_before": FREE,
            "free_paused": FREE + 2 * n + 2 * MIB,  # VMM granularity rounds up
            "free_resumed": FREE + n,  # the buffer freed while paused stays free
            "free_rc": 0,
        },
        changes,
    )  # fmt: skip


def test_free_while_paused_passes_a_healthy_run() -> None:
    assert gpu_checks.memory_saver_free(_free()) == []


def test_free_while_paused_judges_cudafree_return_code() -> None:
    # cudaErrorInvalidValue (1) from a free path that refused the paused buffer.
    assert gpu_checks.memory_saver_free(_free(free_rc=1)) == [
        "cudaFree of a buffer freed while paused returned 1, not 0 (cudaSuccess)"
    ]
    assert gpu_checks.memory_saver_free(_free(free_rc=None)) == [
        "cudaFree of a buffer freed while paused returned None, not 0 (cudaSuccess)"
    ]
    missing = _free()
    del missing["free_rc"]
    assert gpu_checks.memory_saver_free(missing)[0].startswith(
        "torch_memory_saver free-while-paused: incomplete readings"
    )


def test_free_while_paused_fails_when_pause_frees_no_vram() -> None:
    # ROCm 7.2 without the ROCr VMM fix: pause unmaps, the device gets nothing back.
    problems = gpu_checks.memory_saver_free(_free(free_paused=FREE, free_resumed=FREE))
    assert problems[0] == (
        "torch_memory_saver pause released 0 MiB of the region's 512 MiB (expected >= 90%); "
        "device memory was not handed back"
    )


def test_free_while_paused_fails_when_the_freed_buffer_is_not_released() -> None:
    assert gpu_checks.memory_saver_free(_free(free_resumed=FREE)) == [
        "a 256 MiB buffer freed while paused left only 0 MiB free after resume: "
        "torch_memory_saver's free path did not release it"
    ]


def test_free_while_paused_needs_the_preload_hook() -> None:
    (problem,) = gpu_checks.memory_saver_free(_free(preload_active=False, ld_preload=None))
    assert problem.startswith("torch_memory_saver's preload library is not interposed")


def test_memory_saver_checks_never_pass_on_missing_readings() -> None:
    for judge in (gpu_checks.memory_saver_free, gpu_checks.memory_saver_torch, gpu_checks.memory_saver_tags,
                  gpu_checks.memory_saver_cpu_backup):  # fmt: skip
        assert judge({}), judge
        assert judge({"stage": "configured", **PRELOAD}), judge
    for key in ("region_bytes", "free_paused", "free_resumed"):
        broken = _free()
        del broken[key]
        assert gpu_checks.memory_saver_free(broken)[-1].startswith("torch_memory_saver free-while")
    assert gpu_checks.memory_saver_free(_free(free_paused="n/a"))


# -- torch mode -------------------------------------------------------------------------------------


def _torch(**changes: Any) -> dict[str, Any]:
    n = 512 * MIB
    return _reading(
        {"hook_mode": "torch", "region_bytes": n, "free_before": FREE,
         "free_paused": FREE + n + 2 * MIB, "free_resumed": FREE + 2 * MIB,
         "usable_after_resume": True},
        changes,
    )  # fmt: skip


def test_torch_mode_passes_a_healthy_run() -> None:
    assert gpu_checks.memory_saver_torch(_torch()) == []


def test_torch_mode_fails_when_the_allocator_is_bypassed() -> None:
    # torch's own allocator served the tensor: pause hands nothing back, resume takes nothing.
    problems = gpu_checks.memory_saver_torch(_torch(free_paused=FREE, free_resumed=FREE))
    assert problems == [
        "torch_memory_saver (torch mode) pause released 0 MiB of the region's 512 MiB "
        "(expected >= 90%); device memory was not handed back",
        "resume took back 0 MiB of the region's 512 MiB: the region's memory was not mapped again",
    ]
    assert gpu_checks.memory_saver_torch(_torch(usable_after_resume=False)) == [
        "the tensor was not usable after resume (a kernel on it gave wrong values)"
    ]
    assert gpu_checks.memory_saver_torch(_torch(hook_mode="preload"))[0] == (
        "torch_memory_saver ran in hook_mode='preload', not torch"
    )


# -- tags ---------------------------------------------------------------------------------------------


def _tags(**changes: Any) -> dict[str, Any]:
    n = 256 * MIB
    return _reading(
        {**PRELOAD, "paused_tag": "grad_buffer", "kept_tag": "default", "paused_bytes": n,
         "kept_bytes": n, "free_before": FREE, "free_paused": FREE + n + 2 * MIB,
         "kept_exact": True},
        changes,
    )  # fmt: skip


def test_tags_pass_when_only_the_tagged_region_pauses() -> None:
    assert gpu_checks.memory_saver_tags(_tags()) == []


def test_tags_fail_when_the_kept_region_is_paused_too() -> None:
    # Both regions tagged grad_buffer (the broken case): pause releases both, and the script does
    # not read the unmapped kept region.
    problems = gpu_checks.memory_saver_tags(
        _tags(kept_tag="grad_buffer", free_paused=FREE + 512 * MIB + 2 * MIB, kept_exact=None)
    )
    assert problems == [
        "pause('grad_buffer') released 514 MiB, more than its region's 256 MiB: the region "
        "tagged 'grad_buffer' was paused too",
        "the region tagged 'grad_buffer' was not resident and bit-exact while 'grad_buffer' was "
        "paused (kept_exact=None)",
    ]
    assert gpu_checks.memory_saver_tags(_tags(free_paused=FREE))[0].startswith(
        "torch_memory_saver (tag 'grad_buffer') pause released 0 MiB"
    )
    assert gpu_checks.memory_saver_tags(_tags(kept_exact=False))[0].startswith(
        "the region tagged 'default' was not resident and bit-exact"
    )


# -- CPU backup ---------------------------------------------------------------------------------------


def _backup(**changes: Any) -> dict[str, Any]:
    n = 256 * MIB
    return _reading(
        {**PRELOAD, "enable_cpu_backup": True, "region_bytes": n, "free_before": FREE,
         "free_paused": FREE + n + 2 * MIB, "backup_exact": True, "restored_exact": True},
        changes,
    )  # fmt: skip


def test_cpu_backup_passes_when_bytes_come_back_bit_exact() -> None:
    assert gpu_checks.memory_saver_cpu_backup(_backup()) == []


def test_cpu_backup_fails_without_a_backup_or_on_one_flipped_byte() -> None:
    # A region without enable_cpu_backup (the broken case): no backup, contents lost.
    assert gpu_checks.memory_saver_cpu_backup(
        _backup(enable_cpu_backup=False, backup_exact=None, restored_exact=False)
    ) == [
        "get_cpu_backup() while paused did not give the region's bytes back bit for bit "
        "(backup_exact=None; enable_cpu_backup=False)",
        "resume did not restore the region's bytes bit for bit from the CPU backup",
    ]
    assert gpu_checks.memory_saver_cpu_backup(_backup(restored_exact=False)) == [
        "resume did not restore the region's bytes bit for bit from the CPU backup"
    ]


# -- torch backend and matmul -------------------------------------------------------------------------


def test_backend_needs_a_gpu_and_the_vendors_build() -> None:
    cuda = {"available": True, "count": 1, "cuda": "13.0", "hip": None, "name": "NVIDIA H200"}
    assert gpu_checks.backend(cuda, vendor="nvidia") == []
    assert gpu_checks.backend(cuda, vendor="amd") == [
        "expected a ROCm (HIP) build of torch, found hip=None"
    ]
    hidden = {"available": False, "count": 0, "cuda": "13.0", "hip": None, "name": None}
    assert gpu_checks.backend(hidden, vendor="nvidia") == [
        "torch.cuda.is_available() is False: torch sees no GPU",
        "torch sees 0 GPUs",
    ]


def test_matmul_within_float32_and_not_with_tf32() -> None:
    assert gpu_checks.matmul({"max_abs_err": 3.8e-5, "close": True, "tf32": False}) == []
    assert gpu_checks.matmul({"max_abs_err": 0.0625, "close": False, "tf32": True}) == [
        "GPU matmul differs from the CPU result by up to 0.0625 (TF32 was on)"
    ]
    assert gpu_checks.matmul({})[0].startswith("GPU matmul: incomplete readings")


# -- driver and toolkit -------------------------------------------------------------------------------


# NVIDIA's rule (docs.nvidia.com/deploy/cuda-compatibility): minor version compatibility within a
# major (CUDA 13.x on any driver >= 580, whose own CUDA is 13.0 or newer), forward compatibility
# only through the compat package with a CUDA call succeeding.
NEED_13 = (
    "a CUDA 13.x build needs a driver of its major (>= 580: minor version compatibility) or the "
    "forward-compatibility package with a CUDA call succeeding"
)


@pytest.mark.parametrize(
    ("driver", "ok"),
    [("580.65.06", True), ("590.44.01", True), ("575.57.08", False), ("", False)],
)
def test_without_a_cuda_reading_cuda_13_needs_driver_580(driver: str, ok: bool) -> None:
    problems = gpu_checks.nvidia_driver(toolkit="13.0", driver=driver, torch_cuda="13.0")
    assert (problems == []) is ok
    if driver == "575.57.08":
        assert problems == [
            f"NVIDIA driver 575.57.08 is too old: {NEED_13}; update the host's driver"
        ]


@pytest.mark.parametrize("torch_cuda", ["13.0", "13.1", "13.2"])
def test_any_cuda_13_torch_runs_on_a_13_0_class_driver_580(torch_cuda: str) -> None:
    """Minor version compatibility: a cu131 (or cu132) torch on driver 580, whose libcuda says
    CUDA 13.0, passes; the verdict notes that it stands on that rule and names its exceptions."""
    assert gpu_checks.nvidia_driver(
        toolkit="13.0", driver="580.65.06", torch_cuda=torch_cuda, driver_cuda="13.0", cu_init=0
    ) == []  # fmt: skip
    note = gpu_checks.minor_compat_note(torch_cuda, "13.0")
    if torch_cuda == "13.0":
        assert note is None
    else:
        assert note == (
            f"torch's CUDA {torch_cuda} runs on the driver's CUDA 13.0 under minor version "
            "compatibility; its exceptions: PTX JIT: PTX from a newer toolkit than the driver's "
            "fails to load (cudaErrorUnsupportedPtxVersion), so kernels must carry machine code "
            "for the GPU; APIs and features that need a newer driver return "
            "cudaErrorCallRequiresNewerDriver"
        )


def test_the_driver_check_notes_minor_version_compatibility() -> None:
    from twinbuild.smoke import gpu_probe

    probe = gpu_probe.Probe(vendor="nvidia", variant="cu13", python="python3", toolkit="13.0")
    reading = {"driver": "580.95.05", "driver_cuda": 13000, "cu_init": 0,
               "libcuda": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", "torch_cuda": "13.1"}  # fmt: skip
    verdict = gpu_probe.driver(reading, probe)
    assert verdict.outcome == "passed"
    assert verdict.notes[0].startswith("torch's CUDA 13.1 runs on the driver's CUDA 13.0 under")


def test_a_driver_of_the_previous_major_fails_without_forward_compatibility() -> None:
    # A 575 driver (CUDA 12.9) under a CUDA 13 torch, its own libcuda: the proof's broken case.
    assert gpu_checks.nvidia_driver(
        toolkit="13.0", driver="575.57.08", torch_cuda="13.0", driver_cuda="12.9", cu_init=0
    ) == [f"the driver supports CUDA 12.9 (driver 575.57.08): {NEED_13}; update the host's driver"]
    # The manifest's major is the rule's first word: a CUDA 12 torch is refused on any driver.
    old = gpu_checks.nvidia_driver(
        toolkit="13.0", driver="580.65.06", torch_cuda="12.9", driver_cuda="13.0", cu_init=0
    )
    assert old == ["torch is built for CUDA 12.9, the manifest says 13.0 (the major must match)"]


def test_forward_compatibility_is_accepted_when_it_works() -> None:
    # An H100 on a 535 (CUDA 12.2) kernel driver with cuda-compat-13-0: the process loaded the
    # compat libcuda, which reports CUDA 13.0, and cuInit succeeds.
    assert gpu_checks.nvidia_driver(
        toolkit="13.0", driver="535.230.02", torch_cuda="13.0", driver_cuda="13.0", cu_init=0,
        compat=True,
    ) == []  # fmt: skip
    # Without a cuDriverGetVersion reading: the compat libcuda loaded and cuInit succeeded.
    assert gpu_checks.nvidia_driver(
        toolkit="13.0", driver="535.230.02", torch_cuda="13.0", cu_init=0, compat=True
    ) == []  # fmt: skip
    # The same package on a GPU without forward-compatibility support: cuInit returns 804.
    assert gpu_checks.nvidia_driver(
        toolkit="13.0", driver="535.230.02", torch_cuda="13.0", driver_cuda="13.0", cu_init=804,
        compat=True,
    ) == [
        "cuInit through the forward-compatibility libcuda returned 804 (804: forward "
        "compatibility is not supported on this GPU): no CUDA call succeeds"
    ]  # fmt: skip
    # No compat package: the old driver reports its own CUDA 12.2.
    assert gpu_checks.nvidia_driver(
        toolkit="13.0", driver="535.230.02", torch_cuda="13.0", driver_cuda="12.2", cu_init=0
    ) == [f"the driver supports CUDA 12.2 (driver 535.230.02): {NEED_13}; update the host's driver"]


def test_cuda_version_reads_cudrivergetversion() -> None:
    assert [gpu_checks.cuda_version(v) for v in (13000, 12040, 13020, 0, None)] == [
        "13.0", "12.4", "13.2", None, None,
    ]  # fmt: skip


def test_rocm_toolkit_matches_the_release() -> None:
    assert (
        gpu_checks.rocm_toolkit(toolkit="7.2", rocm_version="7.2.0-43", torch_hip="7.2.26015") == []
    )
    assert gpu_checks.rocm_toolkit(toolkit="7.2", rocm_version="7.0.2", torch_hip="7.0.51831") == [
        "/opt/rocm is ROCm 7.0.2, the manifest 7.2",
        "torch is built for HIP 7.0.51831, the manifest says ROCm 7.2",
    ]


# -- devices ------------------------------------------------------------------------------------------


def test_visible_devices_compares_what_the_container_got() -> None:
    none: dict[str, str | None] = {}
    assert gpu_checks.visible_devices(vendor="nvidia", nodes=8, torch_count=8, env=none) == []
    assert gpu_checks.visible_devices(vendor="nvidia", nodes=8, torch_count=2, env=none) == [
        "torch sees 2 GPUs; the container got 8 (8 device nodes)"
    ]
    assert gpu_checks.visible_devices(vendor="nvidia", nodes=0, torch_count=0, env=none) == [
        "the container got no nvidia GPU device nodes"
    ]
    narrowed = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert gpu_checks.visible_devices(vendor="nvidia", nodes=8, torch_count=2, env=narrowed) == []
    # The proof's broken case: a visible device that does not exist, so torch sees none.
    assert gpu_checks.visible_devices(
        vendor="nvidia", nodes=1, torch_count=0, env={"CUDA_VISIBLE_DEVICES": "99"}
    ) == ["torch sees 0 GPUs; the container got 1 (1 device nodes, CUDA_VISIBLE_DEVICES='99')"]
    rocr = {"ROCR_VISIBLE_DEVICES": "0,1,2,3"}
    assert gpu_checks.visible_devices(vendor="amd", nodes=8, torch_count=4, env=rocr) == []
    assert gpu_checks.visible_devices(vendor="amd", nodes=8, torch_count=8, env=rocr) == [
        "torch sees 8 GPUs; the container got 4 (8 device nodes, ROCR_VISIBLE_DEVICES='0,1,2,3')"
    ]
    both = {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}
    assert gpu_checks.visible_devices(vendor="amd", nodes=8, torch_count=1, env=both) == [
        "HIP_VISIBLE_DEVICES='0' but CUDA_VISIBLE_DEVICES='1'"
    ]
