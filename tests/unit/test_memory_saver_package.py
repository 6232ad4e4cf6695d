"""The torch_memory_saver checks against the real package, built here from the pinned commit and
from its pre-fix parent (the GPU proof's broken case).

A CPU machine cannot pause VRAM, but it can show that each check's configuration is the one the
pinned package accepts, up to the first call that needs a GPU: the package finds its preload
library, loads it, and the hook is interposed; preload mode without LD_PRELOAD is refused by the
package itself. The pre-fix parent configures the same way, so on a GPU its only difference is
the free path PR #95 fixed.

Needs: ``TWINBUILD_TMS_SRC`` (a checkout of the pinned commit; ``scripts/gpu-host-tools.sh
fetch`` makes one), optionally ``TWINBUILD_TMS_PARENT_SRC`` (one of its pre-fix parent), CUDA's
``nvcc`` (13.x), a C compiler, and a torch 2.13 wheel that pip can install without downloading
(pip's find-links). Each missing piece skips with its reason. The CUDA driver library is absent on
such a machine; a stand-in (tests/fixtures/gpu/libcuda_stub.c) answers every driver call with
CUDA_ERROR_NO_DEVICE, as the real one does without a GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from twinbuild.manifest.loader import load
from twinbuild.smoke import gpu_checks, gpu_scripts
from twinbuild.smoke.gpu_build import PRE_FIX_TMS

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "tests/fixtures/gpu/libcuda_stub.c"
TORCH = "torch==2.13.0"
PRELOAD_SCRIPTS = {
    "free": gpu_scripts.MEMORY_SAVER_FREE,
    "tags": gpu_scripts.MEMORY_SAVER_TAGS,
    "cpu-backup": gpu_scripts.MEMORY_SAVER_CPU_BACKUP,
}
#: The guard PR #95 (d7a3a51) put into TorchMemorySaver::free.
GUARD = "if (AllocationState::ACTIVE == metadata.state) {"


@dataclass(frozen=True, slots=True)
class Toolchain:
    python: str
    cuda_home: Path
    stub: Path
    work: Path


@dataclass(frozen=True, slots=True)
class Package:
    python: str
    env: dict[str, str]
    src: Path


def _pinned_commit() -> str:
    pin = load(ROOT / "pins/manifest.toml").find("torch-memory-saver")
    assert pin is not None
    assert pin.common.commit is not None
    return pin.common.commit


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(argv[:4])}...: {(proc.stderr or proc.stdout)[-800:]}")
    return proc.stdout


def _cuda_home() -> Path | None:
    """CUDA_HOME, else /usr/local/cuda, else the toolkit above nvcc: one with nvcc and headers."""
    nvcc = shutil.which("nvcc")
    candidates = [os.environ.get("CUDA_HOME"), "/usr/local/cuda", "/usr/local/cuda-13.0"]
    if nvcc is not None:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for candidate in filter(None, candidates):
        home = Path(candidate)
        if (home / "bin/nvcc").is_file() and (home / "include/cuda_runtime.h").is_file():
            return home
    return None


def _checkout(variable: str, commit: str) -> Path:
    src = os.environ.get(variable)
    if not src:
        pytest.skip(f"{variable} unset: point it at a torch_memory_saver checkout of {commit}")
    head = subprocess.run(
        ["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if head != commit:
        pytest.skip(f"{variable}={src} is at {head or '(no git)'}, not {commit}")
    return Path(src)


@pytest.fixture(scope="session")
def toolchain(tmp_path_factory: pytest.TempPathFactory) -> Toolchain:
    if not os.environ.get("TWINBUILD_TMS_SRC"):
        pytest.skip(
            f"TWINBUILD_TMS_SRC unset: point it at a torch_memory_saver checkout of "
            f"{_pinned_commit()} (scripts/gpu-host-tools.sh fetch)"
        )
    cuda_home = _cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit (nvcc and headers): needed to build torch_memory_saver")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler for the stand-in driver library")
    if shutil.which("hipcc") is not None:
        pytest.skip("hipcc is on PATH: torch_memory_saver's setup.py would build for ROCm")
    work = tmp_path_factory.mktemp("tms")
    wheels = work / "wheels"
    local = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-index", "--no-deps", TORCH,
         "-d", str(wheels)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if local.returncode != 0:
        pytest.skip(
            f"no {TORCH} wheel pip can install without downloading (its find-links); a unit test "
            "does not fetch torch"
        )
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin/python")
    _run([python, "-m", "pip", "install", "-q", *map(str, wheels.glob("*.whl")), "numpy",
          "setuptools", "wheel"])  # fmt: skip
    stub = work / "driver"
    stub.mkdir()
    _run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(stub / "libcuda.so.1"),
          str(STUB)])  # fmt: skip
    (stub / "libcuda.so").symlink_to("libcuda.so.1")
    return Toolchain(python=python, cuda_home=cuda_home, stub=stub, work=work)


def _build(tools: Toolchain, src: Path, name: str) -> Package:
    """pip --target, as scripts/gpu-proof.sh builds each variant: one folder on PYTHONPATH."""
    target = tools.work / name
    build_env = {
        **os.environ,
        "PATH": f"{tools.cuda_home / 'bin'}:{os.environ['PATH']}",
        "CUDA_HOME": str(tools.cuda_home),
        "TMS_CUDA_MAJOR": "13",  # what the CUDA recipe passes from torch.version.cuda
        "LIBRARY_PATH": str(tools.stub),
    }
    copy = tools.work / f"{name}-src"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns(".git"))
    _run([tools.python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
          "--target", str(target), str(copy)], env=build_env)  # fmt: skip
    # A CPU torch has no torch.version.cuda, so the package probes libcudart.so.13 (utils.py).
    run_env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(target),
        "LD_LIBRARY_PATH": f"{tools.cuda_home / 'lib64'}:{tools.stub}",
    }
    return Package(python=tools.python, env=run_env, src=src)


@pytest.fixture(scope="session")
def package(toolchain: Toolchain) -> Package:
    return _build(toolchain, _checkout("TWINBUILD_TMS_SRC", _pinned_commit()), "pinned")


@pytest.fixture(scope="session")
def parent(toolchain: Toolchain) -> Package:
    return _build(toolchain, _checkout("TWINBUILD_TMS_PARENT_SRC", PRE_FIX_TMS), "prefix")


def _script(pkg: Package, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [pkg.python, "-c", script], capture_output=True, text=True,
        env={**pkg.env, **env}, timeout=300, check=False,
    )  # fmt: skip


def _preload(pkg: Package) -> dict[str, str]:
    found = _script(pkg, gpu_scripts.PRELOAD_LIBRARY)
    assert found.returncode == 0, found.stderr
    where: dict[str, str] = json.loads(found.stdout.strip().splitlines()[-1])
    return where


def _configured_then_no_gpu(pkg: Package, script: str, **env: str) -> dict[str, object]:
    run = _script(pkg, script, **env)
    first: dict[str, object] = json.loads(run.stdout.strip().splitlines()[0])
    assert first["stage"] == "configured"
    # ... and the first thing that fails is the first call that needs a GPU, not the package.
    assert run.returncode != 0
    assert "Torch not compiled with CUDA enabled" in run.stderr
    assert "LD_PRELOAD" not in run.stderr
    return first


@pytest.mark.parametrize("which", sorted(PRELOAD_SCRIPTS))
def test_each_preload_check_configures_what_the_pinned_package_accepts(
    package: Package, which: str
) -> None:
    where = _preload(package)
    assert Path(where["library"]).name == "torch_memory_saver_hook_mode_preload_cu13.abi3.so"
    assert Path(where["library"]).is_file()
    first = _configured_then_no_gpu(package, PRELOAD_SCRIPTS[which], LD_PRELOAD=where["ld_preload"])
    assert first["preload_active"] is True  # cudaMalloc resolves into the package's library
    # A CPU run never passes: there are no memory readings to judge.
    judge = {
        "free": gpu_checks.memory_saver_free,
        "tags": gpu_checks.memory_saver_tags,
        "cpu-backup": gpu_checks.memory_saver_cpu_backup,
    }[which]
    assert judge(first)[-1].startswith("torch_memory_saver")
    assert "incomplete readings" in judge(first)[-1]


def test_torch_mode_loads_the_packages_torch_allocator(package: Package) -> None:
    run = _script(package, gpu_scripts.MEMORY_SAVER_TORCH)
    assert run.returncode != 0
    # The package finds its torch-mode library, loads it and hands its tms_torch_malloc/free to
    # torch's CUDAPluggableAllocator, which a CPU build of torch cannot register: the failure is
    # torch's missing CUDA, not the package.
    assert "CUDAPluggableAllocator(self.get_path_binary()" in run.stderr
    assert "has no attribute '_cuda_customAllocator'" in run.stderr
    assert "expected exactly one .so" not in run.stderr
    assert '"stage": "configured"' not in run.stdout
    assert gpu_checks.memory_saver_torch({})


def test_preload_mode_without_ld_preload_is_refused_by_the_package(package: Package) -> None:
    # The previous check looked for hasattr(saver, "hook_mode") to switch to torch mode; the
    # getter raises AttributeError, so it stayed in preload mode without LD_PRELOAD.
    probe = _script(
        package,
        "from torch_memory_saver import torch_memory_saver as s; print(hasattr(s, 'hook_mode'))",
    )
    assert probe.stdout.strip() == "False"
    run = _script(package, gpu_scripts.MEMORY_SAVER_FREE)
    assert run.returncode != 0
    assert "TorchMemorySaver observes invalid LD_PRELOAD" in run.stderr
    assert '"stage": "configured"' not in run.stdout


def _free_body(core_cpp: str) -> str:
    """The body of TorchMemorySaver::free in csrc/core.cpp."""
    return core_cpp.split("TorchMemorySaver::free(", 1)[1].split("\n}\n", 1)[0]


def test_the_pre_fix_parent_differs_only_in_the_free_path(
    package: Package, parent: Package
) -> None:
    """The proof's broken case is the real pre-fix code: its free() lacks PR #95's guard, and it
    configures exactly like the pinned build, so on a GPU only free-while-paused tells them
    apart."""
    pinned_core = (package.src / "csrc/core.cpp").read_text(encoding="utf-8")
    parent_core = (parent.src / "csrc/core.cpp").read_text(encoding="utf-8")
    assert GUARD in _free_body(pinned_core)
    assert GUARD not in _free_body(parent_core)
    where = _preload(parent)
    first = _configured_then_no_gpu(parent, gpu_scripts.MEMORY_SAVER_FREE,
                                    LD_PRELOAD=where["ld_preload"])  # fmt: skip
    assert first["preload_active"] is True
