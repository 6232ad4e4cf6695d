"""One Docker engine for the whole test session, with a data root of its own.

Started once by the controlling pytest process (before any xdist worker exists, so workers
inherit its DOCKER_HOST) and stopped at the end, its folder (in memory where it can be) removed: the images and containers
the tests make never land in the engine that holds the user's builds, and nothing is left behind.
The base image comes from the root filesystem saved in the user's cache (one mmdebstrap, the
first time only), so a session pays seconds for it, not a minute. That cache is pinned in
``TWINBUILD_CACHE`` when the session starts: tests that give git a HOME of their own would
otherwise each look for it under that HOME, and mmdebstrap again (50 s a test, seen here).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from twinbuild.engine import base, daemon
from twinbuild.engine.host import run_command
from twinbuild.util.paths import cache_root


@dataclass(frozen=True, slots=True)
class SessionEngine:
    docker_host: str
    paths: daemon.EnginePaths | None  # None: an engine we were given (not root, or not Debian)
    folder: Path | None

    def stop(self) -> None:
        if self.paths is None or self.folder is None:
            return
        daemon.down(self.paths)
        remove(self.folder)


#: The most an engine's (or a registry's) folder in memory may hold; a session uses a few GiB.
SCRATCH_SIZE = "12g"
SCRATCH_ROOT = Path("/tmp")  # not TMPDIR: a socket path there must stay short


def scratch(prefix: str) -> Path:
    """A fresh, short folder under /tmp for an engine's or a registry's state, in memory (a
    tmpfs) where we may mount one: a session writes, pushes, pulls and deletes image layers by
    the GiB, and on a shared machine the disk is the slowest part of that. Elsewhere (not root,
    no CAP_SYS_ADMIN) it is a plain folder on disk. ``remove`` takes either away."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=SCRATCH_ROOT))  # a socket path: <= 107 B
    if os.geteuid() == 0:
        run_command(["mount", "-t", "tmpfs", "-o", f"size={SCRATCH_SIZE},mode=0700", "tmpfs",
                     str(folder)])  # fmt: skip
    return folder


def remove(folder: Path) -> None:
    """Unmount what is mounted at or below ``folder`` (never crossing a mount), then delete it."""
    base._remove_tree(folder, run_command)


def pin_cache() -> Path:
    """Fix the session's cache folder to the user's, whatever HOME a test sets later."""
    cache = cache_root().resolve()
    os.environ["TWINBUILD_CACHE"] = str(cache)
    return cache


def start() -> SessionEngine:
    """A private engine under a fresh /tmp folder, or the one DOCKER_HOST or the default socket
    names where we cannot start one (not root, not Debian) or are told to use it
    (``TWINBUILD_TEST_ENGINE=given``: CI that provides an engine, or a pytest run inside a test)."""
    pin_cache()
    given = os.environ.get("TWINBUILD_TEST_ENGINE") == "given"
    if given or os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        state = daemon.status()
        return SessionEngine(docker_host=state.docker_host, paths=None, folder=None)
    folder = scratch("tb-test-")
    paths = daemon.EnginePaths.under(folder)
    try:
        state = daemon.up(paths, private=True)
    except BaseException:
        remove(folder)
        raise
    os.environ["DOCKER_HOST"] = state.docker_host
    return SessionEngine(docker_host=state.docker_host, paths=paths, folder=folder)
