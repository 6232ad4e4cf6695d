"""The machine the GPU proof runs on, as one record: its clock, its GPUs, its CUDA toolkit, its
builds and its shell. :func:`real` is this host; the rehearsal (``gpu_rehearse``) hands the proof a
fake GPU layer of the same shape, so both run the same flow, budget and report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from twinbuild.smoke import gpu, gpu_build, gpu_cuda
from twinbuild.smoke.gpu_budget import Clock, Monotonic
from twinbuild.smoke.gpu_build import Builder
from twinbuild.smoke.gpu_cuda import Toolkit
from twinbuild.smoke.gpu_probe import Ran, Shell
from twinbuild.util import process

#: Makes the builder: (python, sources, work, logs, toolkit, cuda_major).
MakeBuilder = Callable[[str, Path, Path, Path, "Toolkit | str", str], Builder]


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    clock: Clock
    detect: Callable[[str], gpu.GpuInfo | None]
    toolkit: Callable[[], Toolkit | str]
    builder: MakeBuilder
    #: A shell whose commands end by ``deadline`` (on ``clock``), logging each to ``log``.
    runner: Callable[[float, Path], Shell]
    library_path: Callable[[str, Toolkit | str], str]
    python: str  # the interpreter holding torch (the rehearsal's: its fake one)
    what: str  # "this host" or "rehearsal: ..."


def _short(argv: Sequence[str]) -> str:
    """argv for a log, each ``-c`` script cut to its first line."""
    words = list(argv)
    for i, word in enumerate(words[:-1]):
        if word == "-c":
            first = next((x for x in words[i + 1].splitlines() if x.strip()), "")
            words[i + 1] = f"'{first} ...'"
    return " ".join(words)


def log_ran(log: Path, argv: Sequence[str], ran: Ran) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8", errors="replace") as f:
        f.write(f"$ {_short(argv)}\nexit {ran.rc}\n--- stdout\n{ran.stdout}\n--- stderr\n"
                f"{ran.stderr}\n")  # fmt: skip


def local_shell(clock: Clock, deadline: float, log: Path) -> Shell:
    """This machine as a :data:`gpu_probe.Shell`: ``timeout`` inside bounds each command, this
    bounds it by the step's deadline too (its whole process group is killed there). Output is
    decoded with replacement: a stray non-UTF-8 byte is kept as U+FFFD, never a crash."""

    def run(argv: Sequence[str]) -> Ran:
        left = deadline - clock.now()
        if left <= 0:
            ran = Ran(rc=124, stdout="", stderr="not started: its step's limit was spent")
            log_ran(log, argv, ran)
            return ran
        try:
            done = process.run(argv, timeout=left + 5)
            ran = Ran(rc=done.code, stdout=done.out, stderr=done.err)
        except process.CommandMissing as exc:
            ran = Ran(rc=127, stdout="", stderr=str(exc))
        except process.CommandTimedOut as exc:
            # Past the step's deadline: the command and every process it started (a GPU script
            # holding device memory) go, not only the ``timeout`` in front of them.
            ran = Ran(rc=124, stdout=exc.out, stderr="killed: its step's limit was spent")
        log_ran(log, argv, ran)
        return ran

    return run


def real(python: str) -> Machine:
    clock = Monotonic()

    def builder(py: str, sources: Path, work: Path, logs: Path, toolkit: Toolkit | str,
                cuda_major: str) -> Builder:  # fmt: skip
        return gpu_build.HostBuilder(python=py, sources=sources, work=work, logs=logs,
                                     toolkit=toolkit, cuda_major=cuda_major)  # fmt: skip

    return Machine(
        clock=clock,
        detect=gpu.detect,
        toolkit=gpu_cuda.find,
        builder=builder,
        runner=lambda deadline, log: local_shell(clock, deadline, log),
        library_path=lambda py, toolkit: gpu_build.library_path(py, toolkit, os.environ),
        python=python,
        what="this host",
    )
