"""The Python scripts the GPU checks run with the image's Python (container or bare host).

Each prints JSON lines; its last line is the reading ``gpu_checks`` / ``gpu_arch`` judge. They
are plain strings so the checks can run them through testinfra or a subprocess, and the unit
tests can run the very same text against the real torch_memory_saver built on a CPU machine. No
script starts a program: what a check runs, it runs through its shell.
Each torch_memory_saver script prints a ``{"stage": "configured", ...}`` line before its first
call that needs a GPU. The ``TB_*`` variables select a script's broken case (gpu_probe.BROKEN).
"""

from __future__ import annotations

#: torch's backend: available, how many GPUs, which build.
BACKEND = """
import json, torch
ok = torch.cuda.is_available()
print(json.dumps({
    "available": ok,
    "count": torch.cuda.device_count() if ok else 0,
    "cuda": torch.version.cuda,
    "hip": getattr(torch.version, "hip", None),
    "name": torch.cuda.get_device_name(0) if ok else None,
}))
"""

#: A float32 matmul on the GPU against the CPU. ``TB_MATMUL_TF32=1`` lets cuBLAS use TF32 (the
#: broken case: a 10-bit mantissa is far outside float32's tolerance).
MATMUL = """
import json, os, torch
tf32 = os.environ.get("TB_MATMUL_TF32") == "1"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.set_float32_matmul_precision("high" if tf32 else "highest")
g = torch.Generator().manual_seed(0)
a = torch.randn(512, 512, generator=g)
b = torch.randn(512, 512, generator=g)
cpu = a @ b
gpu = (a.cuda() @ b.cuda()).cpu()
print(json.dumps({
    "max_abs_err": (cpu - gpu).abs().max().item(),
    "close": torch.allclose(cpu, gpu, rtol=1e-4, atol=1e-3),
    "tf32": tf32,
}))
"""

#: Where torch_memory_saver's own preload library is, asked of the package itself (what its
#: ``configure_subprocess()`` puts into LD_PRELOAD for a child process).
PRELOAD_LIBRARY = """
import json, os
from torch_memory_saver import configure_subprocess
with configure_subprocess():
    preload = os.environ["LD_PRELOAD"]
print(json.dumps({"library": preload.split(":")[0], "ld_preload": preload}))
"""

# The start of every preload-mode script: the process must start with the library in LD_PRELOAD
# (the pinned package reads it from there and refuses a region without it); the hook is
# interposed when the process's cudaMalloc/hipMalloc is the library's.
_PRELOAD = """
import ctypes, json, os
import torch
from torch_memory_saver import torch_memory_saver as saver
from torch_memory_saver.utils import get_binary_path_from_package

library = str(get_binary_path_from_package("torch_memory_saver_hook_mode_preload"))
prefix = "hip" if getattr(torch.version, "hip", None) else "cuda"
process = ctypes.CDLL(None)

def address(lib, name):
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:
        return None

hooked = address(process, prefix + "Malloc")
ours = address(ctypes.CDLL(library), prefix + "Malloc")
reading = {
    "hook_mode": "preload",
    "library": library,
    "ld_preload": os.environ.get("LD_PRELOAD"),
    "preload_active": hooked is not None and hooked == ours,
}
saver.hook_mode = "preload"
# Load the package's binary now, so a configuration error shows before any GPU call.
saver._ensure_initialized()
print(json.dumps({"stage": "configured", **reading}), flush=True)

def free_memory():
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]
"""

#: Preload mode, free while paused: a region holds two raw 256 MiB buffers from the hooked
#: cudaMalloc/hipMalloc; after pause one is freed through the hooked cudaFree/hipFree
#: (torch_memory_saver's own free path, the one PR #95 fixed: before it, free released the
#: paused handle a second time and the process exited), then resume.
MEMORY_SAVER_FREE = (
    _PRELOAD
    + """
n = 256 << 20
malloc = getattr(process, prefix + "Malloc")
malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
malloc.restype = ctypes.c_int
free = getattr(process, prefix + "Free")
free.argtypes = [ctypes.c_void_p]
free.restype = ctypes.c_int
torch.cuda.init()
with saver.region():
    freed = ctypes.c_void_p()
    kept = ctypes.c_void_p()
    assert malloc(ctypes.byref(freed), n) == 0, prefix + "Malloc in the region failed"
    assert malloc(ctypes.byref(kept), n) == 0, prefix + "Malloc in the region failed"
free_before = free_memory()
saver.pause()
free_paused = free_memory()
free_rc = free(freed)
saver.resume()
free_resumed = free_memory()
reading.update({
    "stage": "done",
    "region_bytes": 2 * n,
    "freed_bytes": n,
    "free_before": free_before,
    "free_paused": free_paused,
    "free_resumed": free_resumed,
    "free_rc": free_rc,
})
print(json.dumps(reading), flush=True)
"""
)

#: hook_mode="torch": torch's MemPool with torch_memory_saver's CUDAPluggableAllocator (no
#: LD_PRELOAD). A tagged 512 MiB tensor is paused and resumed, then written and read back.
MEMORY_SAVER_TORCH = """
import json, os
import torch
from torch_memory_saver import torch_memory_saver as saver

saver.hook_mode = "torch"
saver._ensure_initialized()
print(json.dumps({"stage": "configured", "hook_mode": "torch"}), flush=True)

def free_memory():
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]

n = 512 << 20
with saver.region(tag="weights"):
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
x.fill_(7)
free_before = free_memory()
saver.pause("weights")
free_paused = free_memory()
saver.resume("weights")
free_resumed = free_memory()
x.fill_(42)
print(json.dumps({
    "stage": "done",
    "hook_mode": "torch",
    "region_bytes": n,
    "free_before": free_before,
    "free_paused": free_paused,
    "free_resumed": free_resumed,
    "usable_after_resume": bool((x == 42).all().item()),
}), flush=True)
"""

#: Two tagged regions, as miles uses them: "grad_buffer" is paused, the region tagged
#: ``TB_TMS_KEEP_TAG`` (default "default") must stay resident and bit-exact meanwhile. The broken
#: case tags both regions "grad_buffer". The kept region is read only while the free memory
#: says it is still mapped (reading an unmapped region would kill the process instead).
MEMORY_SAVER_TAGS = (
    _PRELOAD
    + """
keep_tag = os.environ.get("TB_TMS_KEEP_TAG") or "default"
pause_tag = "grad_buffer"
n = 256 << 20
ref = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
torch.cuda.init()
with saver.region(tag=keep_tag):
    kept = ref.to("cuda")
with saver.region(tag=pause_tag):
    paused = torch.zeros(n, dtype=torch.uint8, device="cuda")
free_before = free_memory()
saver.pause(pause_tag)
free_paused = free_memory()
kept_exact = None
if free_paused - free_before < n + n // 2:
    kept_exact = bool(torch.equal(kept.cpu(), ref))
saver.resume(pause_tag)
reading.update({
    "stage": "done",
    "paused_tag": pause_tag,
    "kept_tag": keep_tag,
    "paused_bytes": n,
    "kept_bytes": n,
    "free_before": free_before,
    "free_paused": free_paused,
    "kept_exact": kept_exact,
})
print(json.dumps(reading), flush=True)
"""
)

#: A 256 MiB region of random bytes with ``enable_cpu_backup=True`` (``TB_TMS_CPU_BACKUP=0``:
#: without, the broken case): paused, its backup read while paused (``get_cpu_backup``; only where
#: a backup was requested), resumed, and both compared with the original bytes. Each
#: torch_memory_saver script flushes its reading: a crash at exit must not lose it.
MEMORY_SAVER_CPU_BACKUP = (
    _PRELOAD
    + """
backup = os.environ.get("TB_TMS_CPU_BACKUP", "1") != "0"
n = 256 << 20
ref = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
torch.cuda.init()
with saver.region(tag="backup", enable_cpu_backup=backup):
    x = ref.to("cuda")
free_before = free_memory()
saver.pause("backup")
free_paused = free_memory()
# Without a backup the package aborts inside get_cpu_backup (its SIMPLE_CHECK, csrc/core.cpp L264
# at b5588e83): ask only where one was requested, so the broken case ends in a reading the check
# judges (the bytes resume gives back), not in the package's abort.
copy = saver.get_cpu_backup(x) if backup else None
backup_exact = None if copy is None else bool(torch.equal(copy, ref))
saver.resume("backup")
torch.cuda.synchronize()
reading.update({
    "stage": "done",
    "enable_cpu_backup": backup,
    "region_bytes": n,
    "free_before": free_before,
    "free_paused": free_paused,
    "backup_exact": backup_exact,
    "restored_exact": bool(torch.equal(x.cpu(), ref)),
})
print(json.dumps(reading), flush=True)
"""
)

#: What the container got: device nodes, visibility variables, what torch sees and is built for,
#: each GPU's architecture and name, the driver, the CUDA driver library this process loaded
#: (a ``compat`` folder: CUDA forward compatibility) and what it answers, the toolkits.
DEVICES = """
import ctypes, glob, json, os, re
import torch
hip = getattr(torch.version, "hip", None)
ok = torch.cuda.is_available()
count = torch.cuda.device_count() if ok else 0
archs, names = [], []
for i in range(count):
    p = torch.cuda.get_device_properties(i)
    archs.append(p.gcnArchName if hip else "%d.%d" % (p.major, p.minor))
    names.append(torch.cuda.get_device_name(i))
if hip:
    nodes = len(glob.glob("/dev/dri/renderD*")) if os.path.exists("/dev/kfd") else 0
else:
    nodes = len([p for p in glob.glob("/dev/nvidia*") if re.fullmatch(r"/dev/nvidia[0-9]+", p)])
driver = ""
try:
    with open("/proc/driver/nvidia/version") as f:
        m = re.search(r"Kernel Module\\s+(?:for \\S+\\s+)?([0-9][0-9.]*)", f.read())
        driver = m.group(1) if m else ""
except OSError:
    pass
cu_init = driver_cuda = None
libcuda = ""
if not hip:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        cu_init = int(lib.cuInit(0))
        v = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            driver_cuda = v.value
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/maps") as f:
            libcuda = next((l.split()[-1] for l in f if "libcuda.so" in l), "")
    except OSError:
        pass
rocm = ""
try:
    with open("/opt/rocm/.info/version") as f:
        rocm = f.read().strip()
except OSError:
    pass
keys = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
print(json.dumps({
    "vendor": "amd" if hip else "nvidia",
    "available": ok,
    "count": count,
    "nodes": nodes,
    "archs": archs,
    "names": names,
    "arch_list": torch.cuda.get_arch_list() if ok else [],
    "env": {k: os.environ.get(k) for k in keys},
    "driver": driver,
    "driver_cuda": driver_cuda,
    "cu_init": cu_init,
    "libcuda": libcuda,
    "rocm": rocm,
    "torch_cuda": torch.version.cuda,
    "torch_hip": hip,
}))
"""

#: Where the device code of each module named on the command line (``file:PATH`` names a file)
#: lies, and the vendor's tool that lists it: ``cuobjdump --list-elf`` or ``roc-obj-ls``. A module
#: is found with importlib (its origin, without importing it where it is top-level); the tool on
#: PATH, else in the toolkit's bin folder; "tool_path" is null when there is none. The script
#: starts nothing: the check runs the tool on each file through its own shell
#: (:func:`twinbuild.smoke.gpu_probe.kernel_arch`), as it runs every command.
KERNELS = """
import importlib.util, json, os, shutil, sys
vendor = sys.argv[1]
if vendor == "nvidia":
    name, argv, homes = "cuobjdump", ["--list-elf"], ["/usr/local/cuda/bin"]
else:
    name, argv, homes = "roc-obj-ls", [], ["/opt/rocm/bin", "/opt/rocm/llvm/bin"]
tool = shutil.which(name) or next(
    (os.path.join(h, name) for h in homes if os.access(os.path.join(h, name), os.X_OK)), None)
files = []
for what in sys.argv[2:]:
    if what.startswith("file:"):
        path = what[len("file:"):]
        path = path if os.path.isfile(path) else None
        what = os.path.basename(path) if path else what
    else:
        try:
            spec = importlib.util.find_spec(what)
        except Exception:
            spec = None
        origin = getattr(spec, "origin", None)
        path = origin if origin and os.path.isfile(origin) else None
    files.append({"what": what, "path": path})
print(json.dumps({"tool": " ".join([name, *argv]), "tool_path": tool, "tool_args": argv,
                  "files": files}))
"""
