"""``twinbuild gpu-proof --rehearse``: the whole GPU proof on a CPU host.

The same flow, budget, incremental report and three outputs as on a GPU host; only the machine
underneath is fake: ``nvidia-smi`` answers for one H200, or eight (with a stray non-UTF-8 byte,
as a real one may print), the interpreter is ``gpu_fake`` (healthy and broken readings), and the
builds unpack the carried sources for real (each commit checked against the manifest) and then
stand a marker in for what nvcc and pip would make. The clock is a :class:`ManualClock` that each
build and each script advances by the seconds it stands for on a real host, so a budget cut lands
in the same place on any machine. Without ``--sources``, stand-in tarballs at the pinned commits
are made in the work folder (``git archive``'s layout: the commit in the pax header).
"""

from __future__ import annotations

import io
import re
import sys
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from twinbuild.manifest.model import PinManifest
from twinbuild.smoke import gpu, gpu_cuda, gpu_fake
from twinbuild.smoke.gpu_budget import ManualClock
from twinbuild.smoke.gpu_build import (
    PRE_FIX_TMS,
    Builder,
    Built,
    Refused,
    pinned_commit,
    source_path,
    unpack,
)
from twinbuild.smoke.gpu_cuda import Toolkit
from twinbuild.smoke.gpu_host import Machine, log_ran
from twinbuild.smoke.gpu_probe import Ran, Shell
from twinbuild.util import process

#: Seconds each build stands for on the modelled host (16 cores), from docs/benchmarks.md's
#: 2-core figures: 18.3 CPU-s each torch_memory_saver build (serial), 4.8 the kernels, 58.8 the
#: longest file of all_reduce_perf (its files compile side by side).
BUILD_SECONDS = {"tms": 20, "tms-prefix": 20, "kernels": 5, "all_reduce_perf": 60}
_FAKE_SECONDS = re.compile(r"^tb-fake-seconds: (\d+(?:\.\d+)?)\n?", re.MULTILINE)


def smi(gpus: int) -> Callable[[Sequence[str]], str | None]:
    """``nvidia-smi`` on ``gpus`` H200s, as text decoded with replacement (a stray 0xff
    included)."""

    def run(argv: Sequence[str]) -> str | None:
        raw: bytes
        if "--query-gpu=name,driver_version" in argv:
            raw = b"NVIDIA H200, 580.95.05\n" * gpus
        elif "--query-gpu=compute_cap" in argv:
            raw = b"9.0\n" * gpus
        else:
            raw = b"| NVIDIA-SMI 580.95.05  Driver Version: 580.95.05  CUDA Version: 13.0 \xff|\n"
        return raw.decode(errors="replace")

    return run


class RehearsalBuilder:
    """Unpacks each source for real, then stands a marker in for the build."""

    def __init__(self, clock: ManualClock, sources: Path, work: Path, logs: Path) -> None:
        self.clock = clock
        self.sources = sources
        self.work = work
        self.logs = logs

    def _spend(self, name: str, limit_s: float) -> bool:
        cost = BUILD_SECONDS[name]
        self.clock.advance(min(cost, limit_s))
        return cost <= limit_s

    def _refused(self, name: str, exc: Refused) -> Built:
        log = self.logs / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"{exc}\n", encoding="utf-8")
        return Built(name=name, path=None, seconds=0.0, reason=str(exc))

    def tms(self, name: str, source: str, commit: str, limit_s: float) -> Built:
        src = self.work / "src" / name
        try:
            unpack(source_path(self.sources, source), commit, src)
        except Refused as exc:
            return self._refused(name, exc)
        if not self._spend(name, limit_s):
            return Built(name=name, path=None, seconds=limit_s, reason="killed at its limit")
        target = self.work / f"{name}-{commit[:12]}"
        (target / "torch_memory_saver").mkdir(parents=True, exist_ok=True)
        role = "pre-fix" if commit == PRE_FIX_TMS else "pinned"
        (target / "torch_memory_saver" / gpu_fake.STANDIN).write_text(role, encoding="utf-8")
        (self.logs / f"{name}.log").write_text(f"rehearsal: {src} stands in for {target}\n",
                                               encoding="utf-8")  # fmt: skip
        return Built(name=name, path=target, seconds=BUILD_SECONDS[name])

    def kernels(self, arch: str, other: str, limit_s: float) -> Built:
        if not self._spend("kernels", limit_s):
            return Built(name="kernels", path=None, seconds=limit_s, reason="killed at its limit")
        folder = self.work / f"kernels-{arch}-{other}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel-ok.so").write_text(f"sm_{arch}\n", encoding="utf-8")
        (folder / "kernel-wrong.so").write_text(f"sm_{other}\n", encoding="utf-8")
        return Built(name="kernels", path=folder, seconds=BUILD_SECONDS["kernels"])

    def perf(self, arch: str, commit: str, limit_s: float) -> Built:
        try:
            unpack(source_path(self.sources, "nccl-tests"), commit, self.work / "src/nccl-tests")
        except Refused as exc:
            return self._refused("all_reduce_perf", exc)
        if not self._spend("all_reduce_perf", limit_s):
            return Built(name="all_reduce_perf", path=None, seconds=limit_s,
                         reason="killed at its limit")  # fmt: skip
        binary = self.work / f"nccl-tests-{commit[:12]}-sm{arch}" / "all_reduce_perf"
        _launcher(binary, "--all-reduce-perf")
        return Built(name="all_reduce_perf", path=binary, seconds=BUILD_SECONDS["all_reduce_perf"])


def fake_shell(clock: ManualClock, deadline: float, log: Path) -> Shell:
    """Runs each command for real (the fake interpreter), then moves the clock by the seconds the
    command stands for; one that would pass its step's deadline ends as killed there."""

    def run(argv: Sequence[str]) -> Ran:
        if clock.now() >= deadline:
            ran = Ran(rc=124, stdout="", stderr="not started: its step's limit was spent")
            log_ran(log, argv, ran)
            return ran
        done = process.run(argv, timeout=300)
        stderr = done.err
        found = _FAKE_SECONDS.search(stderr)
        cost = float(found.group(1)) if found else 1.0
        stderr = _FAKE_SECONDS.sub("", stderr)
        if clock.now() + cost > deadline:
            clock.advance(deadline - clock.now())
            ran = Ran(rc=124, stdout="", stderr="killed: its step's limit was spent")
        else:
            clock.advance(cost)
            ran = Ran(rc=done.code, stdout=done.out, stderr=stderr)
        log_ran(log, argv, ran)
        return ran

    return run


def _launcher(path: Path, *first: str, gpus: int | None = None) -> Path:
    """An executable that runs ``gpu_fake`` (with ``first`` before its arguments) on this Python,
    twinbuild importable whatever PYTHONPATH the check gives it."""
    root = Path(__file__).resolve().parents[2]
    path.parent.mkdir(parents=True, exist_ok=True)
    count = f"TB_FAKE_GPUS={gpus} " if gpus is not None else ""
    path.write_text(
        "#!/bin/sh\n"
        f'{count}{gpu_fake.HOME}="{path.parent}" PYTHONPATH="{root}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec "{sys.executable}" -S '
        f'-m twinbuild.smoke.gpu_fake {" ".join(first)} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def fake_python(work: Path, gpus: int = 1) -> Path:
    """An interpreter stand-in: this Python answering the GPU scripts for ``gpus`` H200s, and
    beside it the ``cuobjdump`` its kernel script finds."""
    _launcher(work / "fake-cuobjdump", "--cuobjdump")
    return _launcher(work / "fake-python", gpus=gpus)


def standin_sources(folder: Path, commits: dict[str, str]) -> Path:
    """SOURCES as ``git archive`` tarballs at ``commits`` (name -> commit), holding a note."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, commit in commits.items():
        note = f"rehearsal stand-in for {name} at {commit}\n".encode()
        with tarfile.open(folder / f"{name}.tar", "w", format=tarfile.PAX_FORMAT,
                          pax_headers={"comment": commit}) as tar:  # fmt: skip
            info = tarfile.TarInfo("README.rehearsal")
            info.size = len(note)
            tar.addfile(info, io.BytesIO(note))
    return folder


def machine(
    manifest: PinManifest, variant: str, sources: Path | None, work: Path, *, gpus: int = 1
) -> Machine:
    """The fake GPU layer on ``gpus`` H200s (one: the first host's; eight: an HGX board's,
    where all-reduce runs); ``sources`` None: stand-in tarballs at the pinned commits."""
    sources = sources or standin_sources(work / "sources", {
        "torch_memory_saver": pinned_commit(manifest, variant, "torch-memory-saver"),
        "torch_memory_saver-prefix": PRE_FIX_TMS,
        "nccl-tests": pinned_commit(manifest, variant, "collective-tests"),
    })  # fmt: skip
    clock = ManualClock()

    def builder(_py: str, _sources: Path, work: Path, logs: Path, _toolkit: Toolkit | str,
                _major: str) -> Builder:  # fmt: skip
        return RehearsalBuilder(clock, sources, work, logs)

    return Machine(
        clock=clock,
        detect=lambda vendor: gpu.detect(vendor, run=smi(gpus)),
        toolkit=gpu_cuda.find,
        builder=builder,
        runner=lambda deadline, log: fake_shell(clock, deadline, log),
        library_path=lambda _py, _toolkit: "",
        python=str(fake_python(work, gpus)),
        what=f"rehearsal: a fake GPU layer ({gpus}x NVIDIA H200, modelled seconds)",
    )
