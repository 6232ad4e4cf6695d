"""The GPU proof (``twinbuild gpu-proof``, run by ``scripts/gpu-proof.sh``): every GPU check on a
bare GPU host, once healthy and once on the broken case it must fail on, inside one time budget.

A check is proven when its healthy run passes and its broken run fails. The broken cases are
real where the host can give them (the pre-fix torch_memory_saver, a kernel compiled for another
architecture, a floor above the measured bandwidth, CUDA_VISIBLE_DEVICES naming no GPU, TF32
matmul, tags that do not separate, a region without CPU backup) and the host's own readings with
one value changed where it cannot (a driver of the previous CUDA major without the compat
package, a manifest without this GPU's architecture, torch's architecture list without it).

The budget is spent in priority order (host facts, the memory-saver checks, the architecture
and driver checks, then all-reduce where two or more GPUs can run it), each step within its own
limit, and the output folder is written after every step (``gpu_report``): a run stopped at any
point keeps what it proved. A check that cannot run here is skipped with its reason; a check the
budget did not reach is "not run"; a proof that proves nothing, or leaves checks not run, fails.
The rehearsal runs the same flow on a CPU host with a fake GPU layer (``gpu_rehearse``). It
uses the standard library only: the GPU host has no twinbuild dependencies.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from twinbuild.errors import ConfigError, FindingsError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, BandwidthFloor, PinManifest
from twinbuild.smoke import gpu, gpu_arch, gpu_checks, gpu_collective, gpu_probe
from twinbuild.smoke.gpu_budget import DEFAULT_BUDGET_S, Budget, Limit
from twinbuild.smoke.gpu_build import PRE_FIX_TMS, Builder, Built, default_work, pinned_commit
from twinbuild.smoke.gpu_cuda import Toolkit
from twinbuild.smoke.gpu_host import Machine
from twinbuild.smoke.gpu_probe import Probe, Shell, Verdict
from twinbuild.smoke.gpu_report import OutFolder

Status = Literal["proven", "healthy only", "skipped", "not run", "FAILED"]
STATUSES: tuple[Status, ...] = ("proven", "healthy only", "skipped", "not run", "FAILED")
Group = Literal["host", "memory-saver", "device", "all-reduce"]

#: Each build's limit and floor (seconds). torch_memory_saver: 12-16 s on 2 cores; the kernels:
#: two nvcc runs of one line; all_reduce_perf for one architecture (docs/smoke.md has the figures).
BUILD_LIMITS: dict[str, Limit] = {
    "tms": Limit(limit_s=150, floor_s=30),
    "tms-prefix": Limit(limit_s=150, floor_s=30),
    "kernels": Limit(limit_s=60, floor_s=10),
    "all_reduce_perf": Limit(limit_s=240, floor_s=60),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    check: str
    group: Group
    proves: str
    broken: str  # the broken case, in words
    limit: Limit  # the row's limit: its healthy and broken runs together
    #: Where the broken case can only end in the package's own abort, the row says so.
    abort_only: str = ""


def _l(limit_s: float, floor_s: float) -> Limit:
    return Limit(limit_s=limit_s, floor_s=floor_s)


#: Every check of ``gpu_probe.CHECKS`` in the order the budget is spent on them.
CASES: tuple[Case, ...] = (
    Case(check="torch-backend", group="host", proves="torch's GPU backend sees the GPUs",
         broken="CUDA_VISIBLE_DEVICES= (no visible GPU)", limit=_l(60, 15)),
    Case(check="memory-saver-free", group="memory-saver",
         proves="free while paused returns 0 and releases",
         broken=f"the pre-fix torch_memory_saver ({PRE_FIX_TMS[:8]}, before PR #95)",
         limit=_l(120, 30),
         abort_only="the pre-fix package ends the process inside cudaFree (its CURESULT_CHECK on "
         "the second cuMemRelease): the broken run fails on that exit, as upstream judges "
         "preload mode"),
    Case(check="memory-saver-torch-mode", group="memory-saver",
         proves="torch-allocator hook mode pauses and resumes",
         broken="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the package refuses it)",
         limit=_l(90, 20),
         abort_only="the package refuses the configuration before any reading (its "
         "_sanity_checks raise RuntimeError): the broken run fails on that refusal"),
    Case(check="memory-saver-tags", group="memory-saver",
         proves="pause(tag) leaves the other tag resident",
         broken="both regions under the paused tag (TB_TMS_KEEP_TAG=grad_buffer)",
         limit=_l(120, 30)),
    Case(check="memory-saver-cpu-backup", group="memory-saver",
         proves="CPU backup restores the bytes bit-exactly",
         broken="a region without enable_cpu_backup (TB_TMS_CPU_BACKUP=0)", limit=_l(120, 30)),
    Case(check="matmul", group="device", proves="a float32 GPU matmul matches the CPU",
         broken="TF32 matmul (TB_MATMUL_TF32=1)", limit=_l(60, 15)),
    Case(check="driver-toolkit", group="device",
         proves="the driver runs torch's CUDA (NVIDIA's compatibility rule)",
         broken="the host's reading on a driver of the previous CUDA major, no compat package",
         limit=_l(60, 15)),
    Case(check="visible-devices", group="device", proves="torch sees every GPU the host gives",
         broken="CUDA_VISIBLE_DEVICES=99 (a GPU that does not exist)", limit=_l(60, 15)),
    Case(check="gpu-arch-declared", group="device", proves="the GPU is one gpu_archs declares",
         broken="a gpu_archs list without this GPU's architecture", limit=_l(10, 0)),
    Case(check="torch-arch", group="device", proves="torch carries machine code for the GPU",
         broken="torch's arch list without every entry that runs on this GPU", limit=_l(10, 0)),
    Case(check="kernel-arch", group="device", proves="built kernels carry machine code for the GPU",
         broken="a kernel compiled here for another architecture", limit=_l(60, 10)),
    Case(check="all-reduce", group="all-reduce",
         proves="all_reduce_perf runs on every GPU, every result right",
         broken="all_reduce_perf -c 0 (results unchecked)", limit=_l(240, 40)),
    Case(check="all-reduce-bandwidth", group="all-reduce",
         proves="bus bandwidth at 256 MiB reaches the floor",
         broken="a floor 1.5x above the measured bandwidth", limit=_l(10, 0)),
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    case: Case
    healthy: Verdict
    broken: Verdict
    not_run: bool = False  # the budget did not reach it
    spent_s: float = 0.0

    @property
    def status(self) -> Status:
        if self.not_run:
            return "not run"
        if self.healthy.outcome == "skipped":
            return "skipped"
        if self.healthy.outcome == "failed" or self.broken.outcome == "passed":
            return "FAILED"
        if self.broken.outcome == "skipped":
            return "healthy only"
        return "proven"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProofOptions:
    """What ``twinbuild gpu-proof`` was asked for."""

    manifest: Path = DEFAULT_PATH
    variant: str = "cu13"  # whose vendor, toolkit, GPU targets and floors the proof holds to
    python: str = "python3"  # the interpreter holding torch
    sources: Path | None = None  # the carried sources (scripts/gpu-proof.sh SOURCES)
    out: Path = Path("build/gpu-proof")  # report.jsonl, table.md, logs.tar.gz: nothing else
    work: Path | None = None  # builds and logs (default: the cache's gpu-proof folder)
    budget_s: int = DEFAULT_BUDGET_S
    dry_run: bool = False
    rehearse: bool = False  # the whole flow on a CPU host, with a fake GPU layer


@dataclass(frozen=True, slots=True, kw_only=True)
class Proof:
    rows: list[Row]
    host: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    budget_s: float = 0.0

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for row in self.rows:
            out[row.status] += 1
        return out


def _python_path(first: Path, env: dict[str, str]) -> str:
    return ":".join(filter(None, [str(first), env.get("PYTHONPATH")]))


def _wrong_archs(vendor: str, found: list[str]) -> list[str]:
    """A gpu_archs list that holds none of these GPUs."""
    targets = {gpu_arch.device_target(vendor, f) for f in found}
    pool = ["8.0", "7.5"] if vendor == "nvidia" else ["gfx90a", "gfx908"]
    return [a for a in pool if a not in targets][:1]


def _older_driver(reading: dict[str, Any], toolkit: str) -> dict[str, Any]:
    """The reading on a driver of the previous CUDA major (575, CUDA 12.9), its own libcuda."""
    built = gpu_checks.cuda_version(reading.get("driver_cuda")) or toolkit
    major = int(str(reading.get("torch_cuda") or built).partition(".")[0])
    return {**reading, "driver": "575.57.08", "driver_cuda": (major - 1) * 1000 + 90,
            "libcuda": "/usr/lib/x86_64-linux-gnu/libcuda.so.575.57.08"}  # fmt: skip


def _sm(arch: str) -> str:
    return arch.replace(".", "")


def _other_arch(arch: str) -> str:
    return "75" if _sm(arch).startswith("8") else "80"


class _Run:
    """One proof: the budget spent step by step, the output folder written after each."""

    def __init__(self, options: ProofOptions, manifest: PinManifest, machine: Machine,
                 out: OutFolder, work: Path) -> None:  # fmt: skip
        self.options = options
        self.manifest = manifest
        self.spec = manifest.variant(options.variant)
        self.machine = machine
        self.out = out
        self.work = work
        self.logs = work / "logs"
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True)
        self.budget = Budget(options.budget_s, machine.clock)
        self.rows: list[Row] = []
        self.built: dict[str, Built] = {}
        self.host: dict[str, Any] = {}
        self.reading: dict[str, Any] | Verdict | None = None
        spec = self.spec
        self.probe = Probe(vendor=spec.vendor, variant=options.variant, python=machine.python,
                           toolkit=spec.toolkit, archs=spec.gpu_archs,
                           floors=spec.all_reduce_floors)  # fmt: skip

    # -- writing --------------------------------------------------------------------------------

    def _flush(self) -> None:
        self.out.table(table(self.proof(), final=False))
        self.out.bundle(self.logs)

    def proof(self) -> Proof:
        return Proof(rows=list(self.rows), host=self.host, seconds=self.budget.spent(),
                     budget_s=self.options.budget_s)  # fmt: skip

    def add(self, row: Row) -> None:
        self.rows.append(row)
        self.out.append({"kind": "check", **row_json(row)})
        self._flush()

    # -- steps ----------------------------------------------------------------------------------

    def step(self, case: Case, run: Callable[[Probe, Shell], tuple[Verdict, Verdict]]) -> None:
        granted = self.budget.grant(case.limit)
        if granted is None:
            why = self.budget.refusal(case.limit)
            self.add(Row(case=case, healthy=gpu_probe.skipped(case.check, why),
                         broken=gpu_probe.skipped(case.check, why), not_run=True))  # fmt: skip
            return
        started = self.budget.spent()
        deadline = self.machine.clock.now() + granted
        shell = self.machine.runner(deadline, self.logs / "checks" / f"{case.check}.log")
        probe = replace(self.probe, timeout_s=max(1, int(granted)),
                        collective_timeout_s=max(1, int(granted) // 3))  # fmt: skip
        healthy, broken = run(probe, shell)
        self.add(Row(case=case, healthy=healthy, broken=broken,
                     spent_s=round(self.budget.spent() - started, 1)))  # fmt: skip

    def skip(
        self, case: Case, reason: str, *, readings: dict[str, Any] | None = None,
        not_run: bool = False,
    ) -> None:  # fmt: skip
        """A row that does not run: skipped with its reason, or ``not_run`` where the budget
        kept from it what it needs (a build, the device reading)."""
        verdict = gpu_probe.skipped(case.check, reason, readings)
        self.add(Row(case=case, healthy=verdict, broken=verdict, not_run=not_run))

    def build(self, name: str, make: Callable[[float], Built]) -> Built:
        limit = BUILD_LIMITS[name]
        granted = self.budget.grant(limit)
        if granted is None:
            built = Built(name=name, path=None, seconds=0.0, reason=self.budget.refusal(limit),
                          cut=True)  # fmt: skip
        else:
            built = make(granted)
        self.built[name] = built
        self.out.append({"kind": "build", **asdict(built), "path": str(built.path or "")})
        self._flush()
        return built


def _case(check: str) -> Case:
    return next(c for c in CASES if c.check == check)


def run_proof(options: ProofOptions, machine: Machine, *, say: Callable[[str], None]) -> Proof:
    """Every case in priority order within the budget, the output folder written as it goes."""
    manifest = load(options.manifest)
    spec = manifest.variant(options.variant)
    out = OutFolder(options.out)
    work = options.work or default_work(options.rehearse)
    run = _Run(options, manifest, machine, out, work)
    info = machine.detect(spec.vendor)
    toolkit = machine.toolkit()
    cuda_line = toolkit if isinstance(toolkit, str) else toolkit.line()
    say(f"gpu-proof: {machine.what}; {cuda_line}; budget {options.budget_s}s")
    run.host = {"machine": machine.what, "gpu": info.to_json() if info is not None else None,
                "cuda": cuda_line, "python": machine.python, "variant": options.variant,
                "budget_s": options.budget_s,
                "sources": str(options.sources) if options.sources else None}  # fmt: skip
    reason = gpu.skip_reason(spec.vendor, info, wanted=None)
    if reason is None and info is not None:
        library = machine.library_path(machine.python, toolkit)
        run.host["library_path"] = library
        run.probe = replace(run.probe, host_driver=info.driver,
                            env={"LD_LIBRARY_PATH": library} if library else {})  # fmt: skip
    out.append({"kind": "host", **run.host})
    if reason is not None or info is None:
        for case in CASES:
            run.skip(case, reason or "no GPU")
    else:
        _checks(run, info, toolkit, say)
    proof = run.proof()
    out.append({"kind": "end", "counts": proof.counts(), "spent_s": round(proof.seconds, 1),
                "budget_s": options.budget_s})  # fmt: skip
    out.table(table(proof, final=True))
    out.bundle(run.logs)
    return proof


def _checks(
    run: _Run, info: gpu.GpuInfo, toolkit: Toolkit | str, say: Callable[[str], None]
) -> None:
    options, machine = run.options, run.machine
    arch = info.archs[0] if info.archs else ""
    # 1. host facts: torch's backend (which also says torch's CUDA, for the builds).
    backend: dict[str, Any] = {}

    def torch_backend(probe: Probe, shell: Shell) -> tuple[Verdict, Verdict]:
        healthy = gpu_probe.torch_backend(shell, probe)
        backend.update(healthy.readings)
        return healthy, gpu_probe.torch_backend(shell, probe, env={"CUDA_VISIBLE_DEVICES": ""})

    run.step(_case("torch-backend"), torch_backend)
    major = str(backend.get("cuda") or run.spec.toolkit).partition(".")[0]
    sources = options.sources or Path("/nonexistent-sources")
    builder = machine.builder(machine.python, sources, run.work, run.logs, toolkit, major)
    # 2. the memory-saver checks, on the pinned package and its pre-fix parent.
    tms_commit = pinned_commit(run.manifest, options.variant, "torch-memory-saver")
    tms = run.build("tms", lambda s: builder.tms("tms", "torch_memory_saver", tms_commit, s))
    say(tms.line())
    prefix = run.build("tms-prefix", lambda s: builder.tms(
        "tms-prefix", "torch_memory_saver-prefix", PRE_FIX_TMS, s))  # fmt: skip
    say(prefix.line())
    for check in gpu_probe.SAVER_CHECKS:
        if tms.path is None:
            run.skip(_case(check), f"no torch_memory_saver: {tms.reason}", not_run=tms.cut)
            continue
        run.step(_case(check), _saver(check, tms.path, prefix))
    # 3. the architecture and driver checks.
    run.step(_case("matmul"), lambda probe, shell: (
        gpu_probe.matmul(shell, probe),
        gpu_probe.matmul(shell, probe, env={"TB_MATMUL_TF32": "1"})))  # fmt: skip
    _device_steps(run)
    kernels = None
    if arch:
        kernels = run.build("kernels", lambda s: builder.kernels(_sm(arch), _other_arch(arch), s))
        say(kernels.line())
    _kernel_step(run, kernels)
    # 4. all-reduce, where two or more GPUs move data between them.
    _all_reduce_steps(run, info, arch, builder, say)


def _saver(
    check: str, tms: Path, prefix: Built
) -> Callable[[Probe, Shell], tuple[Verdict, Verdict]]:
    def run(probe: Probe, shell: Shell) -> tuple[Verdict, Verdict]:
        env = dict(probe.env)
        probe = replace(probe, env={**env, "PYTHONPATH": _python_path(tms, env)})
        healthy = gpu_probe.memory_saver(shell, probe, check)
        broken_env: dict[str, str] = {
            "memory-saver-torch-mode": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
            "memory-saver-tags": {"TB_TMS_KEEP_TAG": "grad_buffer"},
            "memory-saver-cpu-backup": {"TB_TMS_CPU_BACKUP": "0"},
        }.get(check, {})
        if check == "memory-saver-free":
            if prefix.path is None:
                return healthy, gpu_probe.skipped(check, f"no pre-fix package: {prefix.reason}")
            broken_env = {"PYTHONPATH": _python_path(prefix.path, env)}
        return healthy, gpu_probe.memory_saver(shell, probe, check, env=broken_env)

    return run


def _device_steps(run: _Run) -> None:
    def driver(probe: Probe, shell: Shell) -> tuple[Verdict, Verdict]:
        run.reading = gpu_probe.read_devices(shell, probe)
        if isinstance(run.reading, Verdict):
            failed = replace(run.reading, check="driver-toolkit")
            return failed, failed
        run.host["devices"] = run.reading
        older = _older_driver(run.reading, probe.toolkit)
        return gpu_probe.driver(run.reading, probe), gpu_probe.driver(older, probe)

    run.step(_case("driver-toolkit"), driver)

    def needs_reading(
        check: str, judge: Callable[[dict[str, Any], Probe, Shell], tuple[Verdict, Verdict]]
    ) -> None:
        if run.reading is None:
            run.skip(_case(check), "not run: the device reading was not taken (budget)",
                     not_run=True)  # fmt: skip
            return
        reading = run.reading
        if isinstance(reading, Verdict):
            failed = replace(reading, check=check)
            run.step(_case(check), lambda _p, _s: (failed, failed))
            return
        run.step(_case(check), lambda probe, shell: judge(reading, probe, shell))

    def visible(reading: dict[str, Any], probe: Probe, shell: Shell) -> tuple[Verdict, Verdict]:
        hidden = gpu_probe.read_devices(shell, probe, env={"CUDA_VISIBLE_DEVICES": "99"})
        return gpu_probe.visible(reading, probe), (
            hidden if isinstance(hidden, Verdict) else gpu_probe.visible(hidden, probe)
        )

    def declared(reading: dict[str, Any], probe: Probe, _s: Shell) -> tuple[Verdict, Verdict]:
        found = [str(a) for a in reading.get("archs") or []]
        return (
            gpu_probe.declared_arch(reading, probe),
            gpu_probe.declared_arch(reading, probe, archs=_wrong_archs(probe.vendor, found)),
        )

    def torch_arch(reading: dict[str, Any], probe: Probe, _s: Shell) -> tuple[Verdict, Verdict]:
        found = [str(a) for a in reading.get("archs") or []]
        listed = [str(a) for a in reading.get("arch_list") or []]
        targets = [gpu_arch.device_target(probe.vendor, f) for f in found]
        runs = [e for e in listed if any(gpu_arch.runs_on(probe.vendor, e, t) for t in targets)]
        return (
            gpu_probe.torch_arch(reading, probe),
            gpu_probe.torch_arch(reading, probe, arch_list=[e for e in listed if e not in runs]),
        )

    needs_reading("visible-devices", visible)
    needs_reading("gpu-arch-declared", declared)
    needs_reading("torch-arch", torch_arch)


def _kernel_step(run: _Run, kernels: Built | None) -> None:
    case = _case("kernel-arch")
    reading = run.reading
    if kernels is None:
        run.skip(case, "nvidia-smi gave no compute capability: no kernel was built for this GPU")
        return
    if kernels.path is None:
        run.skip(case, f"no kernels built: {kernels.reason}", not_run=kernels.cut)
        return
    if not isinstance(reading, dict):
        why = "the device reading failed" if reading is not None else "no device reading (budget)"
        run.skip(case, f"{why}: the kernels cannot be judged against this GPU",
                 not_run=reading is None)  # fmt: skip
        return
    folder = kernels.path
    tools = kernels.tools

    def judge(probe: Probe, shell: Shell) -> tuple[Verdict, Verdict]:
        if tools is not None:  # the toolkit's cuobjdump, wherever the toolkit was found
            path = f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}"
            probe = replace(probe, env={**probe.env, "PATH": path})
        return (
            gpu_probe.kernel_arch(shell, probe, reading, files=[str(folder / "kernel-ok.so")],
                                  modules=[]),
            gpu_probe.kernel_arch(shell, probe, reading, files=[str(folder / "kernel-wrong.so")],
                                  modules=[]),
        )  # fmt: skip

    run.step(case, judge)


def _all_reduce_steps(
    run: _Run, info: gpu.GpuInfo, arch: str, builder: Builder, say: Callable[[str], None]
) -> None:
    results_case, bandwidth_case = _case("all-reduce"), _case("all-reduce-bandwidth")
    reading = run.reading if isinstance(run.reading, dict) else {}
    gpus = int(reading.get("count") or info.count)
    one = gpu_collective.skip_reason(gpus)
    if one is not None:
        run.skip(results_case, one, readings={"gpus": gpus})
        run.skip(bandwidth_case, one, readings={"gpus": gpus})
        return
    commit = pinned_commit(run.manifest, run.options.variant, "collective-tests")
    perf = run.build("all_reduce_perf", lambda s: builder.perf(_sm(arch), commit, s))
    say(perf.line())
    if perf.path is None:
        run.skip(results_case, f"no all_reduce_perf: {perf.reason}", not_run=perf.cut)
        run.skip(bandwidth_case, f"no all_reduce_perf: {perf.reason}", not_run=perf.cut)
        return
    names = reading.get("names") or [info.model]
    model = str(names[0])
    pair: dict[str, tuple[Verdict, Verdict]] = {}

    def results(probe: Probe, shell: Shell) -> tuple[Verdict, Verdict]:
        probe = replace(probe, perf=str(perf.path))
        checked, bandwidth = gpu_probe.all_reduce(shell, probe, gpus=gpus, model=model)
        unchecked, _ = gpu_probe.all_reduce(shell, probe, gpus=gpus, model=model, check=False)
        measured = bandwidth.readings.get("largest") or checked.readings.get("largest") or (0, 0)
        high = BandwidthFloor(gpu=model, gpus=gpus, busbw_gbs=max(float(measured[1]), 1.0) * 1.5,
                              source="the proof: 1.5x the measured busbw")  # fmt: skip
        _, above = gpu_probe.all_reduce(shell, probe, gpus=gpus, model=model, floor=high)
        pair["bandwidth"] = (bandwidth, above)
        return checked, unchecked

    run.step(results_case, results)
    if "bandwidth" in pair:
        run.step(bandwidth_case, lambda _p, _s: pair["bandwidth"])
    else:
        run.skip(bandwidth_case, "not run: the all-reduce run did not happen (budget)",
                 not_run=True)  # fmt: skip


# -- the table and the report ---------------------------------------------------------------------


def _short(verdict: Verdict, width: int = 60) -> str:
    text = verdict.outcome if not verdict.reasons else f"{verdict.outcome}: {verdict.message}"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _dry_table() -> str:
    lines = ["| check | proves | broken case it must fail on |", "| --- | --- | --- |"]
    lines += [f"| {c.check} | {c.proves} | {c.broken} |" for c in CASES]
    return "\n".join(lines) + "\n"


def table(proof: Proof, *, final: bool = True) -> str:
    """One table: each check so far, its healthy run, its broken case and that run, its status;
    a last line of counts (``final=False``: how many are still to come)."""
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
    left = "" if final else f", {len(CASES) - len(proof.rows)} to come"
    lines.append(
        f"gpu-proof: {c['proven']} proven, {c['healthy only']} healthy only, {c['skipped']} "
        f"skipped, {c['not run']} not run, {c['FAILED']} failed{left} in {proof.seconds:.0f}s "
        f"of a {proof.budget_s:.0f}s budget"
    )
    return "\n".join(lines) + "\n"


def _verdict_json(v: Verdict) -> dict[str, Any]:
    return {"outcome": v.outcome, "reasons": list(v.reasons), "notes": list(v.notes),
            "hung": v.hung, "readings": dict(v.readings)}  # fmt: skip


def row_json(row: Row) -> dict[str, Any]:
    case = {k: v for k, v in asdict(row.case).items() if k != "limit"}
    return {**case, "limit_s": row.case.limit.limit_s, "status": row.status,
            "spent_s": row.spent_s, "healthy": _verdict_json(row.healthy),
            "broken_run": _verdict_json(row.broken)}  # fmt: skip


def summary(proof: Proof, options: ProofOptions) -> dict[str, Any]:
    """The whole proof as one JSON object (``--format json``)."""
    return {
        "schema": 3,
        "variant": options.variant,
        "rehearsal": options.rehearse,
        "host": proof.host,
        "seconds": round(proof.seconds, 1),
        "budget_s": options.budget_s,
        "counts": proof.counts(),
        "checks": [row_json(r) for r in proof.rows],
    }


def prove(
    options: ProofOptions,
    *,
    echo: Callable[[str], None] = print,
    say: Callable[[str], None] = print,
    machine: Machine | None = None,
) -> Proof:
    """``twinbuild gpu-proof``: run, write OUT as it goes, print the table; raise FindingsError
    when a check does not hold, the budget left checks not run, or nothing was proven."""
    manifest = load(options.manifest)
    manifest.variant(options.variant)  # an unknown variant is bad input, dry run or not
    if options.dry_run:
        echo(_dry_table().rstrip("\n"))
        return Proof(rows=[])
    if machine is None:
        machine = _machine(options)
    proof = run_proof(options, machine, say=say)
    echo(table(proof).rstrip("\n"))
    say(f"gpu-proof: report in {options.out / 'report.jsonl'}")
    _judge(proof)
    return proof


def _machine(options: ProofOptions) -> Machine:
    if options.rehearse:
        from twinbuild.smoke import gpu_rehearse

        return gpu_rehearse.machine(
            load(options.manifest),
            options.variant,
            options.sources,
            options.work or default_work(True),
        )
    if options.sources is None:
        raise ConfigError(
            "gpu-proof: --sources DIR is needed: the folder of carried sources "
            "(docs/smoke.md, 'The GPU proof'); or --rehearse, or --dry-run"
        )
    if not options.sources.is_dir():
        raise ConfigError(f"gpu-proof: --sources {options.sources}: no such folder")
    from twinbuild.smoke import gpu_host

    return gpu_host.real(options.python)


def _judge(proof: Proof) -> None:
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
    cut = [r for r in proof.rows if r.status == "not run"]
    if cut:
        raise FindingsError(
            f"gpu-proof: the {proof.budget_s:.0f}s budget ran out before {len(cut)} checks "
            f"(first: {cut[0].case.check}); the report keeps the {len(proof.rows) - len(cut)} "
            "that ran"
        )
