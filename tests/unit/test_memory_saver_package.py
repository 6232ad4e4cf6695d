"""The torch_memory_saver check against the real package, built here from the pinned commit.

A CPU machine cannot pause VRAM, but it can show that the configuration the check chooses is the
one the pinned package accepts, up to the first call that needs a GPU: the package finds its
preload library, loads it, and the hook is interposed; the old check's configuration (preload
mode without LD_PRELOAD) is refused by the package itself.

Needs: ``TWINBUILD_TMS_SRC`` (a checkout of the pinned commit; ``scripts/gpu-host-tools.sh
fetch`` makes one), CUDA's ``nvcc`` (13.x), a C compiler, and a torch 2.13 wheel that pip can
install without downloading (pip's find-links). Each missing piece skips with its reason. The
CUDA driver library is absent on such a machine; a stand-in (tests/fixtures/gpu/libcuda_stub.c)
answers every driver call with CUDA_ERROR_NO_DEVICE, as the real one does without a GPU.
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

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "tests/fixtures/gpu/libcuda_stub.c"
TORCH = "torch==2.13.0"


@dataclass(frozen=True, slots=True)
class Package:
    python: str
    env: dict[str, str]


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
    candidates = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    if nvcc is not None:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for candidate in filter(None, candidates):
        home = Path(candidate)
        if (home / "bin/nvcc").is_file() and (home / "include/cuda_runtime.h").is_file():
            return home
    return None


@pytest.fixture(scope="session")
def package(tmp_path_factory: pytest.TempPathFactory) -> Package:
    src = os.environ.get("TWINBUILD_TMS_SRC")
    commit = _pinned_commit()
    if not src:
        pytest.skip(
            f"TWINBUILD_TMS_SRC unset: point it at a torch_memory_saver checkout of {commit} "
            "(scripts/gpu-host-tools.sh fetch)"
        )
    head = subprocess.run(
        ["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if head != commit:
        pytest.skip(
            f"TWINBUILD_TMS_SRC={src} is at {head or '(no git)'}, the manifest pins {commit}"
        )
    cuda_home = _cuda_home()
    if cuda_home is None:
        pytest.skip("no CUDA toolkit (nvcc and headers): needed to build torch_memory_saver")
    if shutil.which("cc") is None:
        pytest.skip("no C compiler for the stand-in driver library")
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
    build_env = {
        **os.environ,
        "PATH": f"{cuda_home / 'bin'}:{os.environ['PATH']}",
        "CUDA_HOME": str(cuda_home),
        "TMS_CUDA_MAJOR": "13",  # what the CUDA recipe passes from torch.version.cuda
        "LIBRARY_PATH": str(stub),
    }
    _run([python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", src],
         env=build_env)  # fmt: skip
    # A CPU torch has no torch.version.cuda, so the package probes libcudart.so.13 (utils.py).
    run_env = {
        "PATH": os.environ["PATH"],
        "LD_LIBRARY_PATH": f"{cuda_home / 'lib64'}:{stub}",
    }
    return Package(python=python, env=run_env)


def _script(pkg: Package, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [pkg.python, "-c", script], capture_output=True, text=True,
        env={**pkg.env, **env}, timeout=300, check=False,
    )  # fmt: skip


def test_the_check_configures_what_the_pinned_package_accepts(package: Package) -> None:
    found = _script(package, gpu_scripts.PRELOAD_LIBRARY)
    assert found.returncode == 0, found.stderr
    where = json.loads(found.stdout.strip().splitlines()[-1])
    assert Path(where["library"]).name == "torch_memory_saver_hook_mode_preload_cu13.abi3.so"
    assert Path(where["library"]).is_file()

    run = _script(package, gpu_scripts.MEMORY_SAVER, LD_PRELOAD=where["ld_preload"])
    first = json.loads(run.stdout.strip().splitlines()[0])
    assert first["stage"] == "configured"
    assert first["preload_active"] is True  # cudaMalloc resolves into the package's library
    # ... and the first thing that fails is the first call that needs a GPU, not the package.
    assert run.returncode != 0
    assert "Torch not compiled with CUDA enabled" in run.stderr
    assert "LD_PRELOAD" not in run.stderr
    # A CPU run never passes: there are no memory readings to judge.
    assert gpu_checks.memory_saver(first)[-1].startswith("torch_memory_saver: incomplete readings")


def test_the_old_configuration_is_refused_by_the_pinned_package(package: Package) -> None:
    # The previous check looked for hasattr(saver, "hook_mode") to switch to torch mode; the
    # getter raises AttributeError, so it stayed in preload mode without LD_PRELOAD.
    probe = _script(
        package,
        "from torch_memory_saver import torch_memory_saver as s; print(hasattr(s, 'hook_mode'))",
    )
    assert probe.stdout.strip() == "False"
    run = _script(package, gpu_scripts.MEMORY_SAVER)
    assert run.returncode != 0
    assert "TorchMemorySaver observes invalid LD_PRELOAD" in run.stderr
    assert '"stage": "configured"' not in run.stdout
