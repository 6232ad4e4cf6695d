"""The all-reduce check: what nccl-tests / rccl-tests printed, and whether it passes.

Two judgements over one ``all_reduce_perf`` run: :func:`collective` (it ran on every GPU, checked
every result, none wrong) and :func:`bandwidth` (the bus bandwidth at the largest message size
reaches the manifest's floor for this GPU model and count). One GPU moves no data between GPUs,
so both are skipped there (:func:`skip_reason`), never passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from twinbuild.manifest.model import BandwidthFloor
from twinbuild.smoke.gpu_checks import TIMED_OUT

#: How long all_reduce_perf may run before it counts as a hang. A healthy 8-GPU sweep up to
#: 256 MiB takes seconds; minutes mean a hang, and a hang is a failure, never flaky.
COLLECTIVE_TIMEOUT_S = 300
ONE_GPU = (
    "one GPU: an all-reduce on one GPU moves no data between GPUs, so it proves nothing about "
    "the links; run it on a machine with two or more"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRun:
    """What nccl-tests / rccl-tests printed: the header, each size's row, the footer."""

    ngpus: int | None = None
    validation: int | None = None
    rows: list[tuple[int, float, str, float, str]] = field(default_factory=list)
    # (bytes, out-of-place busbw, out-of-place #wrong, in-place busbw, in-place #wrong)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None

    def largest(self) -> tuple[int, float] | None:
        """The largest message size and its bus bandwidth (the lower of out-of-place and
        in-place), where the links, not the latency, decide."""
        if not self.rows:
            return None
        size, oop, _, inp, _ = max(self.rows, key=lambda r: r[0])
        return size, min(oop, inp)


_HEADER = re.compile(r"#\s*nThread\s+\d+\s+nGpus\s+(\d+).*?validation:\s*(\d+)")
_ROW = re.compile(
    r"^\s*(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+"  # size count type redop root
    r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)"  # out-of-place: time algbw busbw #wrong
    r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"  # in-place: the same four
)
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")


def parse_collective(output: str) -> CollectiveRun:
    """Read an ``*_perf`` run's stdout (the format of nccl-tests' src/util.cu, which rccl-tests
    keeps): ``# nThread .. nGpus N .. validation: V``, one row per size, then the footer's
    ``# Out of bounds values : E`` and ``# Avg bus bandwidth : B``."""
    ngpus = validation = oob = None
    avg = None
    rows: list[tuple[int, float, str, float, str]] = []
    for line in output.splitlines():
        if (m := _HEADER.search(line)) is not None:
            ngpus, validation = int(m.group(1)), int(m.group(2))
        elif (m := _OOB.search(line)) is not None:
            oob = int(m.group(1))
        elif (m := _AVG.search(line)) is not None:
            avg = float(m.group(1))
        elif (m := _ROW.match(line)) is not None:
            try:
                rows.append(
                    (int(m.group(1)), float(m.group(4)), m.group(5), float(m.group(8)), m.group(9))
                )
            except ValueError:
                continue  # not a result row after all
    return CollectiveRun(
        ngpus=ngpus, validation=validation, rows=rows, out_of_bounds=oob, avg_busbw=avg
    )


def collective_argv(
    perf: str, gpus: int, *, timeout_s: int = COLLECTIVE_TIMEOUT_S, check: bool = True
) -> list[str]:
    """all_reduce_perf on ``gpus`` GPUs in one process, checking every result, under a timeout.

    ``-g N``: one thread drives every visible GPU; ``-c 1``: check the results of each size
    (#wrong; ``check=False`` is the broken case that must fail); ``-T``: nccl-tests' own
    per-test timeout; ``timeout -k`` kills the process when even that hangs.
    """
    inner = max(timeout_s - 30, 30)
    return [
        "timeout", "-k", "10", str(timeout_s),
        perf, "-b", "8M", "-e", "256M", "-f", "2", "-g", str(gpus), "-c", "1" if check else "0",
        "-T", str(inner),
    ]  # fmt: skip


def skip_reason(gpus: int) -> str | None:
    """Why the inter-GPU checks do not run on ``gpus`` GPUs (None: they run)."""
    return ONE_GPU if gpus == 1 else None


def collective(run: CollectiveRun, *, rc: int, gpus: int, tail: str, perf: str) -> list[str]:
    """Judge one ``collective_argv`` run on a machine with ``gpus`` visible GPUs."""
    if rc in TIMED_OUT:
        return [f"{perf} did not finish within its timeout (exit {rc}): a hang; {tail}"]
    problems: list[str] = []
    if rc != 0:
        problems.append(f"{perf} exited {rc}: {tail}")
    if run.ngpus != gpus:
        problems.append(f"{perf} ran on {run.ngpus} GPUs, the machine shows {gpus}: {tail}")
    if run.validation != 1:
        problems.append(f"{perf} ran without its correctness check (validation: {run.validation})")
    if not run.rows:
        problems.append(f"{perf} printed no result rows: {tail}")
    wrong = [(size, a, b) for size, _, a, _, b in run.rows if a != "0" or b != "0"]
    if wrong:
        size, a, b = wrong[0]
        problems.append(
            f"{perf}: wrong results at {len(wrong)} sizes, first {size} bytes "
            f"(#wrong out-of-place {a}, in-place {b})"
        )
    if run.out_of_bounds is None or run.out_of_bounds != 0:
        problems.append(f"{perf}: out of bounds values {run.out_of_bounds}")
    if gpus >= 2:
        flat = [size for size, oop, _, inp, _ in run.rows if oop <= 0 or inp <= 0]
        if run.avg_busbw is None or run.avg_busbw <= 0 or flat:
            problems.append(
                f"{perf}: bus bandwidth {run.avg_busbw} GB/s on {gpus} GPUs (zero at sizes "
                f"{flat[:3]}); GPUs that communicate move bytes"
            )
    return problems


def floor_skip(floor: BandwidthFloor | None, *, gpu: str, gpus: int, variant: str) -> str | None:
    """Why the bandwidth is not judged (None: it is): one GPU, or no floor declared."""
    if gpus == 1:
        return ONE_GPU
    if floor is None:
        return (
            f"no all-reduce floor for {gpus}x {gpu!r} in the manifest: add one to "
            f"[[variants.{variant}.all_reduce_floors]] (gpu, gpus, busbw_gbs, source)"
        )
    return None


def bandwidth(run: CollectiveRun, *, floor: BandwidthFloor, perf: str) -> list[str]:
    """The bus bandwidth at the largest message size must reach the declared floor."""
    largest = run.largest()
    if largest is None:
        return [f"{perf} printed no result rows: no bandwidth to judge"]
    size, busbw = largest
    if busbw < floor.busbw_gbs:
        return [
            f"{perf}: bus bandwidth {busbw:g} GB/s at {size} bytes on {floor.gpus}x {floor.gpu}, "
            f"below the manifest's floor of {floor.busbw_gbs:g} GB/s ({floor.source}): a link is "
            "degraded or missing"
        ]
    return []
