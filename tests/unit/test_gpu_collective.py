# ruff: noqa: UP031 -- the perf output below is laid out with nccl-tests' own printf formats
"""The all-reduce checks: results on every GPU, and bandwidth against the manifest's floor.

Output laid out with the format strings of nccl-tests' src/util.cu at the pinned ae98985f
(writeDeviceReport, writeBenchmarkLinePreamble/Body, writeResultFooter), which rccl-tests keeps;
and the real output of that all_reduce_perf on a machine without a GPU (tests/fixtures/gpu).
"""

from __future__ import annotations

from pathlib import Path

from twinbuild.manifest.model import BandwidthFloor
from twinbuild.smoke import gpu_collective

MIB = 1 << 20
PERF = "/usr/local/bin/all_reduce_perf"
H200X8 = BandwidthFloor(gpu="NVIDIA H200", gpus=8, busbw_gbs=225.0, source="datasheet, half")


def _perf_output(
    *, ngpus: int, busbw: float, wrong: int = 0, oob: int = 0, check: int = 1,
    last: float | None = None,
) -> str:  # fmt: skip
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
        bw = last if last is not None and size == 256 * MIB else busbw
        body = "  %7s  %6s  %6s  %6g" % ("123.4", "68.01", "%.2f" % bw, wrong)
        if not check:
            body = "  %7s  %6s  %6s    N/A" % ("123.4", "68.01", "%.2f" % bw)
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


def _judge(output: str, *, rc: int = 0, gpus: int) -> list[str]:
    run = gpu_collective.parse_collective(output)
    return gpu_collective.collective(run, rc=rc, gpus=gpus, tail="(tail)", perf=PERF)


def test_collective_parses_header_rows_and_footer() -> None:
    run = gpu_collective.parse_collective(_perf_output(ngpus=8, busbw=119.3, last=388.5))
    assert (run.ngpus, run.validation, run.out_of_bounds, run.avg_busbw) == (8, 1, 0, 119.3)
    assert [r[0] for r in run.rows] == [8 * MIB << k for k in range(6)]
    assert run.rows[0][1:] == (119.3, "0", 119.3, "0")
    assert run.largest() == (256 * MIB, 388.5)


def test_collective_passes_a_healthy_run() -> None:
    assert _judge(_perf_output(ngpus=8, busbw=119.3), gpus=8) == []


def test_one_gpu_is_skipped_never_passed() -> None:
    assert gpu_collective.skip_reason(1) == gpu_collective.ONE_GPU
    assert gpu_collective.skip_reason(2) is None
    assert (
        gpu_collective.floor_skip(H200X8, gpu="NVIDIA H200", gpus=1, variant="cuda")
        == gpu_collective.ONE_GPU
    )


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
    # The proof's broken case: -c 0, the run checks no result.
    unchecked = _judge(_perf_output(ngpus=2, busbw=40, check=0), gpus=2)
    assert unchecked[0] == f"{PERF} ran without its correctness check (validation: 0)"


def test_bandwidth_is_judged_at_the_largest_size_against_the_floor() -> None:
    # Small messages are latency-bound: 40 GB/s at 8 MiB is healthy if 256 MiB reaches the floor.
    healthy = gpu_collective.parse_collective(_perf_output(ngpus=8, busbw=40, last=371.2))
    assert gpu_collective.bandwidth(healthy, floor=H200X8, perf=PERF) == []
    degraded = gpu_collective.parse_collective(_perf_output(ngpus=8, busbw=40, last=96.3))
    assert gpu_collective.bandwidth(degraded, floor=H200X8, perf=PERF) == [
        f"{PERF}: bus bandwidth 96.3 GB/s at {256 * MIB} bytes on 8x NVIDIA H200, below the "
        "manifest's floor of 225 GB/s (datasheet, half): a link is degraded or missing"
    ]
    # The proof's broken case: a floor above what the host gives.
    above = BandwidthFloor(gpu="NVIDIA H200", gpus=8, busbw_gbs=371.2 * 1.5, source="proof")
    assert gpu_collective.bandwidth(healthy, floor=above, perf=PERF)
    assert gpu_collective.bandwidth(
        gpu_collective.parse_collective(""), floor=H200X8, perf=PERF
    ) == [f"{PERF} printed no result rows: no bandwidth to judge"]


def test_no_declared_floor_skips_with_the_key_to_add() -> None:
    assert gpu_collective.floor_skip(None, gpu="NVIDIA H200 NVL", gpus=4, variant="cuda") == (
        "no all-reduce floor for 4x 'NVIDIA H200 NVL' in the manifest: add one to "
        "[[variants.cuda.all_reduce_floors]] (gpu, gpus, busbw_gbs, source)"
    )
    assert gpu_collective.floor_skip(H200X8, gpu="NVIDIA H200", gpus=8, variant="cuda") is None


def test_collective_timeout_is_a_hang_and_nothing_else() -> None:
    for rc in (124, 137):
        assert _judge("# nThread 1 nGpus 8", rc=rc, gpus=8) == [
            f"{PERF} did not finish within its timeout (exit {rc}): a hang; (tail)"
        ]


def test_collective_never_passes_on_no_output() -> None:
    assert len(_judge("", gpus=2)) >= 3


def test_collective_argv_uses_every_gpu_checks_and_times_out() -> None:
    argv = gpu_collective.collective_argv(PERF, 8, timeout_s=300)
    assert argv[:4] == ["timeout", "-k", "10", "300"]
    assert argv[4] == PERF
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert (flags["-g"], flags["-c"], flags["-T"], flags["-e"]) == ("8", "1", "270", "256M")
    unchecked = gpu_collective.collective_argv(PERF, 2, check=False)
    assert unchecked[unchecked.index("-c") + 1] == "0"


def test_collective_fails_the_real_binary_where_it_cannot_run() -> None:
    """Real output: all_reduce_perf of nccl-tests ae98985f, built here against NCCL 2.32 and run
    with collective_argv's flags on a machine without a GPU (exit 2)."""
    fixture = Path(__file__).parent.parent / "fixtures/gpu/all_reduce_perf-no-gpu.txt"
    output = fixture.read_text(encoding="utf-8")
    run = gpu_collective.parse_collective(output)
    assert (run.ngpus, run.validation, run.rows, run.out_of_bounds) == (1, 1, [], None)
    assert _judge(output, rc=2, gpus=2) == [
        f"{PERF} exited 2: (tail)",
        f"{PERF} ran on 1 GPUs, the machine shows 2: (tail)",
        f"{PERF} printed no result rows: (tail)",
        f"{PERF}: out of bounds values None",
        f"{PERF}: bus bandwidth None GB/s on 2 GPUs (zero at sizes []); GPUs that communicate "
        "move bytes",
    ]
