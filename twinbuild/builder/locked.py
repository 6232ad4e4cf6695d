"""The local lock applied to a build: each pip pin's locked version and the sha256 of its files.

Where the repository keeps locks (a ``pins/lock/`` folder), a local build installs exactly its
image's local lock (``pins/lock/local/<image>.toml``, ``closure/local.py``): the wheelhouse
downloads ``name==version`` with ``--hash`` lines (``pip download --require-hashes``), and the
layer files the recipe installs with ``--require-hashes`` carry the same lines, so a file whose
sha256 the lock does not hold is refused twice, on the host and in the image. A floating pin is
the lock's version until ``twinbuild lock --upgrade`` moves it. A lock that is missing, or older
than the pins the local profile installs, is refused in one line naming the command to run. A
project without ``pins/lock/`` (the tests' mini project) builds from the pins as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.closure import lockfile
from twinbuild.closure.local import local_stale_reason
from twinbuild.closure.resolve import dist_name
from twinbuild.errors import LockInvalid
from twinbuild.manifest.model import PinManifest
from twinbuild.manifest.rendered import Rendered, requirement


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedReq:
    """One pin as the lock installs it."""

    pin: str
    name: str
    version: str
    hashes: tuple[str, ...]  # sha256 hex of every file the lock allows

    @property
    def line(self) -> str:
        """The requirement line pip reads: ``name==version --hash=sha256:... ...``."""
        return " ".join((f"{self.name}=={self.version}",
                         *(f"--hash=sha256:{h}" for h in self.hashes)))  # fmt: skip


def locked_pins(manifest: PinManifest, root: Path, rendered: Rendered) -> dict[str, LockedReq]:
    """Every pip pin of ``rendered`` (local profile) as its local lock holds it, by pin name;
    empty where the repository keeps no locks."""
    if rendered.profile != "local" or not (root / lockfile.LOCK_DIR).is_dir():
        return {}
    path = lockfile.lock_path(root, rendered.image.name, "local")
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    lock = lockfile.read_if_there(path)
    why = local_stale_reason(manifest, rendered.image, lock)
    if lock is None or why is not None:
        raise LockInvalid(
            f"{shown}: {why or 'missing'}: the local build installs only its lock; run "
            "`twinbuild lock` and commit the lock"
        )
    out: dict[str, LockedReq] = {}
    for pin in rendered.installed:
        if pin.install != "pip" or pin.kind != "pypi":
            continue
        name = dist_name(requirement(pin))
        dist = lock.dist(name)
        if dist is None or not dist.files:
            raise LockInvalid(
                f"{shown}: pins.{pin.name}: no locked files of {name}; run `twinbuild lock` "
                "and commit the lock"
            )
        out[pin.name] = LockedReq(
            pin=pin.name, name=name, version=dist.version,
            hashes=tuple(sorted({f.sha256 for f in dist.files})),
        )  # fmt: skip
    return out
