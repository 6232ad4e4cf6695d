"""Find the GPUs of this machine and say how a container gets them.

NVIDIA: ``nvidia-smi`` (or ``/dev/nvidia[0-9]*`` when the tool is missing); a container gets
them through a device request. AMD: ``/dev/kfd`` plus ``/dev/dri/renderD*`` (``rocm-smi`` adds
the model); a container gets those device nodes and the ``video`` group.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from twinbuild.engine.api import GpuAccess
from twinbuild.smoke.run_summary import Gpu
from twinbuild.util import process

Runner = Callable[[Sequence[str]], str | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuInfo(Gpu):
    """The GPUs of this machine: what a smoke report and the evidence say of them, and more."""

    archs: tuple[str, ...] = ()  # NVIDIA: each GPU's compute capability ("9.0"), from nvidia-smi

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _run(argv: Sequence[str]) -> str | None:
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    try:
        proc = process.run([exe, *argv[1:]], timeout=30)
    except process.CommandError:  # cannot run, or hung: no answer about the GPUs
        return None
    return proc.out if proc.ok else None


def detect(vendor: str, *, run: Runner = _run, dev: Path = Path("/dev")) -> GpuInfo | None:
    """The GPUs of ``vendor`` (the manifest's ``variants.<v>.vendor``) on this machine, or None."""
    if vendor == "nvidia":
        return _nvidia(run, dev)
    return _amd(run, dev)


def _nvidia(run: Runner, dev: Path) -> GpuInfo | None:
    query = run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    rows = [r.split(",") for r in (query or "").splitlines() if r.strip()]
    if rows:
        runtime = ""
        for line in (run(["nvidia-smi"]) or "").splitlines():
            if "CUDA Version:" in line:
                runtime = line.split("CUDA Version:")[1].strip(" |").split()[0]
        caps = run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]) or ""
        return GpuInfo(
            vendor="nvidia",
            model=rows[0][0].strip(),
            driver=rows[0][1].strip() if len(rows[0]) > 1 else "",
            runtime=runtime,
            count=len(rows),
            archs=tuple(c.strip() for c in caps.splitlines() if c.strip()),
        )
    nodes = [p for p in dev.glob("nvidia[0-9]*") if p.name[len("nvidia") :].isdigit()]
    if nodes:
        return GpuInfo(vendor="nvidia", model="unknown", driver="", runtime="", count=len(nodes))
    return None


def _amd(run: Runner, dev: Path) -> GpuInfo | None:
    renders = sorted((dev / "dri").glob("renderD*"))
    if not (dev / "kfd").exists() or not renders:
        return None
    model = ""
    for line in (run(["rocm-smi", "--showproductname"]) or "").splitlines():
        if "Card Series" in line or "Card series" in line:
            model = line.rsplit(":", 1)[1].strip()
            break
    driver = ""
    for line in (run(["rocm-smi", "--showdriverversion"]) or "").splitlines():
        if "Driver version" in line:
            driver = line.rsplit(":", 1)[1].strip()
    runtime = ""
    version_file = Path("/opt/rocm/.info/version")
    if version_file.is_file():
        runtime = version_file.read_text(encoding="utf-8").strip()
    return GpuInfo(
        vendor="amd", model=model or "unknown", driver=driver, runtime=runtime, count=len(renders)
    )


def access(vendor: str, *, dev: Path = Path("/dev"), shm_size: str | None = None) -> GpuAccess:
    """How a container gets this machine's GPUs of ``vendor``: NVIDIA through a device request,
    AMD through its device nodes and the video group; either way with unlimited memlock and the
    host's IPC namespace (``--ipc=host``, as upstream runs its GPU containers), or a /dev/shm of
    ``shm_size`` where the manifest declares one (``variants.<v>.shm_size``)."""
    shared: dict[str, Any] = {
        "ipc_mode": None if shm_size else "host",
        "shm_size": shm_size,
        "memlock_unlimited": True,
    }
    if vendor == "nvidia":
        return GpuAccess(
            device_requests=({"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]},),
            **shared,
        )
    nodes = [dev / "kfd", dev / "dri"]
    devices = [f"{n}:{n}:rwm" for n in nodes if n.exists()]
    return GpuAccess(devices=tuple(devices), group_add=("video",), **shared)


def skip_reason(vendor: str, info: GpuInfo | None, *, wanted: bool | None) -> str | None:
    """Why GPU checks do not run (None when they do). ``wanted``: --gpu / --no-gpu / auto."""
    if wanted is False:
        return "GPU checks turned off (--no-gpu)"
    if info is None:
        how = "nvidia-smi or /dev/nvidia*" if vendor == "nvidia" else "/dev/kfd and /dev/dri"
        return f"no {vendor} GPU on this machine (looked for {how})"
    return None
