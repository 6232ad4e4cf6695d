"""One Docker engine for the whole test session, with a data root of its own.

Started once by the controlling pytest process (before any xdist worker exists, so workers
inherit its DOCKER_HOST) and stopped at the end: the images and containers the tests make never
land in the engine that holds the user's builds. Its socket and run state live in a fresh folder
(in memory where it can be), removed at the end. Its data root is kept between sessions, in the
user's cache (``test-engine/data``), so that a warm machine's session finds its layer cache and
bases: the arm64 build under QEMU, buildx's and the bases' imports then cost seconds. A kept
data root starts each session with no containers and no tags but the bases' (``tidy``; the
layers stay, as build cache), is dropped when it holds more than WARM_CAP, and is used by one
session at a time (a lock; a second session at once gets a fresh one).
``TWINBUILD_TEST_ENGINE=fresh`` asks for a fresh data root, in memory, removed at the end.
The base image comes from the root filesystem saved in the user's cache (one mmdebstrap, the
first time only), so a session pays seconds for it, not a minute. That cache is pinned in
``TWINBUILD_CACHE`` when the session starts: tests that give git a HOME of their own would
otherwise each look for it under that HOME, and mmdebstrap again (50 s a test, seen here).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from twinbuild.engine import base, daemon
from twinbuild.engine.client import connect
from twinbuild.engine.host import SystemHost, own_pid, run_command, stop_pid
from twinbuild.errors import EngineError
from twinbuild.util.paths import cache_root

#: Set (to the kept folder) for the session's processes while this session holds the kept data
#: root: the session registry keeps its storage there too (tests/session_registry.py).
KEPT_ENV = "TWINBUILD_TEST_KEPT"
#: A kept data root holding more image layers than this is dropped when its session ends (a
#: session adds a few hundred MiB of layers that differ from the last one's).
WARM_CAP = 12 * 1024**3


@dataclass(frozen=True, slots=True)
class Warm:
    """The kept folder (the data root in it), and the lock (an open file) that keeps it this
    session's."""

    home: Path
    lock: int

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def pidfile(self) -> Path:
        """The pid of the dockerd that runs on the data root."""
        return self.home / "dockerd.pid"


@dataclass(frozen=True, slots=True)
class SessionEngine:
    docker_host: str
    paths: daemon.EnginePaths | None  # None: an engine we were given (not root, or not Debian)
    folder: Path | None
    warm: Warm | None = None  # None: a fresh data root, in ``folder``

    def stop(self) -> None:
        if self.paths is None or self.folder is None:
            return
        os.environ.pop(KEPT_ENV, None)
        try:
            oversized = self.warm is not None and _layers(self.docker_host) > WARM_CAP
        finally:
            daemon.down(self.paths)
            remove(self.folder)
        if self.warm is not None:
            if oversized:
                shutil.rmtree(self.warm.data)
            os.close(self.warm.lock)


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


def warm_root(cache: Path) -> Warm | None:
    """The data root kept under ``cache``, locked for this session; None when another session
    holds it (it gets a fresh one) or a fresh one is asked for."""
    if os.environ.get("TWINBUILD_TEST_ENGINE") == "fresh":
        return None
    home = cache / "test-engine"
    home.mkdir(parents=True, exist_ok=True)
    lock = os.open(home / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return None
    warm = Warm(home=home, lock=lock)
    warm.data.mkdir(exist_ok=True)
    return warm


def _orphan(warm: Warm) -> None:
    """Stop the dockerd a killed session left running on the kept data root (its lock died with
    it; dockerd never held it): two daemons on one data root would corrupt it."""
    host = SystemHost()
    pid = own_pid(warm.pidfile, "dockerd", host)
    if pid is not None:
        stop_pid(host, pid, daemon.STOP_TIMEOUT_S, "dockerd")
    warm.pidfile.unlink(missing_ok=True)


def _layers(docker_host: str) -> int:
    with connect(docker_host) as engine:
        return engine.layers_size()


def tidy(docker_host: str) -> None:
    """A kept data root as a fresh one looks to the tests: no containers, no tags but the bases'
    (made from the saved root filesystems anyway); the untagged layers stay, as build cache."""
    with connect(docker_host) as engine:
        for container in engine.api.containers(all=True, quiet=True):
            engine.api.remove_container(container["Id"], force=True, v=True)
        for image in engine.api.images():
            for tag in image.get("RepoTags") or ():
                if not tag.startswith(f"{base.REPOSITORY}:") and tag != "<none>:<none>":
                    with contextlib.suppress(EngineError):
                        engine.remove_image(tag, force=True, prune=False)


def start() -> SessionEngine:
    """A private engine under a fresh /tmp folder with the kept data root (or a fresh one), or the
    one DOCKER_HOST or the default socket names where we cannot start one (not root, not Debian)
    or are told to use it (``TWINBUILD_TEST_ENGINE=given``: CI that provides an engine, or a
    pytest run inside a test)."""
    cache = pin_cache()
    given = os.environ.get("TWINBUILD_TEST_ENGINE") == "given"
    if given or os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        state = daemon.status()
        return SessionEngine(docker_host=state.docker_host, paths=None, folder=None)
    folder = scratch("tb-test-")
    paths = daemon.EnginePaths.under(folder)
    warm = warm_root(cache)
    try:
        if warm is not None:
            _orphan(warm)
            paths.root.mkdir()
            paths.data_root.symlink_to(warm.data, target_is_directory=True)  # dockerd resolves it
        state = daemon.up(paths, private=True)
        if warm is not None:
            warm.pidfile.write_text(f"{state.pid}\n")
            tidy(state.docker_host)
    except BaseException:
        with contextlib.suppress(EngineError):
            daemon.down(paths)
        remove(folder)
        if warm is not None:
            os.close(warm.lock)
        raise
    os.environ["DOCKER_HOST"] = state.docker_host
    if warm is not None:
        os.environ[KEPT_ENV] = str(warm.home)
    return SessionEngine(docker_host=state.docker_host, paths=paths, folder=folder, warm=warm)
