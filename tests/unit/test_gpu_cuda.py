"""Finding CUDA the way CUDA's tools do (``gpu_cuda.find``): CUDA_HOME, then nvcc's own report of
its folder, then /usr/local/cuda; one line says which, and none usable says what each lacked.

The wrapper case is the one that broke the proof: ``nvcc`` on PATH a shell script elsewhere
(``/usr/local/bin/nvcc`` running ``exec /usr/local/cuda-13.0/bin/nvcc``), where the folder above
``readlink -f nvcc`` is ``/usr/local`` and has no CUDA headers. It runs against the real nvcc where
this machine has one, and against a toolkit laid out in the test everywhere.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from twinbuild.smoke import gpu_cuda

#: What a toolkit's nvcc answers to the two questions gpu_cuda asks (nvcc.profile's TOP is
#: $(_HERE_)/.., the folder of the nvcc binary itself, whatever ran it).
NVCC = """#!/bin/sh
case "$*" in
  *--dryrun*) echo "#\\$ _HERE_=$(dirname "$0")"; echo "#\\$ TOP=$(dirname "$0")/.." >&2 ;;
  *--list-gpu-arch*) printf 'compute_80\\ncompute_90\\n' ;;
esac
"""


def _toolkit(home: Path, *, headers: bool = True) -> Path:
    (home / "bin").mkdir(parents=True)
    (home / "bin/nvcc").write_text(NVCC, encoding="utf-8")
    (home / "bin/nvcc").chmod(0o755)
    if headers:
        (home / "include").mkdir()
        (home / "include/cuda_runtime.h").write_text("/* test */\n", encoding="utf-8")
    return home


def _wrapper(folder: Path, target: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "nvcc").write_text(f'#!/bin/sh\nexec "{target}" "$@"\n', encoding="utf-8")
    (folder / "nvcc").chmod(0o755)
    return folder


def _which(folder: Path) -> Callable[[str], str | None]:
    return lambda name: shutil.which(name, path=str(folder))


def test_cuda_home_comes_first(tmp_path: Path) -> None:
    home = _toolkit(tmp_path / "cuda-13.0")
    found = gpu_cuda.find({"CUDA_HOME": str(home)}, which=lambda _n: None,
                          default=tmp_path / "none")  # fmt: skip
    assert isinstance(found, gpu_cuda.Toolkit)
    assert found.line() == f"cuda: {home} (from CUDA_HOME)"
    assert found.archs == ("compute_80", "compute_90")


def test_a_wrapper_nvcc_elsewhere_on_path_reports_its_real_folder(tmp_path: Path) -> None:
    """nvcc on PATH is a shell script in another folder: its own report names the toolkit."""
    home = _toolkit(tmp_path / "opt/cuda-13.0")
    wrappers = _wrapper(tmp_path / "usr-local-bin", home / "bin/nvcc")
    found = gpu_cuda.find({}, which=_which(wrappers), default=tmp_path / "none")
    assert isinstance(found, gpu_cuda.Toolkit)
    assert found.home == home
    assert found.line() == f"cuda: {home} (from nvcc's own report: {wrappers / 'nvcc'})"


@pytest.mark.skipif(
    not Path("/usr/local/cuda-13.0/bin/nvcc").is_file(), reason="no CUDA 13.0 toolkit here"
)
def test_the_real_nvcc_behind_a_wrapper_reports_its_toolkit(tmp_path: Path) -> None:
    """The real thing: a wrapper script exec'ing CUDA 13's nvcc, as /usr/local/bin/nvcc is here.
    CUDA_HOME is unset and readlink -f of the wrapper is the wrapper itself."""
    wrappers = _wrapper(tmp_path / "bin", Path("/usr/local/cuda-13.0/bin/nvcc"))
    found = gpu_cuda.find({}, which=_which(wrappers), default=tmp_path / "none")
    assert isinstance(found, gpu_cuda.Toolkit), found
    assert found.home == Path("/usr/local/cuda-13.0")
    assert "compute_90" in found.archs


def test_a_cuda_home_without_headers_falls_through_and_says_so(tmp_path: Path) -> None:
    bare = _toolkit(tmp_path / "bare", headers=False)
    default = _toolkit(tmp_path / "usr-local-cuda")
    found = gpu_cuda.find({"CUDA_HOME": str(bare)}, which=lambda _n: None, default=default)
    assert isinstance(found, gpu_cuda.Toolkit)
    assert found.line() == f"cuda: {default} (from {default})"


def test_no_usable_toolkit_says_what_each_place_lacked(tmp_path: Path) -> None:
    bare = _toolkit(tmp_path / "bare", headers=False)
    missing = gpu_cuda.find({"CUDA_HOME": str(bare)}, which=lambda _n: None,
                            default=tmp_path / "none")  # fmt: skip
    assert missing == (
        f"no usable CUDA toolkit: CUDA_HOME={bare} has no include/cuda_runtime.h; no nvcc on "
        f"PATH; {tmp_path / 'none'} has no bin/nvcc and include/cuda_runtime.h (install CUDA 13 "
        "or set CUDA_HOME)"
    )
    silent = _wrapper(tmp_path / "silent", Path(os.devnull))
    unset = gpu_cuda.find({}, which=_which(silent), default=tmp_path / "none")
    assert isinstance(unset, str)
    assert unset.startswith(
        f"no usable CUDA toolkit: CUDA_HOME is unset; {silent / 'nvcc'} did not report its "
        "folder (nvcc --dryrun gave no TOP=)"
    )
