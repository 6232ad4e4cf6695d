"""Pass or fail for each GPU check, from what the check measured: pure functions over data.

The checks run the measurements (``gpu_scripts``, ``all_reduce_perf``) in the image or on the
host and hand the readings here; the unit tests feed the same functions healthy and broken
readings. Each function returns the list of problems: empty means the check passed. None of them
can pass on missing data: a reading that is absent or not a number is itself a problem. The
architecture and all-reduce judgements live in ``gpu_arch`` and ``gpu_collective``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: pause must hand back at least this share of the region's bytes ("most of the region"): VMM
#: rounds each allocation up to its granularity, so a healthy pause releases a bit more than the
#: tensors' bytes, never much less; ROCm 7.2 without the ROCr VMM fix releases none.
RELEASED_SHARE = 0.9
#: A region that stays resident may lose at most this share of its bytes while another pauses.
KEPT_SHARE = 0.5

#: NVIDIA's rule, from the CUDA Compatibility guide (docs.nvidia.com/deploy/cuda-compatibility),
#: "Minor Version Compatibility", table "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version Ranges":
#: from CUDA 11 on, a build with any toolkit of a major release runs on a driver of that major's
#: minimum or newer (13.x: >= 580, 12.x: >= 525; newer drivers through backward compatibility),
#: "with limited feature-set": the exceptions below. An older driver runs it only through
#: "Forward Compatibility": the cuda-compat-<major>-<minor> package's user-mode libcuda is what the
#: process loads, and a CUDA call succeeds (data-center GPUs; cuInit returns 804,
#: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, elsewhere).
MIN_NVIDIA_DRIVER: dict[int, tuple[int, ...]] = {12: (525, 60, 13), 13: (580,)}
#: The guide's exceptions to minor version compatibility, named wherever the rule is applied.
MINOR_COMPAT_EXCEPTIONS = (
    "PTX JIT: PTX from a newer toolkit than the driver's fails to load "
    "(cudaErrorUnsupportedPtxVersion), so kernels must carry machine code for the GPU; "
    "APIs and features that need a newer driver return cudaErrorCallRequiresNewerDriver"
)

#: How long a GPU script (torch, torch_memory_saver) may run.
SCRIPT_TIMEOUT_S = 600
#: ``timeout``'s exit code when it stopped the command (coreutils; 137 after -k's SIGKILL).
TIMED_OUT = (124, 137)


def _number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _numbers(data: Mapping[str, Any], keys: Sequence[str]) -> dict[str, float] | None:
    """All of ``keys`` as numbers, or None when one is missing or not a number."""
    got = {k: _number(data, k) for k in keys}
    if any(v is None for v in got.values()):
        return None
    return {k: float(v) for k, v in got.items() if v is not None}


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def _incomplete(what: str, data: Mapping[str, Any]) -> str:
    return f"{what}: incomplete readings {dict(data)}"


# -- torch backend ---------------------------------------------------------------------------------


def backend(data: Mapping[str, Any], *, vendor: str) -> list[str]:
    """torch's GPU backend: available, at least one GPU, the build of the variant's vendor."""
    problems: list[str] = []
    if data.get("available") is not True:
        problems.append("torch.cuda.is_available() is False: torch sees no GPU")
    count = _number(data, "count")
    if count is None or count < 1:
        problems.append(f"torch sees {data.get('count')} GPUs")
    if vendor == "nvidia" and not (data.get("cuda") and not data.get("hip")):
        problems.append(f"expected a CUDA build of torch, found cuda={data.get('cuda')!r} "
                        f"hip={data.get('hip')!r}")  # fmt: skip
    if vendor == "amd" and not data.get("hip"):
        problems.append(f"expected a ROCm (HIP) build of torch, found hip={data.get('hip')!r}")
    return problems


def matmul(data: Mapping[str, Any]) -> list[str]:
    """A float32 matmul on the GPU must match the CPU's within float32 rounding."""
    err = _number(data, "max_abs_err")
    if err is None or data.get("close") is None:
        return [_incomplete("GPU matmul", data)]
    if data.get("close") is not True:
        tf32 = " (TF32 was on)" if data.get("tf32") else ""
        return [f"GPU matmul differs from the CPU result by up to {err:g}{tf32}"]
    return []


# -- torch_memory_saver ---------------------------------------------------------------------------


def _preload(data: Mapping[str, Any]) -> list[str]:
    if data.get("hook_mode") == "preload" and data.get("preload_active") is True:
        return []
    return [
        "torch_memory_saver's preload library is not interposed: cudaMalloc/hipMalloc does "
        f"not resolve into {data.get('library') or 'it'} (hook_mode={data.get('hook_mode')!r},"
        f" LD_PRELOAD={data.get('ld_preload')!r})"
    ]


def _released(what: str, released: float, region: float) -> list[str]:
    if released < RELEASED_SHARE * region:
        return [
            f"{what} pause released {_mib(released)} of the region's {_mib(region)} "
            f"(expected >= {RELEASED_SHARE:.0%}); device memory was not handed back"
        ]
    return []


def memory_saver_free(data: Mapping[str, Any]) -> list[str]:
    """Judge ``gpu_scripts.MEMORY_SAVER_FREE`` (preload mode, free while paused).

    Pause must raise the device's free memory by most of the region's bytes; ``cudaFree`` of a
    buffer while paused must return success (0) and the buffer must stay released after resume
    (freed through torch_memory_saver, not parked in a cache). The pre-fix package (before PR
    #95) releases the paused handle a second time and exits instead.
    """
    problems = _preload(data)
    keys = ("region_bytes", "freed_bytes", "free_before", "free_paused", "free_resumed")
    n = _numbers(data, keys)
    if n is None or not n["region_bytes"] or not n["freed_bytes"] or "free_rc" not in data:
        return [*problems, _incomplete("torch_memory_saver free-while-paused", data)]
    problems += _released("torch_memory_saver", n["free_paused"] - n["free_before"],
                          n["region_bytes"])  # fmt: skip
    rc = data.get("free_rc")
    if rc != 0:
        problems.append(
            f"cudaFree of a buffer freed while paused returned {rc!r}, not 0 (cudaSuccess)"
        )
    kept_free = n["free_resumed"] - n["free_before"]
    if kept_free < RELEASED_SHARE * n["freed_bytes"]:
        problems.append(
            f"a {_mib(n['freed_bytes'])} buffer freed while paused left only {_mib(kept_free)} "
            "free after resume: torch_memory_saver's free path did not release it"
        )
    return problems


def memory_saver_torch(data: Mapping[str, Any]) -> list[str]:
    """Judge ``gpu_scripts.MEMORY_SAVER_TORCH`` (hook_mode="torch": the CUDAPluggableAllocator
    behind torch's MemPool, as the training stack uses it): pause releases the region, resume
    maps it again, and the tensor is usable after resume."""
    problems: list[str] = []
    if data.get("hook_mode") != "torch":
        mode = data.get("hook_mode")
        problems.append(f"torch_memory_saver ran in hook_mode={mode!r}, not torch")
    keys = ("region_bytes", "free_before", "free_paused", "free_resumed")
    n = _numbers(data, keys)
    if n is None or not n["region_bytes"] or data.get("usable_after_resume") is None:
        return [*problems, _incomplete("torch_memory_saver torch mode", data)]
    region = n["region_bytes"]
    problems += _released("torch_memory_saver (torch mode)", n["free_paused"] - n["free_before"],
                          region)  # fmt: skip
    taken = n["free_paused"] - n["free_resumed"]
    if taken < RELEASED_SHARE * region:
        problems.append(
            f"resume took back {_mib(taken)} of the region's {_mib(region)}: the region's "
            "memory was not mapped again"
        )
    if data.get("usable_after_resume") is not True:
        problems.append("the tensor was not usable after resume (a kernel on it gave wrong values)")
    return problems


def memory_saver_tags(data: Mapping[str, Any]) -> list[str]:
    """Judge ``gpu_scripts.MEMORY_SAVER_TAGS``: ``pause(tag)`` releases that tag's region and
    only it; the other region stays resident and bit-exact while the first is paused (miles
    pauses "grad_buffer" and keeps "default")."""
    problems = _preload(data)
    n = _numbers(data, ("paused_bytes", "kept_bytes", "free_before", "free_paused"))
    if n is None or not n["paused_bytes"] or not n["kept_bytes"]:
        return [*problems, _incomplete("torch_memory_saver tags", data)]
    released = n["free_paused"] - n["free_before"]
    tag = data.get("paused_tag")
    problems += _released(f"torch_memory_saver (tag {tag!r})", released, n["paused_bytes"])
    if released > n["paused_bytes"] + KEPT_SHARE * n["kept_bytes"]:
        problems.append(
            f"pause({tag!r}) released {_mib(released)}, more than its region's "
            f"{_mib(n['paused_bytes'])}: the region tagged {data.get('kept_tag')!r} was paused too"
        )
    if data.get("kept_exact") is not True:
        problems.append(
            f"the region tagged {data.get('kept_tag')!r} was not resident and bit-exact while "
            f"{tag!r} was paused (kept_exact={data.get('kept_exact')!r})"
        )
    return problems


def memory_saver_cpu_backup(data: Mapping[str, Any]) -> list[str]:
    """Judge ``gpu_scripts.MEMORY_SAVER_CPU_BACKUP``: with ``enable_cpu_backup=True`` the bytes
    are backed up on pause (``get_cpu_backup`` gives them bit for bit) and restored on resume
    bit for bit; without a backup the device's contents after resume are undefined."""
    problems = _preload(data)
    n = _numbers(data, ("region_bytes", "free_before", "free_paused"))
    if n is None or not n["region_bytes"] or data.get("restored_exact") is None:
        return [*problems, _incomplete("torch_memory_saver CPU backup", data)]
    problems += _released("torch_memory_saver (CPU backup)", n["free_paused"] - n["free_before"],
                          n["region_bytes"])  # fmt: skip
    if data.get("backup_exact") is not True:
        problems.append(
            "get_cpu_backup() while paused did not give the region's bytes back bit for bit "
            f"(backup_exact={data.get('backup_exact')!r}; enable_cpu_backup="
            f"{data.get('enable_cpu_backup')!r})"
        )
    if data.get("restored_exact") is not True:
        problems.append("resume did not restore the region's bytes bit for bit from the CPU backup")
    return problems


# -- driver and toolkit ---------------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts) if parts else None


def cuda_version(code: int | None) -> str | None:
    """``cuDriverGetVersion``'s integer as CUDA writes it: 13000 -> "13.0", 12040 -> "12.4"."""
    if code is None or code <= 0:
        return None
    return f"{code // 1000}.{(code % 1000) // 10}"


def nvidia_driver(
    *,
    toolkit: str,
    driver: str,
    torch_cuda: str | None,
    driver_cuda: str | None = None,
    cu_init: int | None = None,
    compat: bool = False,
) -> list[str]:
    """A CUDA ``toolkit`` image on this driver, by NVIDIA's rule (:data:`MIN_NVIDIA_DRIVER`).

    torch's CUDA must have the manifest's major. A driver whose own CUDA (``cuDriverGetVersion``)
    has that major or a newer one runs it, whatever the minors (minor version compatibility: a
    cu131 torch on a 13.0-class 580 driver passes; :func:`minor_compat_note` names the
    exceptions). Without that reading, the kernel driver's version must reach the major's
    minimum. An older driver passes only through forward compatibility: the compat libcuda is
    what the process loaded and ``cuInit`` succeeded.
    """
    want = _version(toolkit)
    if want is None:
        return [f"variants.<v>.toolkit {toolkit!r} is not a CUDA version"]
    problems: list[str] = []
    built = _version(torch_cuda or "")
    if built is None or built[0] != want[0]:
        problems.append(
            f"torch is built for CUDA {torch_cuda}, the manifest says {toolkit} (the major "
            "must match)"
        )
    if cu_init is not None and cu_init != 0:
        why = " (804: forward compatibility is not supported on this GPU)" if cu_init == 804 else ""
        via = "the forward-compatibility libcuda" if compat else "the driver"
        problems.append(f"cuInit through {via} returned {cu_init}{why}: no CUDA call succeeds")
    major = built[0] if built is not None else want[0]
    minimum = ".".join(map(str, MIN_NVIDIA_DRIVER.get(major, ())))
    need = (
        f"a CUDA {major}.x build needs a driver of its major (>= {minimum}: minor version "
        "compatibility) or the forward-compatibility package with a CUDA call succeeding"
    )
    supports = _version(driver_cuda or "")
    if supports is not None:
        if supports[0] < major:
            via = ", through the compat libcuda" if compat else ""
            problems.append(
                f"the driver supports CUDA {driver_cuda} (driver {driver or 'unknown'}{via}): "
                f"{need}; update the host's driver"
            )
        return problems
    if not minimum:
        problems.append(f"no known minimum driver for CUDA {major}; add it to MIN_NVIDIA_DRIVER")
        return problems
    have = _version(driver)
    if have is None:
        problems.append(f"the NVIDIA driver version could not be read ({driver!r})")
    elif have < MIN_NVIDIA_DRIVER[major] and not (compat and cu_init == 0):
        problems.append(f"NVIDIA driver {driver} is too old: {need}; update the host's driver")
    return problems


def minor_compat_note(torch_cuda: str | None, driver_cuda: str | None) -> str | None:
    """Where torch's CUDA minor is newer than the driver's (same major), it runs under minor
    version compatibility: say so and name the guide's exceptions (None otherwise)."""
    built, supports = _version(torch_cuda or ""), _version(driver_cuda or "")
    if built is None or supports is None or len(built) < 2 or len(supports) < 2:
        return None
    if built[0] != supports[0] or built[:2] <= supports[:2]:
        return None
    return (
        f"torch's CUDA {torch_cuda} runs on the driver's CUDA {driver_cuda} under minor version "
        f"compatibility; its exceptions: {MINOR_COMPAT_EXCEPTIONS}"
    )


def rocm_toolkit(*, toolkit: str, rocm_version: str, torch_hip: str | None) -> list[str]:
    """A ROCm ``toolkit`` image: /opt/rocm and torch's HIP must be that ROCm release."""
    problems: list[str] = []
    want = _version(toolkit)
    have = _version(rocm_version)
    if want is None:
        return [f"variants.<v>.toolkit {toolkit!r} is not a ROCm version"]
    if have is None or have[: len(want)] != want:
        problems.append(f"/opt/rocm is ROCm {rocm_version or '(unknown)'}, the manifest {toolkit}")
    hip = _version(torch_hip or "")
    if hip is None or hip[:2] != want[:2]:
        problems.append(f"torch is built for HIP {torch_hip}, the manifest says ROCm {toolkit}")
    return problems


# -- devices --------------------------------------------------------------------------------------


def _listed(value: str | None) -> int | None:
    if value is None:
        return None
    return len([d for d in value.split(",") if d.strip()])


def visible_devices(
    *, vendor: str, nodes: int, torch_count: int, env: Mapping[str, str | None]
) -> list[str]:
    """Does torch see the GPUs the container really got (its device nodes), as narrowed by the
    visibility variables? NVIDIA: ``/dev/nvidiaN`` nodes, then ``CUDA_VISIBLE_DEVICES``. AMD:
    GPU agents, then ``ROCR_VISIBLE_DEVICES`` (the runtime applies it first), then
    ``HIP_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES`` on top."""
    if nodes < 1:
        return [f"the container got no {vendor} GPU device nodes"]
    expected = nodes
    how = f"{nodes} device nodes"
    order = (
        ("CUDA_VISIBLE_DEVICES",)
        if vendor == "nvidia"
        else ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    )
    for key in order:
        n = _listed(env.get(key))
        if n is not None:
            expected = min(expected, n)
            how += f", {key}={env.get(key)!r}"
    if vendor == "amd":
        hip, cuda = env.get("HIP_VISIBLE_DEVICES"), env.get("CUDA_VISIBLE_DEVICES")
        if hip is not None and cuda is not None and hip != cuda:
            return [f"HIP_VISIBLE_DEVICES={hip!r} but CUDA_VISIBLE_DEVICES={cuda!r}"]
    if torch_count != expected:
        return [f"torch sees {torch_count} GPUs; the container got {expected} ({how})"]
    return []
