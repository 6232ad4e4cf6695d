"""A root filesystem as an image the engine loads: a one-layer ``docker load`` archive.

``docker import`` cannot say which architecture a root filesystem is for (the engine ignores its
``platform`` without experimental features and stamps its own), and an arm64 base stamped amd64
runs nothing. So the base is handed over as the archive ``docker save`` writes: the root
filesystem tar as its one layer, and an image config naming the architecture, the command and
the labels. The config is written deterministically, so the same root filesystem always gives the
same image id (its digest), on every engine.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from twinbuild.manifest.model import ARCH_NAMES, Arch

#: The image's creation time: fixed, so that the id depends on the content alone.
EPOCH = "1970-01-01T00:00:00Z"
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Archive:
    path: Path
    image_id: str  # sha256:<hex> of the config: the id the engine gives the loaded image


def layer_digest(tar: Path) -> str:
    digest = hashlib.sha256()
    with tar.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def config(*, arch: Arch, diff_id: str, cmd: Sequence[str], labels: Mapping[str, str]) -> bytes:
    doc = {
        "architecture": ARCH_NAMES[arch],
        "os": "linux",
        "created": EPOCH,
        "config": {"Cmd": list(cmd), "Labels": dict(labels), "Env": [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": EPOCH, "created_by": "twinbuild base (mmdebstrap)"}],
    }  # fmt: skip
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def write(
    rootfs_tar: Path,
    out: Path,
    *,
    arch: Arch,
    cmd: Sequence[str] = ("/bin/bash",),
    labels: Mapping[str, str] | None = None,
) -> Archive:
    """Write the load archive of ``rootfs_tar`` to ``out``; the image id it will load as."""
    body = config(arch=arch, diff_id=layer_digest(rootfs_tar), cmd=cmd, labels=labels or {})
    image = hashlib.sha256(body).hexdigest()
    manifest = [{"Config": f"{image}.json", "RepoTags": None, "Layers": ["layer/layer.tar"]}]
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as archive:
        _add(archive, f"{image}.json", body)
        _add(archive, "manifest.json", json.dumps(manifest).encode())
        info = tarfile.TarInfo("layer/layer.tar")
        info.size = rootfs_tar.stat().st_size
        with rootfs_tar.open("rb") as layer:
            archive.addfile(info, layer)
    return Archive(path=out, image_id=f"sha256:{image}")


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))
