"""The rehearsal's fake GPU layer: an interpreter that answers the GPU scripts like one H200.

``python -m twinbuild.smoke.gpu_fake -c SCRIPT [ARGS]`` stands in for the interpreter holding
torch. It knows each script of ``gpu_scripts`` by its text and prints what that script prints on
a healthy H200 (torch 2.13 for CUDA 13.0, driver 580), or on the broken case the environment asks
for, the way the real stack fails: ``CUDA_VISIBLE_DEVICES`` hides the GPU, ``TB_*`` switches a
script's broken case, the pre-fix torch_memory_saver (found on ``PYTHONPATH`` by the stand-in
package the rehearsal built) exits inside ``cudaFree``, torch mode crashes at interpreter exit
after its reading (torch_memory_saver#56) and refuses ``expandable_segments``. Each run says on
stderr how many seconds it stands for on a real host (``tb-fake-seconds: N``): the rehearsal's
clock advances by that, so its budget cut does not depend on this machine's speed.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from twinbuild.smoke import gpu_scripts

#: What the rehearsal's stand-in torch_memory_saver holds: which source it was built from,
#: "pinned" or "pre-fix" (this module imports gpu_scripts alone: it starts for every script).
STANDIN = "TB_STANDIN"
#: Seconds each script takes on the modelled host (one H200, 16 cores): torch's import included.
SECONDS = {"backend": 6, "matmul": 8, "devices": 8, "preload": 4, "free": 15, "torch": 15,
           "tags": 15, "backup": 20, "kernels": 1, "cuobjdump": 1}  # fmt: skip
#: The folder of the rehearsal's launchers (set by each): the kernel script's cuobjdump lies there.
HOME = "TB_FAKE_HOME"
GIB = 1 << 30
MIB = 1 << 20
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"


def _which(script: str) -> str:
    known = {
        gpu_scripts.BACKEND: "backend", gpu_scripts.MATMUL: "matmul",
        gpu_scripts.DEVICES: "devices", gpu_scripts.PRELOAD_LIBRARY: "preload",
        gpu_scripts.MEMORY_SAVER_FREE: "free", gpu_scripts.MEMORY_SAVER_TORCH: "torch",
        gpu_scripts.MEMORY_SAVER_TAGS: "tags", gpu_scripts.MEMORY_SAVER_CPU_BACKUP: "backup",
        gpu_scripts.KERNELS: "kernels",
    }  # fmt: skip
    return known.get(script, "")


def _package() -> str | None:
    """Which stand-in torch_memory_saver is on PYTHONPATH (None: none there)."""
    for entry in os.environ.get("PYTHONPATH", "").split(":"):
        marker = Path(entry or ".") / "torch_memory_saver" / STANDIN
        if entry and marker.is_file():
            return marker.read_text(encoding="utf-8").strip()
    return None


def _gpus() -> int:
    """How many H200s the rehearsal stands for (``TB_FAKE_GPUS``, set by its interpreter)."""
    return int(os.environ.get("TB_FAKE_GPUS") or 1)


def _visible() -> int:
    """The GPUs torch sees: all, narrowed by CUDA_VISIBLE_DEVICES to those that exist."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return _gpus()
    ids = [v.strip() for v in value.split(",") if v.strip()]
    return len([i for i in ids if i.isdigit() and int(i) < _gpus()])


def _devices() -> dict[str, Any]:
    n = _visible()
    ok = n > 0
    return {
        "vendor": "nvidia", "available": ok, "count": n, "nodes": _gpus(),
        "archs": ["9.0"] * n, "names": ["NVIDIA H200"] * n,
        "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
        if ok else [],
        "env": {k: os.environ.get(k) for k in
                ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")},
        "driver": "580.95.05", "driver_cuda": 13000, "cu_init": 0, "libcuda": LIBCUDA,
        "rocm": "", "torch_cuda": "13.0", "torch_hip": None,
    }  # fmt: skip


def _preload_reading() -> dict[str, Any]:
    preload = os.environ.get("LD_PRELOAD", "")
    return {"hook_mode": "preload", "library": preload.split(":")[0], "ld_preload": preload,
            "preload_active": "torch_memory_saver" in preload}  # fmt: skip


def _segfault() -> None:
    """Die of SIGSEGV as a crashing interpreter does (no core file left behind)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), signal.SIGSEGV)


def _out(data: dict[str, Any]) -> None:
    print(json.dumps(data), flush=True)


def _answer(which: str, args: list[str]) -> int:
    env = os.environ
    if which == "backend":
        n = _visible()
        _out({"available": n > 0, "count": n, "cuda": "13.0", "hip": None,
              "name": "NVIDIA H200" if n else None})  # fmt: skip
        return 0
    if which == "matmul":
        tf32 = env.get("TB_MATMUL_TF32") == "1"
        _out({"max_abs_err": 0.0421 if tf32 else 6.1e-05, "close": not tf32, "tf32": tf32})
        return 0
    if which == "devices":
        _out(_devices())
        return 0
    if which == "kernels":
        files = []
        for what in args[1:]:
            path = what.removeprefix("file:")
            found = Path(path).is_file()
            files.append({"what": Path(path).name if found else what,
                          "path": path if found else None})  # fmt: skip
        tool = Path(env.get(HOME, "/nonexistent"), "fake-cuobjdump")
        _out({"tool": "cuobjdump --list-elf", "tool_args": ["--list-elf"],
              "tool_path": str(tool) if tool.is_file() else None, "files": files})  # fmt: skip
        return 0
    role = _package()
    if role is None:
        print("ModuleNotFoundError: No module named 'torch_memory_saver'", file=sys.stderr)
        return 1
    folder = "torch_memory_saver_hook_mode_preload.abi3.so"
    if which == "preload":
        library = f"/rehearsal/{role}/{folder}"
        _out({"library": library, "ld_preload": library})
        return 0
    if which == "torch":
        if "expandable_segments:True" in env.get("PYTORCH_CUDA_ALLOC_CONF", ""):
            print("RuntimeError: TorchMemorySaver is disabled for the current process because "
                  "expandable_segments is not supported yet.", file=sys.stderr)  # fmt: skip
            return 1
        _out({"stage": "configured", "hook_mode": "torch"})
        n = 512 * MIB
        _out({"stage": "done", "hook_mode": "torch", "region_bytes": n,
              "free_before": 100 * GIB, "free_paused": 100 * GIB + n + 2 * MIB,
              "free_resumed": 100 * GIB, "usable_after_resume": True})  # fmt: skip
        print("Fatal Python error: Segmentation fault\n  Garbage-collecting", file=sys.stderr,
              flush=True)  # fmt: skip
        _segfault()  # the known crash at exit, after the work (torch_memory_saver#56)
    reading = _preload_reading()
    _out({"stage": "configured", **reading})
    n = 256 * MIB
    if which == "free":
        if role == "pre-fix":
            print("[torch_memory_saver.cpp] CUresult error result=1 file=csrc/core.cpp "
                  "func=free line=104", file=sys.stderr)  # fmt: skip
            return 1
        _out({**reading, "stage": "done", "region_bytes": 2 * n, "freed_bytes": n,
              "free_before": 100 * GIB, "free_paused": 100 * GIB + 2 * n + 4 * MIB,
              "free_resumed": 100 * GIB + n + 2 * MIB, "free_rc": 0})  # fmt: skip
        return 0
    if which == "tags":
        keep = env.get("TB_TMS_KEEP_TAG") or "default"
        both = keep == "grad_buffer"
        _out({**reading, "stage": "done", "paused_tag": "grad_buffer", "kept_tag": keep,
              "paused_bytes": n, "kept_bytes": n, "free_before": 100 * GIB,
              "free_paused": 100 * GIB + (2 * n if both else n) + 2 * MIB,
              "kept_exact": None if both else True})  # fmt: skip
        return 0
    if which == "backup":
        backup = env.get("TB_TMS_CPU_BACKUP", "1") != "0"
        _out({**reading, "stage": "done", "enable_cpu_backup": backup, "region_bytes": n,
              "free_before": 100 * GIB, "free_paused": 100 * GIB + n + 2 * MIB,
              "backup_exact": True if backup else None, "restored_exact": backup})  # fmt: skip
        return 0
    return 2


def all_reduce_perf(argv: list[str]) -> int:
    """nccl-tests' all_reduce_perf on these GPUs (its output format: src/util.cu): 8 MiB to
    256 MiB by 2, ``-g`` GPUs, ``-c`` 1 checks every result (#wrong 0), 0 leaves them unchecked
    (#wrong N/A, ``validation: 0``); about 360 GB/s of bus bandwidth at the largest size."""
    opts = dict(zip(argv[::2], argv[1::2], strict=False))
    gpus, check = int(opts.get("-g", "1")), opts.get("-c", "1") == "1"
    print(f"tb-fake-seconds: {10 + 2 * gpus}", file=sys.stderr)
    print(f"# nThread 1 nGpus {gpus} minBytes 8388608 maxBytes 268435456 step: 2(factor) "
          f"warmup iters: 1 iters: 20 agg iters: 1 validation: {int(check)} graph: 0")  # fmt: skip
    wrong = "0" if check else "N/A"
    size, total, rows = 8 << 20, 0.0, 0
    while size <= 256 << 20:
        busbw = 360.0 * size / (size + (16 << 20))
        t = size / busbw / 1e3
        half = f"{t:8.1f} {busbw / 1.75:6.2f} {busbw:6.2f} {wrong:>6}"  # time algbw busbw #wrong
        print(f"{size:>12} {size // 4:>12} float sum -1 {half} {half}")
        total, rows, size = total + busbw, rows + 1, size * 2
    print("# Out of bounds values : 0 OK")
    print(f"# Avg bus bandwidth    : {total / rows:.2f}")
    return 0


def cuobjdump(argv: list[str]) -> int:
    """``cuobjdump --list-elf FILE`` on the rehearsal's kernels: each holds the one ``sm_NN`` it
    stands for, listed as cuobjdump lists a cubin of that architecture."""
    print(f"tb-fake-seconds: {SECONDS['cuobjdump']}", file=sys.stderr)
    if argv[:1] != ["--list-elf"] or len(argv) != 2:
        print("cuobjdump (rehearsal): usage: --list-elf FILE", file=sys.stderr)
        return 2
    path = Path(argv[1])
    arch = path.read_text(encoding="utf-8").strip() if path.is_file() else ""
    if arch:
        print(f"ELF file    1: {path.name}.1.{arch}.cubin")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--all-reduce-perf"]:
        return all_reduce_perf(argv[1:])
    if argv[:1] == ["--cuobjdump"]:
        return cuobjdump(argv[1:])
    if len(argv) < 2 or argv[0] != "-c":
        print("gpu_fake: usage: -c SCRIPT [ARGS]", file=sys.stderr)
        return 2
    which = _which(argv[1])
    if not which:
        print("gpu_fake: not one of gpu_scripts' scripts", file=sys.stderr)
        return 2
    print(f"tb-fake-seconds: {SECONDS[which]}", file=sys.stderr)
    return _answer(which, argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
