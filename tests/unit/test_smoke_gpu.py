"""GPU detection and device access, from canned tool output and a fake /dev."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from twinbuild.engine.api import GpuAccess
from twinbuild.smoke import gpu

SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 575.57.08              Driver Version: 575.57.08      CUDA Version: 12.9     |
"""


def _tools(outputs: dict[str, str]) -> gpu.Runner:
    def run(argv: Sequence[str]) -> str | None:
        return outputs.get(" ".join(argv))

    return run


def test_nvidia_from_nvidia_smi(tmp_path: Path) -> None:
    run = _tools(
        {
            "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader": (
                "NVIDIA H200, 575.57.08\nNVIDIA H200, 575.57.08\n"
            ),
            "nvidia-smi": SMI,
        }
    )
    info = gpu.detect("nvidia", run=run, dev=tmp_path)
    assert info == gpu.GpuInfo(
        vendor="nvidia", model="NVIDIA H200", driver="575.57.08", runtime="12.9", count=2
    )


def test_nvidia_device_nodes_without_the_tool(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    info = gpu.detect("nvidia", run=_tools({}), dev=tmp_path)
    assert info is not None
    assert (info.vendor, info.count, info.model) == ("nvidia", 2, "unknown")


def test_amd_needs_kfd_and_render_nodes(tmp_path: Path) -> None:
    assert gpu.detect("amd", run=_tools({}), dev=tmp_path) is None
    (tmp_path / "kfd").touch()
    (tmp_path / "dri").mkdir()
    (tmp_path / "dri/renderD128").touch()
    run = _tools(
        {"rocm-smi --showproductname": "GPU[0]		: Card Series: 		AMD Instinct MI300X\n"}
    )
    info = gpu.detect("amd", run=run, dev=tmp_path)
    assert info is not None
    assert (info.vendor, info.model, info.count) == ("amd", "AMD Instinct MI300X", 1)
    assert gpu.access("amd", dev=tmp_path) == GpuAccess(
        devices=(f"{tmp_path}/kfd:{tmp_path}/kfd:rwm", f"{tmp_path}/dri:{tmp_path}/dri:rwm"),
        group_add=("video",),
        ipc_mode="host",
        memlock_unlimited=True,
    )


def test_nvidia_access_is_a_device_request() -> None:
    assert gpu.access("nvidia").device_requests == (
        {"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]},
    )


def test_gpu_containers_get_shared_memory_and_unlimited_memlock() -> None:
    """NCCL's multi-GPU init needs more than Docker's 64 MB /dev/shm (ncclShmOpen) and pins host
    memory: the host's IPC namespace as upstream runs its GPU containers, or the manifest's size."""
    host = gpu.access("cuda")
    assert (host.ipc_mode, host.shm_size, host.memlock_unlimited) == ("host", None, True)
    sized = gpu.access("cuda", shm_size="32g")
    assert (sized.ipc_mode, sized.shm_size, sized.memlock_unlimited) == (None, "32g", True)


def test_skip_reasons() -> None:
    info = gpu.GpuInfo(vendor="nvidia", model="m", driver="d", runtime="r", count=1)
    assert gpu.skip_reason("nvidia", info, wanted=None) is None
    assert gpu.skip_reason("nvidia", info, wanted=False) == "GPU checks turned off (--no-gpu)"
    assert gpu.skip_reason("amd", None, wanted=None) == (
        "no amd GPU on this machine (looked for /dev/kfd and /dev/dri)"
    )
