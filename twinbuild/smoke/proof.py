"""The GPU proof (``twinbuild gpu-proof``, run by ``scripts/gpu-proof.sh``): every GPU check on a
bare GPU host, once healthy and once on the broken case it must fail on.

A check is proven when its healthy run passes and its broken run fails. The broken cases are
real where the host can give them (the pre-fix torch_memory_saver, a kernel compiled for another
architecture, a floor above the measured bandwidth, CUDA_VISIBLE_DEVICES naming no GPU, TF32
matmul, tags that do not separate, a region without CPU backup) and the host's own readings with
one value changed where it cannot (a torch built for a newer CUDA than the driver, a manifest
without this GPU's architecture, torch's architecture list without it). A check that cannot run
here (no GPU, a tool that did not build) is skipped with its reason; a proof that proves nothing
fails. It uses the standard library only: the GPU host has no twinbuild dependencies.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from twinbuild.errors import FindingsError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, BandwidthFloor, PinManifest
from twinbuild.smoke import gpu, gpu_arch, gpu_checks, gpu_probe
from twinbuild.smoke.gpu_probe import Probe, Ran, Shell, Verdict
from twinbuild.util import process
from twinbuild.util.atomic import write_atomic

Status = Literal["proven", "healthy only", "skipped", "FAILED"]
#: torch_memory_saver's pre-fix parent: the first parent of the pinned merge b5588e83 (PR #95),
#: whose free() releases a paused allocation's handle a second time.
PRE_FIX_TMS = "fdb09ad342f8d150e11afe719f798453cef742ad"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    check: str
    proves: str
    broken: str  # the broken case, in words


#: Every check of ``gpu_probe.CHECKS`` with what it shows and the case it must fail on.
CASES: tuple[Case, ...] = (
    Case(check="torch-backend", proves="torch's GPU backend sees the GPUs",
         broken="CUDA_VISIBLE_DEVICES= (no visible GPU)"),
    Case(check="matmul", proves="a float32 GPU matmul matches the CPU",
         broken="TF32 matmul (TB_MATMUL_TF32=1)"),
    Case(check="driver-toolkit", proves="the driver supports torch's CUDA (CUDA's rule)",
         broken="the host's reading with torch built for a CUDA minor newer than the driver's"),
    Case(check="visible-devices", proves="torch sees every GPU the host gives",
         broken="CUDA_VISIBLE_DEVICES=99 (a GPU that does not exist)"),
    Case(check="gpu-arch-declared", proves="the GPU is one gpu_archs declares",
         broken="a gpu_archs list without this GPU's architecture"),
    Case(check="torch-arch", proves="torch carries machine code for the GPU",
         broken="torch's arch list without every entry that runs on this GPU"),
    Case(check="kernel-arch", proves="built kernels carry machine code for the GPU",
         broken="a kernel compiled here for another architecture"),
    Case(check="memory-saver-free", proves="free while paused returns 0 and releases",
         broken=f"the pre-fix torch_memory_saver ({PRE_FIX_TMS[:8]}, before PR #95)"),
    Case(check="memory-saver-torch-mode", proves="torch-allocator hook mode pauses and resumes",
         broken="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the package refuses it)"),
    Case(check="memory-saver-tags", proves="pause(tag) leaves the other tag resident",
         broken="both regions under the paused tag (TB_TMS_KEEP_TAG=grad_buffer)"),
    Case(check="memory-saver-cpu-backup", proves="CPU backup restores the bytes bit-exactly",
         broken="a region without enable_cpu_backup (TB_TMS_CPU_BACKUP=0)"),
    Case(check="all-reduce", proves="all_reduce_perf runs on every GPU, every result right",
         broken="all_reduce_perf -c 0 (results unchecked)"),
    Case(check="all-reduce-bandwidth", proves="bus bandwidth at 256 MiB reaches the floor",
         broken="a floor 1.5x above the measured bandwidth"),
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    case: Case
    healthy: Verdict
    broken: Verdict

    @property
    def status(self) -> Status:
        if self.healthy.outcome == "skipped":
            return "skipped"
        if self.healthy.outcome == "failed" or self.broken.outcome == "passed":
            return "FAILED"
        if self.broken.outcome == "skipped":
            return "healthy only"
        return "proven"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProofOptions:
    """What ``twinbuild gpu-proof`` was asked for (the script passes what it built)."""

    manifest: Path = DEFAULT_PATH
    variant: str = "cu13"  # whose vendor, toolkit, GPU targets and floors the proof holds to
    python: str = "python3"  # the interpreter holding torch
    tms: Path | None = None  # a folder holding the pinned torch_memory_saver (PYTHONPATH)
    tms_broken: Path | None = None  # the same for its pre-fix parent
    perf: Path | None = None  # all_reduce_perf built from the pinned nccl-tests
    kernel_ok: Path | None = None  # a kernel compiled for this GPU
    kernel_wrong: Path | None = None  # a kernel compiled for another architecture
    library_path: str = ""  # LD_LIBRARY_PATH the built tools need (libcudart, libnccl)
    report: Path = Path("build/gpu-proof/report.json")
    dry_run: bool = False
    timeout_s: int = gpu_checks.SCRIPT_TIMEOUT_S


@dataclass(frozen=True, slots=True, kw_only=True)
class Proof:
    rows: list[Row]
    host: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("proven", "healthy only", "skipped", "FAILED"), 0)
        for row in self.rows:
            out[row.status] += 1
        return out


def local_shell(timeout_s: int) -> Shell:
    """This machine as a :data:`gpu_probe.Shell`; ``timeout`` inside bounds each command, this
    bounds the wait for it."""

    def run(argv: Sequence[str]) -> Ran:
        try:
            proc = process.run(argv, timeout=timeout_s + 60)
        except process.CommandTimedOut as exc:
            return Ran(rc=124, stdout=exc.out, stderr="killed: no answer after its timeout")
        except process.CommandMissing as exc:
            return Ran(rc=127, stdout="", stderr=str(exc))
        return Ran(rc=proc.code, stdout=proc.out, stderr=proc.err)

    return run


def _python_path(first: Path) -> str:
    """``first`` ahead of the PYTHONPATH this process has (the host's own, kept)."""
    return os.pathsep.join(filter(None, [str(first), os.environ.get("PYTHONPATH")]))


def _skip_all(reason: str) -> list[Row]:
    return [Row(case=c, healthy=gpu_probe.skipped(c.check, reason),
                broken=gpu_probe.skipped(c.check, reason)) for c in CASES]  # fmt: skip


def _without(check: str, reason: str) -> Verdict:
    return gpu_probe.skipped(check, reason)


def _wrong_archs(vendor: str, found: Sequence[str]) -> list[str]:
    """A gpu_archs list that holds none of these GPUs."""
    targets = {gpu_arch.device_target(vendor, f) for f in found}
    pool = ["8.0", "7.5"] if vendor == "nvidia" else ["gfx90a", "gfx908"]
    return [a for a in pool if a not in targets][:1]


def _newer_cuda(reading: dict[str, Any], toolkit: str) -> dict[str, Any]:
    """The reading with torch built for one CUDA minor past what the driver supports (where the
    driver's CUDA could not be read: for the next CUDA major, which the manifest refuses)."""
    supported = gpu_checks.cuda_version(reading.get("driver_cuda"))
    if supported is None:
        major = int(toolkit.partition(".")[0])
        return {**reading, "torch_cuda": f"{major + 1}.0"}
    major, minor = (int(x) for x in supported.split(".")[:2])
    return {**reading, "torch_cuda": f"{major}.{minor + 1}"}


def run_proof(
    options: ProofOptions,
    *,
    shell: Shell | None = None,
    detect: Callable[[str], gpu.GpuInfo | None] | None = None,
) -> Proof:
    """Run every case healthy and broken (or, with ``dry_run``, none: every row says what it
    would run)."""
    started = time.monotonic()
    manifest = load(options.manifest)
    if options.dry_run:
        return Proof(rows=_skip_all("dry run: nothing was run"))
    vendor = manifest.variant(options.variant).vendor
    info = (detect or gpu.detect)(vendor)
    host: dict[str, Any] = {"gpu": info.to_json() if info is not None else None}
    reason = gpu.skip_reason(vendor, info, wanted=None)
    if reason is not None:
        return Proof(rows=_skip_all(reason), host=host, seconds=time.monotonic() - started)
    assert info is not None  # noqa: S101 -- skip_reason said so
    rows = _rows(options, manifest, info, shell or local_shell(options.timeout_s), host)
    return Proof(rows=rows, host=host, seconds=time.monotonic() - started)


def _rows(
    options: ProofOptions, manifest: PinManifest, info: gpu.GpuInfo, shell: Shell,
    host: dict[str, Any],
) -> list[Row]:  # fmt: skip
    spec = manifest.variant(options.variant)
    env = {"LD_LIBRARY_PATH": options.library_path} if options.library_path else {}
    if options.tms is not None:
        env["PYTHONPATH"] = _python_path(options.tms)
    probe = Probe(
        vendor=spec.vendor, variant=options.variant,
        python=options.python, toolkit=spec.toolkit, archs=spec.gpu_archs,
        perf=str(options.perf) if options.perf is not None else None,
        floors=spec.all_reduce_floors, host_driver=info.driver, env=env,
        timeout_s=options.timeout_s,
    )  # fmt: skip
    got: dict[str, tuple[Verdict, Verdict]] = {}
    got["torch-backend"] = (
        gpu_probe.torch_backend(shell, probe),
        gpu_probe.torch_backend(shell, probe, env={"CUDA_VISIBLE_DEVICES": ""}),
    )
    got["matmul"] = (gpu_probe.matmul(shell, probe),
                     gpu_probe.matmul(shell, probe, env={"TB_MATMUL_TF32": "1"}))  # fmt: skip
    reading = gpu_probe.read_devices(shell, probe)
    device_checks = ("driver-toolkit", "visible-devices", "gpu-arch-declared", "torch-arch",
                     "kernel-arch", "all-reduce", "all-reduce-bandwidth")  # fmt: skip
    if isinstance(reading, Verdict):
        for check in device_checks:
            failed = replace(reading, check=check)
            got[check] = (failed, failed)
    else:
        host["devices"] = reading
        _device_rows(got, shell, probe, reading, options)
    for check in gpu_probe.SAVER_CHECKS:
        got[check] = _saver_row(shell, probe, check, options)
    return [Row(case=c, healthy=got[c.check][0], broken=got[c.check][1]) for c in CASES]


def _device_rows(
    got: dict[str, tuple[Verdict, Verdict]], shell: Shell, probe: Probe,
    reading: dict[str, Any], options: ProofOptions,
) -> None:  # fmt: skip
    found = [str(a) for a in reading.get("archs") or []]
    newer = _newer_cuda(reading, probe.toolkit)
    got["driver-toolkit"] = (gpu_probe.driver(reading, probe), gpu_probe.driver(newer, probe))
    hidden = gpu_probe.read_devices(shell, probe, env={"CUDA_VISIBLE_DEVICES": "99"})
    got["visible-devices"] = (
        gpu_probe.visible(reading, probe),
        hidden if isinstance(hidden, Verdict) else gpu_probe.visible(hidden, probe),
    )
    got["gpu-arch-declared"] = (
        gpu_probe.declared_arch(reading, probe),
        gpu_probe.declared_arch(reading, probe, archs=_wrong_archs(probe.vendor, found)),
    )
    listed = [str(a) for a in reading.get("arch_list") or []]
    targets = [gpu_arch.device_target(probe.vendor, f) for f in found]
    runs = [e for e in listed if any(gpu_arch.runs_on(probe.vendor, e, t) for t in targets)]
    stripped = [e for e in listed if e not in runs]
    got["torch-arch"] = (gpu_probe.torch_arch(reading, probe),
                         gpu_probe.torch_arch(reading, probe, arch_list=stripped))  # fmt: skip
    ok = [str(p) for p in (options.perf, options.kernel_ok) if p is not None]
    got["kernel-arch"] = (
        gpu_probe.kernel_arch(shell, probe, reading, files=ok, modules=[])
        if ok else _without("kernel-arch", "no kernel built here (nvcc or nccl-tests missing)"),
        gpu_probe.kernel_arch(shell, probe, reading, files=[str(options.kernel_wrong)], modules=[])
        if options.kernel_wrong is not None
        else _without("kernel-arch", "no kernel for another architecture was built (no nvcc)"),
    )  # fmt: skip
    gpus = int(reading.get("count") or 0)
    names = reading.get("names") or []
    model = str(names[0]) if names else ""
    results, bandwidth = gpu_probe.all_reduce(shell, probe, gpus=gpus, model=model)
    unchecked, _ = gpu_probe.all_reduce(shell, probe, gpus=gpus, model=model, check=False)
    measured = bandwidth.readings.get("largest") or results.readings.get("largest") or (0, 0.0)
    high = BandwidthFloor(gpu=model, gpus=gpus, busbw_gbs=max(float(measured[1]), 1.0) * 1.5,
                          source="the proof: 1.5x the measured busbw")  # fmt: skip
    _, above = (
        gpu_probe.all_reduce(shell, probe, gpus=gpus, model=model, floor=high)
        if results.outcome != "skipped" else (results, results)
    )  # fmt: skip
    got["all-reduce"] = (results, unchecked)
    got["all-reduce-bandwidth"] = (bandwidth, above)


def _saver_row(
    shell: Shell, probe: Probe, check: str, options: ProofOptions
) -> tuple[Verdict, Verdict]:
    if options.tms is None:
        why = "no torch_memory_saver built (--tms): the pinned source did not build"
        return _without(check, why), _without(check, why)
    healthy = gpu_probe.memory_saver(shell, probe, check)
    broken_env: dict[str, str] = {
        "memory-saver-torch-mode": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
        "memory-saver-tags": {"TB_TMS_KEEP_TAG": "grad_buffer"},
        "memory-saver-cpu-backup": {"TB_TMS_CPU_BACKUP": "0"},
    }.get(check, {})
    if check == "memory-saver-free":
        if options.tms_broken is None:
            return healthy, _without(check, "the pre-fix torch_memory_saver did not build")
        broken_env = {"PYTHONPATH": _python_path(options.tms_broken)}
    return healthy, gpu_probe.memory_saver(shell, probe, check, env=broken_env)


# -- the table and the report ---------------------------------------------------------------------


def _short(verdict: Verdict, width: int = 60) -> str:
    text = verdict.outcome if not verdict.reasons else f"{verdict.outcome}: {verdict.message}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def table(proof: Proof, *, dry_run: bool = False) -> str:
    """One table: each check, its healthy run, its broken case and that run, its status."""
    if dry_run:
        lines = ["| check | proves | broken case it must fail on |", "| --- | --- | --- |"]
        lines += [f"| {c.check} | {c.proves} | {c.broken} |" for c in CASES]
        return "\n".join(lines) + "\n"
    lines = [
        "| check | healthy | broken case | broken | status |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in proof.rows:
        lines.append(
            f"| {row.case.check} | {_short(row.healthy)} | {row.case.broken} | "
            f"{_short(row.broken)} | {row.status} |"
        )
    c = proof.counts()
    lines.append("")
    lines.append(
        f"gpu-proof: {c['proven']} proven, {c['healthy only']} healthy only, {c['skipped']} "
        f"skipped, {c['FAILED']} failed in {proof.seconds:.0f}s"
    )
    return "\n".join(lines) + "\n"


def report(proof: Proof, options: ProofOptions) -> dict[str, Any]:
    def verdict(v: Verdict) -> dict[str, Any]:
        return {"outcome": v.outcome, "reasons": list(v.reasons), "hung": v.hung,
                "readings": v.readings}  # fmt: skip

    return {
        "schema": 2,
        "variant": options.variant,
        "dry_run": options.dry_run,
        "host": proof.host,
        "seconds": round(proof.seconds, 1),
        "counts": proof.counts(),
        "checks": [
            {
                **asdict(row.case),
                "status": row.status,
                "healthy": verdict(row.healthy),
                "broken_run": verdict(row.broken),
            }
            for row in proof.rows
        ],
    }


def prove(
    options: ProofOptions,
    *,
    echo: Callable[[str], None] = print,
    detect: Callable[[str], gpu.GpuInfo | None] | None = None,
) -> Proof:
    """``twinbuild gpu-proof``: run, print the table, write the JSON report; raise
    FindingsError when a check does not hold or nothing was proven."""
    proof = run_proof(options, detect=detect)
    echo(table(proof, dry_run=options.dry_run).rstrip("\n"))
    if options.dry_run:
        return proof
    write_atomic(options.report, json.dumps(report(proof, options), indent=1, default=str) + "\n")
    echo(f"gpu-proof: report in {options.report}")
    failed = [r for r in proof.rows if r.status == "FAILED"]
    if failed:
        first = failed[0]
        which = first.healthy if first.healthy.outcome == "failed" else first.broken
        raise FindingsError(
            f"gpu-proof: {len(failed)} checks do not hold; first: {first.case.check}: "
            f"{'healthy run failed' if which is first.healthy else 'broken case passed'}: "
            f"{which.message or which.outcome}"
        )
    if not proof.counts()["proven"]:
        first_skip = proof.rows[0].healthy.message if proof.rows else "no checks"
        raise FindingsError(f"gpu-proof: nothing proven: every check skipped ({first_skip})")
    return proof
