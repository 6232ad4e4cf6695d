"""Find the CUDA toolkit the GPU proof builds with, the way CUDA's own tools find it.

In order: ``CUDA_HOME`` (what torch's cpp_extension and torch_memory_saver's setup.py read first),
then nvcc's own report of where it lives (``nvcc --dryrun`` prints ``TOP=``, the folder its
``nvcc.profile`` resolves includes and libraries from, also when ``nvcc`` on PATH is a wrapper
script elsewhere), then ``/usr/local/cuda``. A toolkit is usable when it has ``bin/nvcc`` and
``include/cuda_runtime.h``. One line says which was used; when none is usable, one line says what
each place lacked. Standard library only (the GPU host has no twinbuild dependencies).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from twinbuild.util import process

#: Runs an argv and gives its stdout and stderr together (None: it could not run).
Runner = Callable[[Sequence[str]], str | None]

DEFAULT_HOME = Path("/usr/local/cuda")


@dataclass(frozen=True, slots=True, kw_only=True)
class Toolkit:
    home: Path
    nvcc: Path
    how: str  # "CUDA_HOME", "nvcc's own report (PATH)", "/usr/local/cuda"
    archs: tuple[str, ...] = ()  # nvcc --list-gpu-arch: compute_90, ...

    def line(self) -> str:
        return f"cuda: {self.home} (from {self.how})"


def _run(argv: Sequence[str]) -> str | None:
    try:
        done = process.run(argv, timeout=60, binary=True)
    except process.CommandError:
        return None
    return (done.out + done.err).decode(errors="replace")


def _lacks(home: Path) -> str | None:
    """What ``home`` lacks to be a usable toolkit (None: nothing)."""
    missing = [p for p in ("bin/nvcc", "include/cuda_runtime.h") if not (home / p).is_file()]
    return " and ".join(missing) if missing else None


def reported_home(nvcc: str, run: Runner = _run) -> Path | None:
    """The toolkit folder nvcc itself reports (``#$ TOP=...`` of ``nvcc --dryrun``)."""
    out = run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull])
    found = re.search(r"^#\$ TOP=(.+)$", out or "", re.MULTILINE)
    return Path(os.path.normpath(found.group(1).strip())) if found else None


def find(
    env: Mapping[str, str] | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = _run,
    default: Path = DEFAULT_HOME,
) -> Toolkit | str:
    """The toolkit to build with, or one line saying what is missing where."""
    env = os.environ if env is None else env
    tried: list[str] = []
    given = env.get("CUDA_HOME")
    if given:
        lacks = _lacks(Path(given))
        if lacks is None:
            return _toolkit(Path(given), "CUDA_HOME", run)
        tried.append(f"CUDA_HOME={given} has no {lacks}")
    else:
        tried.append("CUDA_HOME is unset")
    nvcc = which("nvcc")
    if nvcc is None:
        tried.append("no nvcc on PATH")
    else:
        home = reported_home(nvcc, run)
        if home is None:
            tried.append(f"{nvcc} did not report its folder (nvcc --dryrun gave no TOP=)")
        elif (lacks := _lacks(home)) is not None:
            tried.append(f"{nvcc} reports {home}, which has no {lacks}")
        else:
            return _toolkit(home, f"nvcc's own report: {nvcc}", run)
    lacks = _lacks(default)
    if lacks is None:
        return _toolkit(default, str(default), run)
    tried.append(f"{default} has no {lacks}")
    return "no usable CUDA toolkit: " + "; ".join(tried) + " (install CUDA 13 or set CUDA_HOME)"


def _toolkit(home: Path, how: str, run: Runner) -> Toolkit:
    nvcc = home / "bin/nvcc"
    listed = run([str(nvcc), "--list-gpu-arch"]) or ""
    archs = tuple(re.findall(r"^(compute_\w+)\s*$", listed, re.MULTILINE))
    return Toolkit(home=home, nvcc=nvcc, how=how, archs=archs)
