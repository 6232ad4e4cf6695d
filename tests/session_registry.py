"""One registry for the session's Docker tests (Debian's docker-registry on 127.0.0.1), the one
test_ship.py and test_multiarch.py push to.

Where the session engine keeps its data root between sessions (tests/session_engine.py), the
registry keeps its storage beside it and listens on the same port as last time: dockerd remembers
which layers it pushed to which registry, so a warm session's pushes find the 223 MB base already
there instead of compressing and sending it again (25 s of the rehearsal's set-up, 30 s of the
two-architecture one's). A kept storage starts each session with no tags (``tidy``); its blobs
stay, and it is dropped when it holds more than KEPT_CAP. Elsewhere the storage is a fresh
folder (in memory where it can be) on a free port, removed at the end.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import free_port
from tests.session_engine import KEPT_ENV, remove, scratch
from twinbuild.engine import registry
from twinbuild.engine.host import read_port
from twinbuild.engine.registry import RegistryPaths, port_free

#: A kept storage over this many bytes is dropped before the session starts its registry (each
#: session adds a 64 MiB layer of random bytes, test_ship's registry-gone test).
KEPT_CAP = 4 * 1024**3


@dataclass(frozen=True, slots=True)
class SessionRegistry:
    paths: RegistryPaths
    address: str
    folder: Path | None  # a fresh storage's folder, removed at the end; None: kept

    def stop(self) -> None:
        registry.down(self.paths)
        if self.folder is not None:
            remove(self.folder)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def tidy(paths: RegistryPaths) -> None:
    """No tags in a kept storage (docker-registry's filesystem layout: each repository's
    ``_manifests/tags``); its blobs and the repositories' links to them stay."""
    repositories = paths.data / "docker/registry/v2/repositories"
    for tags in repositories.glob("**/_manifests/tags"):
        shutil.rmtree(tags)


def start() -> SessionRegistry:
    kept = os.environ.get(KEPT_ENV)
    if not kept:
        folder = scratch("tb-registry-")  # every push writes there
        paths = RegistryPaths.under(folder)
        state = registry.up(paths, port=free_port())
        return SessionRegistry(paths=paths, address=state.address, folder=folder)
    paths = RegistryPaths.under(Path(kept))
    if paths.root.exists() and _size(paths.root) > KEPT_CAP:
        shutil.rmtree(paths.root)
    registry.down(paths)  # a registry a killed session left running
    tidy(paths)
    last = read_port(paths.portfile)
    port = last if last is not None and port_free(last) else free_port()
    state = registry.up(paths, port=port)
    return SessionRegistry(paths=paths, address=state.address, folder=None)
