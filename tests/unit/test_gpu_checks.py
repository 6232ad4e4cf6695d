# ruff: noqa: UP031 -- the perf output below is laid out with nccl-tests' own printf formats
"""Each GPU check's pass/fail decision, on healthy and on broken readings (no GPU needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from twinbuild.smoke import gpu_checks

MIB = 1 << 20
FREE = 140_000 * MIB  # an H200's free memory, give or take


def _saver(**changes: Any) -> dict[str, Any]:
    """Readings of a healthy run of gpu_scripts.MEMORY_SAVER (n = 256 MiB)."""
    n = 256 * MIB
    healthy: dict[str, Any] = {
        "stage": "done",
        "hook_mode": "preload",
        "library": "/usr/local/lib/python3.12/dist-packages/torch_memory_saver_hook_mode_preload_cu13.abi3.so",
        "ld_preload": "/usr/local/lib/python3.12/dist-packages/torch_memory_saver_hook_mode_preload_cu13.abi3.so",
        "preload_active": True,
        "region_bytes": 2 * n,
        "freed_bytes": n,
        "free_before": FREE,
        "free_paused": FREE + 2 * n + 2 * MIB,  # VMM granularity rounds up
        "free_resumed": FREE + n,  # the buffer freed while paused stays free
        "free_rc": 0,
        "bit_exact": True,
    }
    healthy.update(changes)
    return healthy


def test_memory_saver_passes_a_healthy_run() -> None:
    assert gpu_checks.memory_saver(_saver()) == []


def test_memory_saver_fails_when_pause_frees_no_vram() -> None:
    # ROCm 7.2 without the ROCr VMM fix: pause unmaps, the device gets nothing back.
    problems = gpu_checks.memory_saver(_saver(free_paused=FREE, free_resumed=FREE))
    assert problems[0] == (
        "torch_memory_saver pause released 0 MiB of the region's 512 MiB (expected >= 90%); "
        "device memory was not handed back"
    )


def test_memory_saver_fails_when_the_freed_buffer_is_not_released() -> None:
    problems = gpu_checks.memory_saver(_saver(free_resumed=FREE))
    assert problems == [
        "a 256 MiB buffer freed while paused left only 0 MiB free after resume: "
        "torch_memory_saver's free path did not release it"
    ]


def test_memory_saver_fails_on_corrupt_data_or_no_preload() -> None:
    assert gpu_checks.memory_saver(_saver(bit_exact=False)) == [
        "torch_memory_saver resume did not give the kept tensor back bit-exactly"
    ]
    (problem,) = gpu_checks.memory_saver(_saver(preload_active=False, ld_preload=None))
    assert problem.startswith("torch_memory_saver's preload library is not interposed")


def test_memory_saver_never_passes_on_missing_readings() -> None:
    for key in ("region_bytes", "free_paused", "free_resumed"):
        broken = _saver()
        del broken[key]
        assert gpu_checks.memory_saver(broken)[-1].startswith(
            "torch_memory_saver: incomplete readings"
        )
    assert gpu_checks.memory_saver(_saver(free_paused="n/a"))
    assert gpu_checks.memory_saver({})


# -- all_reduce_perf ------------------------------------------------------------------------------
# Output laid out with the format strings of nccl-tests' src/util.cu at the pinned ae98985f
# (writeDeviceReport, writeBenchmarkLinePreamble/Body, writeResultFooter), which rccl-tests keeps.


def _perf_output(*, ngpus: int, busbw: float, wrong: int = 0, oob: int = 0, check: int = 1) -> str:
    lines = [
        "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807",
        "# Collective test starting: all_reduce_perf",
        f"# nThread 1 nGpus {ngpus} minBytes 8388608 maxBytes 268435456 step: 2(factor) "
        f"warmup iters: 1 iters: 20 agg iters: 1 validation: {check} graph: 0",
        "#",
        "#                                                              out-of-place                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)       ",
    ]
    size = 8 * MIB
    while size <= 256 * MIB:
        body = "  %7s  %6s  %6s  %6s" % ("123.4", "68.01", "%.2f" % busbw, "%g" % wrong)
        if not check:
            body = "  %7s  %6s  %6s    N/A" % ("123.4", "68.01", "%.2f" % busbw)
        lines.append(
            "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "-1") + body + body
        )
        size *= 2
    lines += [
        "# %-20s : %d %s" % ("Out of bounds values", oob, "FAILED" if oob else "OK"),
        "# %-20s : %g %s" % ("Avg bus bandwidth", busbw, ""),
        "#",
        "# Collective test concluded: all_reduce_perf",
    ]
    return "\n".join(lines) + "\n"


PERF = "/usr/local/bin/all_reduce_perf"


def _judge(output: str, *, rc: int = 0, gpus: int) -> list[str]:
    run = gpu_checks.parse_collective(output)
    return gpu_checks.collective(run, rc=rc, gpus=gpus, tail="(tail)", perf=PERF)


def test_collective_parses_header_rows_and_footer() -> None:
    run = gpu_checks.parse_collective(_perf_output(ngpus=8, busbw=119.3))
    assert (run.ngpus, run.validation, run.out_of_bounds, run.avg_busbw) == (8, 1, 0, 119.3)
    assert [r[0] for r in run.rows] == [8 * MIB << k for k in range(6)]
    assert run.rows[0][1:] == (119.3, "0", 119.3, "0")


def test_collective_passes_healthy_runs() -> None:
    assert _judge(_perf_output(ngpus=8, busbw=119.3), gpus=8) == []
    # One GPU has no bus to measure: busbw 0 is right there, and the results are still checked.
    assert _judge(_perf_output(ngpus=1, busbw=0), gpus=1) == []


def test_collective_fails_broken_runs() -> None:
    assert _judge(_perf_output(ngpus=1, busbw=0), gpus=8) == [
        f"{PERF} ran on 1 GPUs, the machine shows 8: (tail)",
        f"{PERF}: bus bandwidth 0.0 GB/s on 8 GPUs (zero at sizes "
        f"[{8 * MIB}, {16 * MIB}, {32 * MIB}]); GPUs that communicate move bytes",
    ]
    assert _judge(_perf_output(ngpus=2, busbw=40, wrong=3, oob=1), rc=1, gpus=2) == [
        f"{PERF} exited 1: (tail)",
        f"{PERF}: wrong results at 6 sizes, first {8 * MIB} bytes (#wrong out-of-place 3, in-place 3)",
        f"{PERF}: out of bounds values 1",
    ]
    unchecked = _judge(_perf_output(ngpus=2, busbw=40, check=0), gpus=2)
    assert unchecked[0] == f"{PERF} ran without its correctness check (validation: 0)"


def test_collective_timeout_is_a_hang_and_nothing_else() -> None:
    for rc in gpu_checks.TIMED_OUT:
        assert _judge("# nThread 1 nGpus 8", rc=rc, gpus=8) == [
            f"{PERF} did not finish within its timeout (exit {rc}): a hang; (tail)"
        ]


def test_collective_never_passes_on_no_output() -> None:
    assert len(_judge("", gpus=1)) >= 3


def test_collective_argv_uses_every_gpu_checks_and_times_out() -> None:
    argv = gpu_checks.collective_argv(PERF, 8, timeout_s=300)
    assert argv[:4] == ["timeout", "-k", "10", "300"]
    assert argv[4] == PERF
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert (flags["-g"], flags["-c"], flags["-T"]) == ("8", "1", "270")


# -- driver, toolkit, devices, architectures ------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "ok"),
    [("580.65.06", True), ("590.44.01", True), ("575.57.08", False), ("", False)],
)
def test_cuda_13_needs_driver_580(driver: str, ok: bool) -> None:
    problems = gpu_checks.nvidia_driver(toolkit="13.0", driver=driver, torch_cuda="13.0")
    assert (problems == []) is ok
    if driver == "575.57.08":
        assert problems == [
            "NVIDIA driver 575.57.08 is too old for CUDA 13.0: CUDA 13.x needs driver >= 580; "
            "update the host's driver"
        ]


def test_torch_must_match_the_toolkit() -> None:
    assert gpu_checks.nvidia_driver(toolkit="13.0", driver="580.65.06", torch_cuda="12.9") == [
        "torch is built for CUDA 12.9, the manifest says 13.0"
    ]
    assert (
        gpu_checks.rocm_toolkit(toolkit="7.2", rocm_version="7.2.0-43", torch_hip="7.2.26015") == []
    )
    assert gpu_checks.rocm_toolkit(toolkit="7.2", rocm_version="7.0.2", torch_hip="7.0.51831") == [
        "/opt/rocm is ROCm 7.0.2, the manifest 7.2",
        "torch is built for HIP 7.0.51831, the manifest says ROCm 7.2",
    ]


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
    # ROCR_VISIBLE_DEVICES narrows on AMD (the runtime applies it before HIP's variable).
    rocr = {"ROCR_VISIBLE_DEVICES": "0,1,2,3"}
    assert gpu_checks.visible_devices(vendor="amd", nodes=8, torch_count=4, env=rocr) == []
    assert gpu_checks.visible_devices(vendor="amd", nodes=8, torch_count=8, env=rocr) == [
        "torch sees 8 GPUs; the container got 4 (8 device nodes, ROCR_VISIBLE_DEVICES='0,1,2,3')"
    ]
    both = {"HIP_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "1"}
    assert gpu_checks.visible_devices(vendor="amd", nodes=8, torch_count=1, env=both) == [
        "HIP_VISIBLE_DEVICES='0' but CUDA_VISIBLE_DEVICES='1'"
    ]


def test_gpu_arch_must_be_one_the_image_is_built_for() -> None:
    rocm = ("gfx942", "gfx950")
    assert gpu_checks.gpu_arch(vendor="amd", archs=rocm, found=["gfx942:sramecc+:xnack-"] * 8) == []
    assert gpu_checks.gpu_arch(vendor="amd", archs=rocm, found=["gfx950"]) == []
    assert gpu_checks.gpu_arch(vendor="amd", archs=rocm, found=["gfx90a:sramecc+:xnack-"]) == [
        "GPU architecture gfx90a is not one this image is built for (gfx942, gfx950): "
        "use a build for it, or add it to gpu_archs and rebuild"
    ]
    cuda = ("9.0", "10.0", "10.3")
    assert gpu_checks.gpu_arch(vendor="nvidia", archs=cuda, found=["9.0"]) == []
    assert gpu_checks.gpu_arch(vendor="nvidia", archs=cuda, found=["8.0"])[0].startswith(
        "GPU compute capability 8.0 is not one"
    )
    assert gpu_checks.gpu_arch(vendor="nvidia", archs=cuda, found=[]) == [
        "no GPU architecture could be read"
    ]


def test_collective_fails_the_real_binary_where_it_cannot_run() -> None:
    """Real output: all_reduce_perf of nccl-tests ae98985f, built here by scripts/gpu-host-tools.sh
    against NCCL 2.32 and run with collective_argv's flags on a machine without a GPU (exit 2)."""
    fixture = Path(__file__).parent.parent / "fixtures/gpu/all_reduce_perf-no-gpu.txt"
    output = fixture.read_text(encoding="utf-8")
    run = gpu_checks.parse_collective(output)
    assert (run.ngpus, run.validation, run.rows, run.out_of_bounds) == (1, 1, [], None)
    assert _judge(output, rc=2, gpus=1) == [
        f"{PERF} exited 2: (tail)",
        f"{PERF} printed no result rows: (tail)",
        f"{PERF}: out of bounds values None",
    ]
