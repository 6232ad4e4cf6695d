"""The architecture checks: what the image was built for against what the GPU is.

The listings are real tool output (tests/fixtures/gpu/README.md says how each was made):
``cuobjdump --list-elf`` of nccl-tests' all_reduce_perf built for the manifest's archs, of a
kernel built for sm_80, sm_90 and sm_90a, and of a library without device code; ``roc-obj-ls``
where hipcc was there to build one. Where nvcc and cuobjdump are on this machine the last test
compiles kernels and runs the real check on them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from twinbuild.smoke import gpu_arch, gpu_probe

FIXTURES = Path(__file__).parent.parent / "fixtures/gpu"
ELF = "cuobjdump --list-elf"


def _listing(name: str, what: str, rc: int = 0, tool: str = ELF) -> gpu_arch.Listing:
    output = (FIXTURES / name).read_text(encoding="utf-8")
    return gpu_arch.Listing(what=what, path=f"/x/{what}.so", tool=tool, rc=rc, output=output)


def test_compatibility_follows_cudas_rules() -> None:
    assert gpu_arch.runs_on("nvidia", "sm_90", "9.0")
    assert gpu_arch.runs_on(
        "nvidia", "sm_100", "10.3"
    )  # same major, lower minor: B300 runs B200 code
    assert not gpu_arch.runs_on("nvidia", "sm_103", "10.0")
    assert not gpu_arch.runs_on("nvidia", "sm_90", "10.0")  # no binary compatibility across majors
    assert not gpu_arch.runs_on("nvidia", "sm_80", "9.0")
    assert gpu_arch.runs_on("nvidia", "sm_90a", "9.0")
    assert not gpu_arch.runs_on("nvidia", "sm_90a", "9.1")  # arch-specific: exactly that GPU
    assert gpu_arch.runs_on("nvidia", "sm_100f", "10.3")  # family-specific
    assert not gpu_arch.runs_on("nvidia", "compute_90", "9.0")  # PTX needs a JIT: not machine code
    assert gpu_arch.runs_on("amd", "gfx942", "gfx942")
    assert not gpu_arch.runs_on("amd", "gfx942", "gfx950")
    assert gpu_arch.device_target("amd", "gfx942:sramecc+:xnack-") == "gfx942"


def test_real_elf_listings_parse() -> None:
    perf = (FIXTURES / "cuobjdump-list-elf-all_reduce_perf.txt").read_text(encoding="utf-8")
    assert sorted(set(gpu_arch.parse_listing(ELF, perf))) == ["sm_100", "sm_103", "sm_90"]
    sm90a = (FIXTURES / "cuobjdump-list-elf-sm90a.txt").read_text(encoding="utf-8")
    assert set(gpu_arch.parse_listing(ELF, sm90a)) == {"sm_90a"}
    none = (FIXTURES / "cuobjdump-list-elf-host-only.txt").read_text(encoding="utf-8")
    assert gpu_arch.parse_listing(ELF, none) == []


def test_kernels_pass_where_the_gpu_is_among_the_targets() -> None:
    perf = _listing("cuobjdump-list-elf-all_reduce_perf.txt", "all_reduce_perf")
    for gpu in ("9.0", "10.0", "10.3"):
        assert gpu_arch.kernels(vendor="nvidia", listings=[perf], found=[gpu]) == []


def test_kernels_fail_a_wrong_architecture() -> None:
    sm80 = _listing("cuobjdump-list-elf-sm80.txt", "flash_attn_2_cuda")
    assert gpu_arch.kernels(vendor="nvidia", listings=[sm80], found=["9.0"] * 8) == [
        "flash_attn_2_cuda (/x/flash_attn_2_cuda.so) is built for sm_80: no machine code for "
        "GPU compute capability 9.0"
    ]
    sm90a = _listing("cuobjdump-list-elf-sm90a.txt", "flash_attn_3._C")
    assert gpu_arch.kernels(vendor="nvidia", listings=[sm90a], found=["9.0"]) == []
    assert gpu_arch.kernels(vendor="nvidia", listings=[sm90a], found=["10.0"])[0].endswith(
        "is built for sm_90a: no machine code for GPU compute capability 10.0"
    )


def test_kernels_never_pass_vacuously() -> None:
    host = _listing("cuobjdump-list-elf-host-only.txt", "amp_C", rc=255)
    (problem,) = gpu_arch.kernels(vendor="nvidia", listings=[host], found=["9.0"])
    assert problem.startswith("amp_C (/x/amp_C.so): cuobjdump --list-elf found no device code")
    missing = gpu_arch.Listing(what="causal_conv1d_cuda", path=None, tool=ELF, rc=0, output="")
    assert gpu_arch.kernels(vendor="nvidia", listings=[missing], found=["9.0"]) == [
        "causal_conv1d_cuda: not installed (no module of that name)"
    ]
    assert gpu_arch.kernels(vendor="nvidia", listings=[], found=["9.0"]) == [
        "no kernel module to read: name them in variants.<v>.kernel_modules"
    ]
    perf = _listing("cuobjdump-list-elf-all_reduce_perf.txt", "all_reduce_perf")
    assert gpu_arch.kernels(vendor="nvidia", listings=[perf], found=[]) == [
        "no GPU architecture could be read"
    ]


def test_torch_arch_list() -> None:
    # torch 2.11+cu130's list (as torch.cuda.get_arch_list() prints it for the cu130 wheels).
    cu130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_110", "sm_120", "compute_120"]
    assert gpu_arch.torch_archs(vendor="nvidia", arch_list=cu130, found=["9.0"]) == []
    assert gpu_arch.torch_archs(vendor="nvidia", arch_list=cu130, found=["10.3"]) == []
    wrong = ["sm_80", "sm_86", "compute_90"]  # the proof's broken case: no sm_9x machine code
    assert gpu_arch.torch_archs(vendor="nvidia", arch_list=wrong, found=["9.0"]) == [
        "torch is built for sm_80, sm_86, compute_90, which has no machine code for GPU "
        "compute capability 9.0"
    ]
    assert gpu_arch.torch_archs(vendor="nvidia", arch_list=[], found=["9.0"])[0].startswith(
        "torch.cuda.get_arch_list() is empty"
    )
    rocm = ["gfx942", "gfx950"]
    assert gpu_arch.torch_archs(vendor="amd", arch_list=rocm, found=["gfx950"]) == []
    assert gpu_arch.torch_archs(vendor="amd", arch_list=["gfx942"], found=["gfx950"]) == [
        "torch is built for gfx942, which has no machine code for GPU architecture gfx950"
    ]


def test_declared_archs_must_cover_every_gpu() -> None:
    rocm = ("gfx942", "gfx950")
    assert gpu_arch.declared(vendor="amd", archs=rocm, found=["gfx942:sramecc+:xnack-"] * 8) == []
    assert gpu_arch.declared(vendor="amd", archs=rocm, found=["gfx90a:sramecc+:xnack-"]) == [
        "GPU architecture gfx90a is not one this image is built for (gfx942, gfx950): "
        "use a build for it, or add it to gpu_archs and rebuild"
    ]
    cuda = ("9.0", "10.0", "10.3")
    assert gpu_arch.declared(vendor="nvidia", archs=cuda, found=["9.0"]) == []
    assert gpu_arch.declared(vendor="nvidia", archs=cuda, found=["8.0"])[0].startswith(
        "GPU compute capability 8.0 is not one"
    )
    assert gpu_arch.declared(vendor="nvidia", archs=cuda, found=[]) == [
        "no GPU architecture could be read"
    ]


def test_roc_obj_ls_listings() -> None:
    one = _listing("roc-obj-ls-gfx90a.txt", "k", tool="roc-obj-ls")
    assert gpu_arch.parse_listing("roc-obj-ls", one.output) == ["gfx90a"]
    assert gpu_arch.kernels(vendor="amd", listings=[one], found=["gfx90a:sramecc+:xnack-"]) == []
    assert gpu_arch.kernels(vendor="amd", listings=[one], found=["gfx950"]) == [
        "k (/x/k.so) is built for gfx90a: no machine code for GPU architecture gfx950"
    ]
    two = _listing("roc-obj-ls-gfx90a-gfx908.txt", "k2", tool="roc-obj-ls")
    assert gpu_arch.parse_listing("roc-obj-ls", two.output) == ["gfx908", "gfx90a"]
    assert gpu_arch.kernels(vendor="amd", listings=[two], found=["gfx908", "gfx90a"]) == []
    host = _listing("roc-obj-ls-host-only.txt", "h", rc=255, tool="roc-obj-ls")
    (problem,) = gpu_arch.kernels(vendor="amd", listings=[host], found=["gfx90a"])
    assert problem == (
        "h (/x/h.so): roc-obj-ls found no device code (exit 255: Error: No kernel section "
        "found); a kernel module holds device code"
    )


def _cuobjdump() -> str | None:
    for candidate in (os.environ.get("TWINBUILD_CUOBJDUMP"), shutil.which("cuobjdump"),
                      "/usr/local/cuda/bin/cuobjdump"):  # fmt: skip
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_the_kernel_check_on_kernels_compiled_here(tmp_path: Path) -> None:
    """The check's own script (gpu_scripts.KERNELS, through gpu_probe) runs the real cuobjdump
    on kernels nvcc builds here for sm_90 and sm_80, and a GPU of 9.0 passes one, fails the
    other."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda-13.0/bin/nvcc"
    tool = _cuobjdump()
    if not os.access(nvcc, os.X_OK):
        pytest.skip("no nvcc to compile a kernel with")
    if tool is None:
        pytest.skip("no cuobjdump: set TWINBUILD_CUOBJDUMP (pip's nvidia-cuda-cuobjdump has one)")
    source = tmp_path / "k.cu"
    source.write_text(
        'extern "C" __global__ void tb_fill(char *p, char v) { p[threadIdx.x] = v; }\n',
        encoding="utf-8",
    )
    built = {}
    for sm in ("90", "80"):
        out = tmp_path / f"k_sm{sm}.so"
        subprocess.run(
            [nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode",
             f"arch=compute_{sm},code=sm_{sm}", "-o", str(out), str(source)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        built[sm] = str(out)

    def local(argv: object) -> gpu_probe.Ran:
        words = [str(w) for w in argv]  # type: ignore[attr-defined]
        proc = subprocess.run(words, capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "PATH": f"{Path(tool).parent}:{os.environ['PATH']}"})  # fmt: skip
        return gpu_probe.Ran(rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)

    probe = gpu_probe.Probe(vendor="nvidia", variant="cuda", python=sys.executable,
                            toolkit="13.0")  # fmt: skip
    reading = {"archs": ["9.0"]}
    good = gpu_probe.kernel_arch(local, probe, reading, files=[built["90"]], modules=[])
    assert (good.outcome, good.readings["targets"]) == ("passed", {"k_sm90.so": ["sm_90"]})
    bad = gpu_probe.kernel_arch(local, probe, reading, files=[built["80"]], modules=["nope_x"])
    assert bad.outcome == "failed"
    assert bad.reasons == (
        "nope_x: not installed (no module of that name)",
        f"k_sm80.so ({built['80']}) is built for sm_80: no machine code for GPU compute "
        "capability 9.0",
    )
