"""Each GPU check as one call: measure through a shell, judge, and return a :class:`Verdict`.

The smoke suite and the GPU proof share these: the suite's shell is the testinfra host (a
container or this machine) and it turns each verdict into a pytest pass, fail or skip; the proof's
shell is a subprocess on a bare GPU host, and it runs each check twice, healthy and on the broken
case it must fail on. Every command runs under ``timeout``; one that hits it is a failure marked
``hung`` (never rerun as flaky). A check that cannot run here is skipped with its reason, never
passed: only a judged reading passes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from twinbuild.manifest.model import BandwidthFloor
from twinbuild.smoke import gpu_arch, gpu_checks, gpu_collective, gpu_scripts
from twinbuild.smoke.gpu_checks import SCRIPT_TIMEOUT_S, TIMED_OUT

Outcome = Literal["passed", "failed", "skipped"]
#: How long the vendor's tool may take to list one module's device code.
KERNEL_TOOL_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class Ran:
    """What one command did."""

    rc: int
    stdout: str
    stderr: str

    @property
    def hung(self) -> bool:
        return self.rc in TIMED_OUT

    def tail(self, n: int = 600) -> str:
        return (self.stderr.strip() or self.stdout.strip())[-n:]


#: Runs one argv where the checks run (a container through testinfra, or this machine).
Shell = Callable[[Sequence[str]], Ran]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    check: str
    outcome: Outcome
    reasons: tuple[str, ...] = ()
    readings: Mapping[str, Any] = field(default_factory=dict)
    hung: bool = False  # killed by its timeout: a failure, never rerun
    notes: tuple[str, ...] = ()  # what the verdict stands on besides its reasons (never a failure)

    @property
    def message(self) -> str:
        return "; ".join(self.reasons)


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """What the checks need to know about the variant and where they run."""

    vendor: str  # "nvidia" | "amd"
    variant: str
    python: str
    toolkit: str
    archs: tuple[str, ...] = ()  # variants.<v>.gpu_archs
    kernel_modules: tuple[str, ...] = ()
    kernel_files: tuple[str, ...] = ()  # files read like the modules (the proof's own builds)
    perf: str | None = None  # all_reduce_perf
    floors: tuple[BandwidthFloor, ...] = ()
    host_driver: str = ""  # the host's nvidia-smi, where /proc/driver/nvidia is not readable
    env: Mapping[str, str] = field(default_factory=dict)  # added to every command
    timeout_s: int = SCRIPT_TIMEOUT_S
    collective_timeout_s: int = gpu_collective.COLLECTIVE_TIMEOUT_S


def passed_or_failed(
    check: str, problems: Sequence[str], readings: Mapping[str, Any], notes: Sequence[str] = ()
) -> Verdict:
    outcome: Outcome = "failed" if problems else "passed"
    return Verdict(check=check, outcome=outcome, reasons=tuple(problems), readings=readings,
                   notes=tuple(notes))  # fmt: skip


def skipped(check: str, reason: str, readings: Mapping[str, Any] | None = None) -> Verdict:
    return Verdict(check=check, outcome="skipped", reasons=(reason,), readings=readings or {})


def failed(check: str, reason: str, **more: Any) -> Verdict:
    return Verdict(check=check, outcome="failed", reasons=(reason,), **more)


def timed(argv: Sequence[str], timeout_s: int, env: Mapping[str, str]) -> list[str]:
    """``argv`` under ``timeout -k 10`` with ``env`` added (``env K=V ...``)."""
    words = ["timeout", "-k", "10", str(timeout_s)]
    if env:
        words += ["env", *(f"{k}={v}" for k, v in env.items())]
    return words + list(argv)


def last_json(stdout: str) -> dict[str, Any] | None:
    lines = stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def run_script(
    shell: Shell,
    probe: Probe,
    check: str,
    what: str,
    script: str,
    *,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    exit_after_reading: str = "",
) -> dict[str, Any] | Verdict:
    """Run ``script`` with the probe's Python; its last stdout line is the reading. A hang, a
    crash or no JSON is a failed verdict, except where ``exit_after_reading`` says why an exit
    crash after a complete reading (its last line's ``stage`` is ``done``) is upstream's known
    issue: then the reading is judged and the crash is kept as its ``exit_note``."""
    ran = shell(timed([probe.python, "-c", script, *args], probe.timeout_s,
                      {**probe.env, **(env or {})}))  # fmt: skip
    data = last_json(ran.stdout)
    if exit_after_reading and ran.rc != 0 and not ran.hung and (data or {}).get("stage") == "done":
        assert data is not None  # noqa: S101 -- the condition above read it
        crash = " ".join(ran.stderr.strip()[-200:].split())
        return {**data, "exit_note": f"{what}: exited {ran.rc} after a complete reading "
                f"({exit_after_reading}){': ' + crash if crash else ''}"}  # fmt: skip
    if ran.hung:
        return failed(
            check, f"{what}: did not finish within its timeout (exit {ran.rc}): a hang; "
            f"{ran.tail(400)}", hung=True, readings=data or {},
        )  # fmt: skip
    if ran.rc != 0:
        return failed(check, f"{what}: exited {ran.rc}: {ran.tail()}", readings=data or {})
    if data is None:
        return failed(check, f"{what}: printed no JSON: {ran.stdout.strip()[-300:]!r}")
    return data


# -- torch -----------------------------------------------------------------------------------------


def torch_backend(shell: Shell, probe: Probe, *, env: Mapping[str, str] | None = None) -> Verdict:
    got = run_script(shell, probe, "torch-backend", "torch GPU backend", gpu_scripts.BACKEND,
                     env=env)  # fmt: skip
    if isinstance(got, Verdict):
        return got
    return passed_or_failed("torch-backend", gpu_checks.backend(got, vendor=probe.vendor), got)


def matmul(shell: Shell, probe: Probe, *, env: Mapping[str, str] | None = None) -> Verdict:
    got = run_script(shell, probe, "matmul", "GPU matmul", gpu_scripts.MATMUL, env=env)
    if isinstance(got, Verdict):
        return got
    return passed_or_failed("matmul", gpu_checks.matmul(got), got)


# -- devices, driver, architectures ---------------------------------------------------------------


def read_devices(
    shell: Shell, probe: Probe, *, env: Mapping[str, str] | None = None
) -> dict[str, Any] | Verdict:
    """One run of ``gpu_scripts.DEVICES``: the reading the next checks judge."""
    return run_script(shell, probe, "devices", "GPU devices", gpu_scripts.DEVICES, env=env)


def _found(reading: Mapping[str, Any]) -> list[str]:
    archs = reading.get("archs")
    return [str(a) for a in archs] if isinstance(archs, list) else []


def driver(reading: Mapping[str, Any], probe: Probe, *, toolkit: str | None = None) -> Verdict:
    """The driver and toolkit (``toolkit`` instead of the manifest's: the proof's broken case)."""
    want = toolkit or probe.toolkit
    if probe.vendor == "nvidia":
        problems = gpu_checks.nvidia_driver(
            toolkit=want,
            driver=str(reading.get("driver") or probe.host_driver),
            torch_cuda=reading.get("torch_cuda"),
            driver_cuda=gpu_checks.cuda_version(reading.get("driver_cuda")),
            cu_init=reading.get("cu_init"),
            compat="/compat/" in str(reading.get("libcuda") or ""),
        )
    else:
        problems = gpu_checks.rocm_toolkit(
            toolkit=want, rocm_version=str(reading.get("rocm") or ""),
            torch_hip=reading.get("torch_hip"),
        )  # fmt: skip
    keys = ("driver", "driver_cuda", "cu_init", "libcuda", "torch_cuda", "torch_hip", "rocm")
    note = None
    if probe.vendor == "nvidia":
        note = gpu_checks.minor_compat_note(
            reading.get("torch_cuda"), gpu_checks.cuda_version(reading.get("driver_cuda"))
        )
    return passed_or_failed("driver-toolkit", problems, {k: reading.get(k) for k in keys},
                            [note] if note else [])  # fmt: skip


def visible(reading: Mapping[str, Any], probe: Probe) -> Verdict:
    env = reading.get("env") if isinstance(reading.get("env"), dict) else {}
    problems = gpu_checks.visible_devices(
        vendor=probe.vendor, nodes=int(reading.get("nodes") or 0),
        torch_count=int(reading.get("count") or 0), env=env or {},
    )  # fmt: skip
    keys = ("nodes", "count", "env")
    return passed_or_failed("visible-devices", problems, {k: reading.get(k) for k in keys})


def declared_arch(
    reading: Mapping[str, Any], probe: Probe, *, archs: Sequence[str] | None = None
) -> Verdict:
    use = tuple(archs) if archs is not None else probe.archs
    problems = gpu_arch.declared(vendor=probe.vendor, archs=use, found=_found(reading))
    return passed_or_failed("gpu-arch-declared", problems,
                            {"archs": _found(reading), "gpu_archs": list(use)})  # fmt: skip


def torch_arch(
    reading: Mapping[str, Any], probe: Probe, *, arch_list: Sequence[str] | None = None
) -> Verdict:
    raw = reading.get("arch_list") if arch_list is None else list(arch_list)
    listed = [str(a) for a in raw] if isinstance(raw, list) else None
    problems = gpu_arch.torch_archs(vendor=probe.vendor, arch_list=listed, found=_found(reading))
    return passed_or_failed("torch-arch", problems,
                            {"archs": _found(reading), "arch_list": listed})  # fmt: skip


def kernel_arch(
    shell: Shell,
    probe: Probe,
    reading: Mapping[str, Any],
    *,
    files: Sequence[str] | None = None,
    modules: Sequence[str] | None = None,
) -> Verdict:
    """The named modules' (and files') device code must run on every GPU."""
    names = [*(probe.kernel_modules if modules is None else modules),
             *(f"file:{f}" for f in (probe.kernel_files if files is None else files))]  # fmt: skip
    if not names:
        return skipped(
            "kernel-arch",
            f"no kernel modules to read here (variants.{probe.variant}.kernel_modules names "
            "an image's; a bare host has none)",
        )
    got = run_script(shell, probe, "kernel-arch", "kernel listing", gpu_scripts.KERNELS,
                     args=[probe.vendor, *names])  # fmt: skip
    if isinstance(got, Verdict):
        return got
    tool = str(got.get("tool") or "")
    files, tool_args = got.get("files"), got.get("tool_args")
    if not tool or not isinstance(files, list) or not isinstance(tool_args, list):
        return failed("kernel-arch", f"kernel listing: incomplete reading {got}")
    tool_path = got.get("tool_path")
    if not tool_path:
        where = "/usr/local/cuda/bin" if probe.vendor == "nvidia" else "/opt/rocm/bin"
        name = tool.split(" ", 1)[0]
        return skipped(
            "kernel-arch",
            f"no {name} here (looked on PATH and in {where}): the kernels' targets cannot be read",
            got,
        )
    listings = [
        _listing(shell, probe, [str(tool_path), *map(str, tool_args)], tool, item)
        for item in files
        if isinstance(item, dict)
    ]
    problems = gpu_arch.kernels(vendor=probe.vendor, listings=listings, found=_found(reading))
    readings = {"archs": _found(reading), "targets": gpu_arch.summary(listings)}
    return passed_or_failed("kernel-arch", problems, readings)


def _listing(
    shell: Shell, probe: Probe, argv: Sequence[str], tool: str, item: Mapping[str, Any]
) -> gpu_arch.Listing:
    """The tool's listing of one file the kernel script found (none where it found no file)."""
    path = item.get("path")
    what = str(item.get("what"))
    if not isinstance(path, str):
        return gpu_arch.Listing(what=what, path=None, tool=tool, rc=0, output="")
    ran = shell(timed([*argv, path], KERNEL_TOOL_TIMEOUT_S, probe.env))
    if ran.hung:
        output = f"{tool.split(' ', 1)[0]} did not finish within {KERNEL_TOOL_TIMEOUT_S} s"
        return gpu_arch.Listing(what=what, path=path, tool=tool, rc=124, output=output)
    return gpu_arch.Listing(what=what, path=path, tool=tool, rc=ran.rc,
                            output=ran.stdout + ran.stderr)  # fmt: skip


# -- torch_memory_saver ---------------------------------------------------------------------------


#: torch_memory_saver's torch mode can crash at interpreter exit after its work is done: a known
#: issue by its maintainer (fzyzcjy/torch_memory_saver#56, #37), and upstream's own harness judges
#: torch mode by what the work reported, never its exit code (test/test_examples.py L99 at
#: b5588e83; preload mode is judged by its exit code there, and here).
TORCH_MODE_EXIT = (
    "torch mode's known crash at interpreter exit, torch_memory_saver#56/#37; upstream's "
    "test_examples.py ignores torch mode's exit code"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SaverCheck:
    check: str
    what: str
    script: str
    preload: bool  # the process starts with the package's preload library in LD_PRELOAD
    judge: Callable[[Mapping[str, Any]], list[str]]
    #: Why an exit crash after a complete reading is not this check's failure ("": it is).
    exit_after_reading: str = ""


SAVER_CHECKS: Mapping[str, SaverCheck] = {
    c.check: c
    for c in (
        SaverCheck(
            check="memory-saver-free",
            what="torch_memory_saver free while paused",
            script=gpu_scripts.MEMORY_SAVER_FREE,
            preload=True,
            judge=gpu_checks.memory_saver_free,
        ),
        SaverCheck(
            check="memory-saver-torch-mode",
            what="torch_memory_saver torch mode",
            script=gpu_scripts.MEMORY_SAVER_TORCH,
            preload=False,
            judge=gpu_checks.memory_saver_torch,
            exit_after_reading=TORCH_MODE_EXIT,
        ),
        SaverCheck(
            check="memory-saver-tags",
            what="torch_memory_saver tagged regions",
            script=gpu_scripts.MEMORY_SAVER_TAGS,
            preload=True,
            judge=gpu_checks.memory_saver_tags,
        ),
        SaverCheck(
            check="memory-saver-cpu-backup",
            what="torch_memory_saver CPU backup",
            script=gpu_scripts.MEMORY_SAVER_CPU_BACKUP,
            preload=True,
            judge=gpu_checks.memory_saver_cpu_backup,
        ),
    )
}


def memory_saver(
    shell: Shell, probe: Probe, check: str, *, env: Mapping[str, str] | None = None
) -> Verdict:
    """One of :data:`SAVER_CHECKS`; a preload check first asks the package for its library."""
    spec = SAVER_CHECKS[check]
    extra = dict(env or {})
    if spec.preload:
        where = run_script(shell, probe, check, "torch_memory_saver library",
                           gpu_scripts.PRELOAD_LIBRARY, env=env)  # fmt: skip
        if isinstance(where, Verdict):
            return where
        extra["LD_PRELOAD"] = str(where.get("ld_preload"))
    got = run_script(shell, probe, check, spec.what, spec.script, env=extra,
                     exit_after_reading=spec.exit_after_reading)  # fmt: skip
    if isinstance(got, Verdict):
        return got
    note = got.pop("exit_note", None)
    return passed_or_failed(check, spec.judge(got), got, [str(note)] if note else [])


# -- all-reduce ---------------------------------------------------------------------------------


def find_floor(floors: Sequence[BandwidthFloor], gpu: str, gpus: int) -> BandwidthFloor | None:
    return next((f for f in floors if (f.gpu, f.gpus) == (gpu, gpus)), None)


def all_reduce(
    shell: Shell,
    probe: Probe,
    *,
    gpus: int,
    model: str,
    check: bool = True,
    floor: BandwidthFloor | None = None,
) -> tuple[Verdict, Verdict]:
    """One ``all_reduce_perf`` run on every GPU, judged twice: (results, bandwidth). ``floor``
    replaces the manifest's (the proof's broken case); ``check=False`` drops the result check."""
    names = ("all-reduce", "all-reduce-bandwidth")
    perf = probe.perf
    if perf is None:
        why = f"no all_reduce_perf among variants.{probe.variant}.binaries"
        return skipped(names[0], why), skipped(names[1], why)
    if gpus < 1:
        why = "torch sees no GPU; all_reduce_perf has nothing to run on"
        return failed(names[0], why), failed(names[1], why)
    one = gpu_collective.skip_reason(gpus)
    if one is not None:
        return skipped(names[0], one, {"gpus": gpus}), skipped(names[1], one, {"gpus": gpus})
    argv = gpu_collective.collective_argv(perf, gpus, timeout_s=probe.collective_timeout_s,
                                          check=check)  # fmt: skip
    if probe.env:
        argv = [*argv[:4], "env", *(f"{k}={v}" for k, v in probe.env.items()), *argv[4:]]
    ran = shell(argv)
    run = gpu_collective.parse_collective(ran.stdout)
    tail = (ran.stdout + ran.stderr).strip()[-600:]
    readings = {"gpus": gpus, "model": model, "largest": run.largest(), "rc": ran.rc}
    results = passed_or_failed(
        names[0],
        gpu_collective.collective(run, rc=ran.rc, gpus=gpus, tail=tail, perf=perf),
        readings,
    )
    if ran.hung:
        results = Verdict(check=names[0], outcome="failed", reasons=results.reasons,
                          readings=readings, hung=True)  # fmt: skip
    chosen = floor or find_floor(probe.floors, model, gpus)
    unjudged = gpu_collective.floor_skip(chosen, gpu=model, gpus=gpus, variant=probe.variant)
    if unjudged is not None or chosen is None:
        return results, skipped(names[1], unjudged or "no floor", readings)
    if ran.hung or ran.rc != 0:
        return results, failed(names[1], f"{perf} did not complete: {results.message}",
                               readings=readings, hung=ran.hung)  # fmt: skip
    bandwidth = gpu_collective.bandwidth(run, floor=chosen, perf=perf)
    return results, passed_or_failed(names[1], bandwidth,
                                     {**readings, "floor_gbs": chosen.busbw_gbs})  # fmt: skip
