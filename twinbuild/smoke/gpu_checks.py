"""Pass or fail for each GPU check, from what the check measured: pure functions over data.

The smoke suite runs the measurements in the image (``gpu_scripts``, ``all_reduce_perf``) and
hands the numbers here; the unit tests feed the same functions healthy and broken readings. Each
function returns the list of problems: empty means the check passed. None of them can pass on
missing data: a reading that is absent or not a number is itself a problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: pause must hand back at least this share of the region's bytes ("most of the region"): VMM
#: rounds each allocation up to its granularity, so a healthy pause releases a bit more than the
#: tensors' bytes, never much less; ROCm 7.2 without the ROCr VMM fix releases none.
RELEASED_SHARE = 0.9

#: Minimum driver for each CUDA toolkit major, under CUDA minor-version compatibility
#: (NVIDIA's CUDA Toolkit release notes, table "CUDA Toolkit and Minimum Required Driver
#: Version for CUDA Minor Version Compatibility"): a CUDA 13.x image needs driver >= 580.
MIN_NVIDIA_DRIVER: dict[int, tuple[int, ...]] = {12: (525, 60, 13), 13: (580,)}

#: How long all_reduce_perf may run before it counts as a hang. A healthy 8-GPU sweep up to
#: 256 MiB takes seconds; minutes mean a hang, and a hang is a failure, never flaky.
COLLECTIVE_TIMEOUT_S = 300
#: How long a GPU script (torch, torch_memory_saver) may run.
SCRIPT_TIMEOUT_S = 600
#: ``timeout``'s exit code when it stopped the command (coreutils; 137 after -k's SIGKILL).
TIMED_OUT = (124, 137)


def _number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.0f} MiB"


# -- torch_memory_saver ---------------------------------------------------------------------------


def memory_saver(data: Mapping[str, Any]) -> list[str]:
    """Judge the readings of ``gpu_scripts.MEMORY_SAVER``.

    Pause must raise the device's free memory by most of the region's bytes; a buffer freed
    while paused must stay released after resume (freed through torch_memory_saver, not parked
    in a cache); resume must give the kept tensor back bit for bit.
    """
    problems: list[str] = []
    if data.get("hook_mode") != "preload" or data.get("preload_active") is not True:
        problems.append(
            "torch_memory_saver's preload library is not interposed: cudaMalloc/hipMalloc does "
            f"not resolve into {data.get('library') or 'it'} (hook_mode={data.get('hook_mode')!r},"
            f" LD_PRELOAD={data.get('ld_preload')!r})"
        )
    keys = ("region_bytes", "freed_bytes", "free_before", "free_paused", "free_resumed")
    got = {k: _number(data, k) for k in keys}
    n = {k: v for k, v in got.items() if v is not None}
    if len(n) != len(keys) or not n["region_bytes"] or not n["freed_bytes"]:
        problems.append(f"torch_memory_saver: incomplete readings {dict(data)}")
        return problems
    region, freed = n["region_bytes"], n["freed_bytes"]
    before, paused, resumed = n["free_before"], n["free_paused"], n["free_resumed"]
    released = paused - before
    if released < RELEASED_SHARE * region:
        problems.append(
            f"torch_memory_saver pause released {_mib(released)} of the region's {_mib(region)} "
            f"(expected >= {RELEASED_SHARE:.0%}); device memory was not handed back"
        )
    kept_free = resumed - before
    if kept_free < RELEASED_SHARE * freed:
        problems.append(
            f"a {_mib(freed)} buffer freed while paused left only {_mib(kept_free)} free after "
            "resume: torch_memory_saver's free path did not release it"
        )
    if data.get("bit_exact") is not True:
        problems.append("torch_memory_saver resume did not give the kept tensor back bit-exactly")
    return problems


# -- all_reduce_perf ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRun:
    """What nccl-tests / rccl-tests printed: the header, each size's row, the footer."""

    ngpus: int | None = None
    validation: int | None = None
    rows: list[tuple[int, float, str, float, str]] = field(default_factory=list)
    # (bytes, out-of-place busbw, out-of-place #wrong, in-place busbw, in-place #wrong)
    out_of_bounds: int | None = None
    avg_busbw: float | None = None


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


def collective_argv(perf: str, gpus: int, *, timeout_s: int = COLLECTIVE_TIMEOUT_S) -> list[str]:
    """all_reduce_perf on ``gpus`` GPUs in one process, checking every result, under a timeout.

    ``-g N``: one thread drives every visible GPU (one GPU gives a bus bandwidth of 0 by
    definition); ``-c 1``: check the results of each size (#wrong); ``-T``: nccl-tests' own
    per-test timeout; ``timeout -k`` kills the process when even that hangs.
    """
    inner = max(timeout_s - 30, 30)
    return [
        "timeout", "-k", "10", str(timeout_s),
        perf, "-b", "8M", "-e", "256M", "-f", "2", "-g", str(gpus), "-c", "1", "-T", str(inner),
    ]  # fmt: skip


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


# -- driver and toolkit ---------------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts) if parts else None


def nvidia_driver(*, toolkit: str, driver: str, torch_cuda: str | None) -> list[str]:
    """A CUDA ``toolkit`` image on ``driver``: the driver must be new enough for the toolkit's
    major (minor-version compatibility) and torch must be built for that toolkit."""
    problems: list[str] = []
    want = _version(toolkit)
    have = _version(driver)
    if want is None:
        return [f"platforms.cuda.toolkit {toolkit!r} is not a CUDA version"]
    minimum = MIN_NVIDIA_DRIVER.get(want[0])
    if minimum is None:
        problems.append(f"no known minimum driver for CUDA {toolkit}; add it to MIN_NVIDIA_DRIVER")
    elif have is None:
        problems.append(f"the NVIDIA driver version could not be read ({driver!r})")
    elif have < minimum:
        need = ".".join(map(str, minimum))
        problems.append(
            f"NVIDIA driver {driver} is too old for CUDA {toolkit}: CUDA {want[0]}.x needs "
            f"driver >= {need}; update the host's driver"
        )
    got = _version(torch_cuda or "")
    if got is None or got[:2] != want[:2]:
        problems.append(f"torch is built for CUDA {torch_cuda}, the manifest says {toolkit}")
    return problems


def rocm_toolkit(*, toolkit: str, rocm_version: str, torch_hip: str | None) -> list[str]:
    """A ROCm ``toolkit`` image: /opt/rocm and torch's HIP must be that ROCm release."""
    problems: list[str] = []
    want = _version(toolkit)
    have = _version(rocm_version)
    if want is None:
        return [f"platforms.rocm.toolkit {toolkit!r} is not a ROCm version"]
    if have is None or have[: len(want)] != want:
        problems.append(f"/opt/rocm is ROCm {rocm_version or '(unknown)'}, the manifest {toolkit}")
    hip = _version(torch_hip or "")
    if hip is None or hip[:2] != want[:2]:
        problems.append(f"torch is built for HIP {torch_hip}, the manifest says ROCm {toolkit}")
    return problems


# -- devices and architectures --------------------------------------------------------------------


def _listed(value: str | None) -> int | None:
    if value is None:
        return None
    return len([d for d in value.split(",") if d.strip()])


def visible_devices(
    *, vendor: str, nodes: int, torch_count: int, env: Mapping[str, str | None]
) -> list[str]:
    """Does torch see the GPUs the container really got (its device nodes), as narrowed by the
    visibility variables? NVIDIA: ``/dev/nvidiaN`` nodes, then ``CUDA_VISIBLE_DEVICES``. AMD:
    GPU agents, then ``ROCR_VISIBLE_DEVICES`` (the runtime applies it first), then
    ``HIP_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES`` on top."""
    if nodes < 1:
        return [f"the container got no {vendor} GPU device nodes"]
    expected = nodes
    how = f"{nodes} device nodes"
    order = (
        ("CUDA_VISIBLE_DEVICES",)
        if vendor == "nvidia"
        else ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    )
    for key in order:
        n = _listed(env.get(key))
        if n is not None:
            expected = min(expected, n)
            how += f", {key}={env.get(key)!r}"
    if vendor == "amd":
        hip, cuda = env.get("HIP_VISIBLE_DEVICES"), env.get("CUDA_VISIBLE_DEVICES")
        if hip is not None and cuda is not None and hip != cuda:
            return [f"HIP_VISIBLE_DEVICES={hip!r} but CUDA_VISIBLE_DEVICES={cuda!r}"]
    if torch_count != expected:
        return [f"torch sees {torch_count} GPUs; the container got {expected} ({how})"]
    return []


def gpu_arch(*, vendor: str, archs: Sequence[str], found: Sequence[str]) -> list[str]:
    """Every GPU must be one the image is built for (``platforms.<p>.gpu_archs``)."""
    if not found:
        return ["no GPU architecture could be read"]
    declared = set(archs)
    names = [a.split(":", 1)[0] for a in found]  # "gfx942:sramecc+:xnack-" -> "gfx942"
    other = sorted({n for n in names if n not in declared})
    if other:
        what = "compute capability" if vendor == "nvidia" else "architecture"
        return [
            f"GPU {what} {', '.join(other)} is not one this image is built for "
            f"({', '.join(archs)}): use a build for it, or add it to gpu_archs and rebuild"
        ]
    return []
