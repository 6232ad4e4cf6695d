"""What the GPU proof builds from the sources carried to a bare GPU host, and only that.

``SOURCES`` holds each source as a git checkout (a folder) or a ``git archive`` tarball (``.tar``,
whose pax header records the commit); any commit but the pinned one is refused, naming both. The
builds, each bounded by its step's limit and logged to a file of its own:

- torch_memory_saver at the pin and at its pre-fix parent, once each (``pip install --target``,
  no index, no build isolation, as the recipes build it);
- two copies of one small kernel: for this GPU's architecture and for another one;
- ``all_reduce_perf`` alone (never the other nine nccl-tests programs), for this GPU's
  architecture alone, against the NCCL of torch's wheel; only where two or more GPUs need it.

A build is kept in the work folder (in the cache) under a key of its source commit, architecture
and CUDA: a rerun reuses it. Standard library only.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from twinbuild.smoke.gpu_cuda import Toolkit
from twinbuild.util import process
from twinbuild.util.git import run_git

if TYPE_CHECKING:
    from twinbuild.manifest.model import PinManifest

#: torch_memory_saver's pre-fix parent: the first parent of the pinned merge b5588e83 (PR #95),
#: whose free() releases a paused allocation's handle a second time.
PRE_FIX_TMS = "fdb09ad342f8d150e11afe719f798453cef742ad"
#: Each source's name in SOURCES (a folder, or NAME.tar).
SOURCE_NAMES = ("torch_memory_saver", "torch_memory_saver-prefix", "nccl-tests")

#: The one kernel the proof compiles twice (for this GPU, and for another architecture).
KERNEL = 'extern "C" __global__ void tb_fill(char *p, char v) { p[threadIdx.x] = v; }\n'

#: What PYTHON prints: the folders holding the CUDA runtime and NCCL of its torch's nvidia-*
#: wheels, what torch_memory_saver's preload library (libcudart.so.N) and all_reduce_perf
#: (libnccl.so.2) need on a bare host, where nothing else puts them on the library path.
LIBRARY_DIRS = """
import glob, os, site
roots = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
dirs = []
for root in roots:
    for pattern in ("nvidia/*/lib/libcudart.so.*", "nvidia/*/lib/libnccl.so.*"):
        for hit in sorted(glob.glob(os.path.join(root, pattern))):
            if os.path.dirname(hit) not in dirs:
                dirs.append(os.path.dirname(hit))
print(":".join(dirs))
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Built:
    """One build: where its result is, or why there is none."""

    name: str
    path: Path | None
    seconds: float
    reason: str = ""  # why it did not build ("" when it did)
    reused: bool = False
    cut: bool = False  # not started: the budget had less left than its floor
    tools: Path | None = None  # the toolkit's bin folder (its cuobjdump reads the kernels)

    def line(self) -> str:
        if self.path is None:
            return f"gpu-proof: {self.name}: not built: {self.reason}"
        how = "reused" if self.reused else f"built in {self.seconds:.0f}s"
        return f"gpu-proof: {self.name}: {how} ({self.path})"


class Builder(Protocol):
    """What the proof asks to have built (the real one, or the rehearsal's)."""

    def tms(self, name: str, source: str, commit: str, limit_s: float) -> Built: ...

    def kernels(self, arch: str, other: str, limit_s: float) -> Built: ...

    def perf(self, arch: str, commit: str, limit_s: float) -> Built: ...


class Refused(Exception):
    """A source that is missing or at another commit than the pinned one."""


def pinned_commit(manifest: PinManifest, variant: str, name: str) -> str:
    """The commit ``pins/manifest.toml`` pins ``name`` at for the variant's amd64 image."""
    from twinbuild.errors import ConfigError

    image = manifest.image(variant, "linux/amd64")
    pin = next((p for p in manifest.resolve(image) if p.name == name), None)
    if pin is None or not pin.values.commit:
        raise ConfigError(f"{manifest.path}: pins.{name}: no commit for variant {variant}")
    return pin.values.commit


def default_work(rehearse: bool) -> Path:
    """Where builds and logs go: the cache's gpu-proof folder (never the output folder)."""
    from twinbuild.util.paths import cache_root

    return cache_root() / "gpu-proof" / ("rehearsal" if rehearse else "work")


def source_path(sources: Path, name: str) -> Path:
    """``SOURCES/NAME`` (a checkout) or ``SOURCES/NAME.tar``."""
    folder = sources / name
    return folder if folder.exists() else sources / f"{name}.tar"


def tar_commit(path: Path) -> str:
    """The commit ``git archive`` wrote into the tarball's pax header ("" when none)."""
    try:
        with tarfile.open(path) as tar:
            return str(tar.pax_headers.get("comment", ""))
    except (OSError, tarfile.TarError) as exc:
        raise Refused(f"{path}: not a readable tarball ({exc})") from None


def unpack(src: Path, commit: str, dest: Path) -> None:
    """A fresh copy of ``src`` at ``commit`` in ``dest``; Refused for any other commit."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if (src / ".git").exists():
        head = run_git(src, "rev-parse", "HEAD").stdout.strip()
        if head != commit:
            raise Refused(f"{src} is at {head or '(no commit)'}, the manifest pins {commit}")
        archive = run_git(src, "archive", commit, binary=True, timeout=300)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest, filter="data")
    elif src.is_file():
        got = tar_commit(src)
        if got != commit:
            raise Refused(f"{src} holds {got or 'no commit id'}, the manifest pins {commit}")
        with tarfile.open(src) as tar:
            tar.extractall(dest, filter="data")
    else:
        raise Refused(f"{src}: no such checkout or tarball")


def run_logged(
    argv: Sequence[str], *, log: Path, limit_s: float, env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:  # fmt: skip
    """Run ``argv`` with its output appended to ``log``; its whole process group is killed at
    ``limit_s`` (make's compilers too). Returns the exit status (124: killed at its limit)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    _append(log, f"$ {' '.join(argv)}\n")
    try:
        return process.run_to_log(argv, log=log, timeout=max(1.0, limit_s), env=env, cwd=cwd)
    except process.CommandTimedOut:
        _append(log, f"killed at its limit of {limit_s:.0f}s\n")
        return 124
    except process.CommandMissing as exc:
        _append(log, f"{exc}\n")
        return 127


def _append(log: Path, line: str) -> None:
    with log.open("ab") as out:
        out.write(line.encode())


def _tail(log: Path, n: int = 300) -> str:
    try:
        text = log.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""
    return " ".join(text.split())


class HostBuilder:
    """The real builds, on this host, into ``work`` (logs into ``logs``)."""

    def __init__(
        self, *, python: str, sources: Path, work: Path, logs: Path,
        toolkit: Toolkit | str, cuda_major: str,
    ) -> None:  # fmt: skip
        self.python = python
        self.sources = sources
        self.work = work
        self.logs = logs
        self.toolkit = toolkit
        self.cuda_major = cuda_major

    def _done(self, name: str, key: str, path: Path) -> Built | None:
        stamp = path.parent / f".{path.name}.built"
        if path.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
            return Built(name=name, path=path, seconds=0.0, reused=True)
        return None

    def _stamp(self, path: Path, key: str) -> None:
        (path.parent / f".{path.name}.built").write_text(key, encoding="utf-8")

    def _env(self, toolkit: Toolkit) -> dict[str, str]:
        return {**os.environ, "CUDA_HOME": str(toolkit.home),
                "PATH": f"{toolkit.home / 'bin'}:{os.environ.get('PATH', '')}"}  # fmt: skip

    def tms(self, name: str, source: str, commit: str, limit_s: float) -> Built:
        started = time.monotonic()
        target = self.work / f"{name}-{commit[:12]}-cu{self.cuda_major}"
        key = f"{commit} cu{self.cuda_major}"
        if (done := self._done(name, key, target)) is not None:
            return done
        if isinstance(self.toolkit, str):
            return Built(name=name, path=None, seconds=0.0, reason=self.toolkit)
        log = self.logs / f"{name}.log"
        src = self.work / "src" / name
        try:
            unpack(source_path(self.sources, source), commit, src)
        except Refused as exc:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"{exc}\n", encoding="utf-8")
            return Built(name=name, path=None, seconds=0.0, reason=str(exc))
        env = self._env(self.toolkit)
        env["TMS_CUDA_MAJOR"] = self.cuda_major
        env["LIBRARY_PATH"] = ":".join(filter(None, [str(self._driver_link(self.toolkit, log)),
                                                     os.environ.get("LIBRARY_PATH")]))  # fmt: skip
        shutil.rmtree(target, ignore_errors=True)
        rc = run_logged([self.python, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                         "--no-index", "--target", str(target), str(src)],
                        log=log, limit_s=limit_s, env=env)  # fmt: skip
        seconds = time.monotonic() - started
        if rc != 0:
            return Built(name=name, path=None, seconds=seconds,
                         reason=f"pip exited {rc} (log {log.name}): {_tail(log)}")  # fmt: skip
        self._stamp(target, key)
        return Built(name=name, path=target, seconds=seconds)

    def _driver_link(self, toolkit: Toolkit, log: Path) -> Path:
        """A folder whose libcuda.so the linker takes: the driver's, else CUDA's stub."""
        link = self.work / "link"
        found = process.run(["ldconfig", "-p"], timeout=30).out if shutil.which("ldconfig") else ""
        candidates = [line.rsplit(" ", 1)[-1] for line in found.splitlines()
                      if "libcuda.so.1 " in line]  # fmt: skip
        candidates += ["/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                       *(str(toolkit.home / d / "stubs/libcuda.so")
                         for d in ("lib64", "lib", "targets/x86_64-linux/lib"))]  # fmt: skip
        for candidate in candidates:
            if Path(candidate).exists():
                link.mkdir(parents=True, exist_ok=True)
                (link / "libcuda.so").unlink(missing_ok=True)
                (link / "libcuda.so").symlink_to(candidate)
                return link
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"no libcuda to link against: none of {candidates} (the driver's, or the "
                      "toolkit's stub); LIBRARY_PATH must name one\n")  # fmt: skip
        return link

    def kernels(self, arch: str, other: str, limit_s: float) -> Built:
        started = time.monotonic()
        if isinstance(self.toolkit, str):
            return Built(name="kernels", path=None, seconds=0.0, reason=self.toolkit)
        folder = self.work / f"kernels-{arch}-{other}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel.cu").write_text(KERNEL, encoding="utf-8")
        log = self.logs / "kernels.log"
        deadline = started + limit_s
        for name, sm in (("kernel-ok.so", arch), ("kernel-wrong.so", other)):
            argv = [str(self.toolkit.nvcc), "-shared", "-Xcompiler", "-fPIC", "-gencode",
                    f"arch=compute_{sm},code=sm_{sm}", "-o", str(folder / name),
                    str(folder / "kernel.cu")]  # fmt: skip
            rc = run_logged(argv, log=log, limit_s=deadline - time.monotonic(),
                            env=self._env(self.toolkit))  # fmt: skip
            if rc != 0:
                return Built(name="kernels", path=None, seconds=time.monotonic() - started,
                             reason=f"nvcc for sm_{sm} exited {rc}: {_tail(log)}")  # fmt: skip
        return Built(name="kernels", path=folder, seconds=time.monotonic() - started,
                     tools=self.toolkit.home / "bin")  # fmt: skip

    def perf(self, arch: str, commit: str, limit_s: float) -> Built:
        started = time.monotonic()
        out = self.work / f"nccl-tests-{commit[:12]}-sm{arch}"
        binary = out / "all_reduce_perf"
        key = f"{commit} sm_{arch}"
        if (done := self._done("all_reduce_perf", key, binary)) is not None:
            return done
        if isinstance(self.toolkit, str):
            return Built(name="all_reduce_perf", path=None, seconds=0.0, reason=self.toolkit)
        log = self.logs / "all_reduce_perf.log"
        src = self.work / "src" / "nccl-tests"
        try:
            unpack(source_path(self.sources, "nccl-tests"), commit, src)
        except Refused as exc:
            return Built(name="all_reduce_perf", path=None, seconds=0.0, reason=str(exc))
        found = process.run([self.python, "-c", "import nvidia.nccl; "
                             "print(list(nvidia.nccl.__path__)[0])"], timeout=60)  # fmt: skip
        nccl = Path(found.out.strip()) if found.ok else None
        if nccl is None or not (nccl / "include/nccl.h").is_file():
            why = f"{self.python} has no nvidia.nccl wheel with include/nccl.h"
            return Built(name="all_reduce_perf", path=None, seconds=0.0, reason=why)
        home = self.work / "nccl-home"
        (home / "lib").mkdir(parents=True, exist_ok=True)
        for link, to in ((home / "include", nccl / "include"),
                         (home / "lib/libnccl.so", nccl / "lib/libnccl.so.2")):  # fmt: skip
            if link.is_symlink():
                link.unlink()
            link.symlink_to(to)
        rc = run_logged(
            ["make", "-C", str(src / "src"), f"-j{os.cpu_count() or 1}",
             f"CUDA_HOME={self.toolkit.home}", f"NCCL_HOME={home}",
             f"NVCC_GENCODE=-gencode=arch=compute_{arch},code=sm_{arch}", f"BUILDDIR={out}",
             str(binary)],
            log=log, limit_s=limit_s, env=self._env(self.toolkit),
        )  # fmt: skip
        seconds = time.monotonic() - started
        if rc != 0:
            return Built(name="all_reduce_perf", path=None, seconds=seconds,
                         reason=f"make exited {rc} (log {log.name}): {_tail(log)}")  # fmt: skip
        self._stamp(binary, key)
        return Built(name="all_reduce_perf", path=binary, seconds=seconds)


def library_path(python: str, toolkit: Toolkit | str, env: Mapping[str, str]) -> str:
    """LD_LIBRARY_PATH for the built tools: torch's wheels' runtime and NCCL, then CUDA_HOME's
    lib64, then what the host already has (its driver's, say)."""
    try:
        got = process.run([python, "-c", LIBRARY_DIRS], timeout=60).out.strip()
    except process.CommandError:
        got = ""
    dirs = [d for d in got.split(":") if d]
    if not isinstance(toolkit, str) and any((toolkit.home / "lib64").glob("libcudart.so*")):
        dirs.append(str(toolkit.home / "lib64"))
    if env.get("LD_LIBRARY_PATH"):
        dirs.append(env["LD_LIBRARY_PATH"])
    return ":".join(dirs)
