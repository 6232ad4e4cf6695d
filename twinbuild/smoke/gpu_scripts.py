"""The Python scripts the GPU checks run with the image's Python (container or bare host).

Each prints JSON lines; its last line is the reading ``gpu_checks`` judges. They are plain
strings so the suite can run them through testinfra and the unit tests can run the very same
text against the real torch_memory_saver built on a CPU machine.
"""

from __future__ import annotations

#: Where torch_memory_saver's own preload library is, asked of the package itself (what its
#: ``configure_subprocess()`` puts into LD_PRELOAD for a child process).
PRELOAD_LIBRARY = """
import json, os
from torch_memory_saver import configure_subprocess
with configure_subprocess():
    preload = os.environ["LD_PRELOAD"]
print(json.dumps({"library": preload.split(":")[0], "ld_preload": preload}))
"""

#: torch_memory_saver in preload mode (the process must start with the library in LD_PRELOAD:
#: the pinned package reads it from there and refuses a region without it). The check pauses a
#: region holding a kept tensor (CPU backup) and a raw buffer, frees the buffer while paused
#: through the hooked cudaFree/hipFree (torch_memory_saver's own free path, the one PR #95
#: fixed), resumes, and reports device free memory at each step. The first line ("configured")
#: comes before any call that needs a GPU.
MEMORY_SAVER = """
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

n = 256 << 20
malloc = getattr(process, prefix + "Malloc")
malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
free = getattr(process, prefix + "Free")
free.argtypes = [ctypes.c_void_p]
torch.cuda.init()
with saver.region(enable_cpu_backup=True):
    kept = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
    buffer = ctypes.c_void_p()
    assert malloc(ctypes.byref(buffer), n) == 0, prefix + "Malloc in the region failed"
reference = kept.cpu().clone()
torch.cuda.synchronize()
free_before = torch.cuda.mem_get_info()[0]
saver.pause()
torch.cuda.synchronize()
free_paused = torch.cuda.mem_get_info()[0]
free_rc = free(buffer)
saver.resume()
torch.cuda.synchronize()
free_resumed = torch.cuda.mem_get_info()[0]
reading.update({
    "stage": "done",
    "region_bytes": 2 * n,
    "freed_bytes": n,
    "free_before": free_before,
    "free_paused": free_paused,
    "free_resumed": free_resumed,
    "free_rc": free_rc,
    "bit_exact": bool(torch.equal(kept.cpu(), reference)),
})
print(json.dumps(reading))
"""

#: What the container got: device nodes, visibility variables, what torch sees, each GPU's
#: architecture, the driver and the toolkits.
DEVICES = """
import glob, json, os, re
import torch
hip = getattr(torch.version, "hip", None)
ok = torch.cuda.is_available()
count = torch.cuda.device_count() if ok else 0
archs = []
for i in range(count):
    p = torch.cuda.get_device_properties(i)
    archs.append(p.gcnArchName if hip else "%d.%d" % (p.major, p.minor))
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
    "env": {k: os.environ.get(k) for k in keys},
    "driver": driver,
    "rocm": rocm,
    "torch_cuda": torch.version.cuda,
    "torch_hip": hip,
}))
"""
