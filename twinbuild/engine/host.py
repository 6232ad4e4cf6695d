"""The machine the engine and the registry run on: how engine/ runs a host command (through
:mod:`twinbuild.util.process`, like every command), finds a program, reads a pidfile, stops a
process it started and installs a Debian package.

Everything here goes through :class:`Host`, so the engine logic runs against the fake in
tests/unit/fake_host.py; :class:`SystemHost` is the real machine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from twinbuild.engine import wire
from twinbuild.errors import EngineError
from twinbuild.util import bounded, process
from twinbuild.util.process import NONINTERACTIVE

#: Programs never cut off half-way: killed mid-install, dpkg leaves the machine's package
#: database "interrupted", and every later apt-get refuses to run until ``dpkg --configure -a``.
TO_THE_END = frozenset({"apt-get", "dpkg"})


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """Run a fixed command, stdin closed, capturing stdout and stderr together; apt and dpkg
    answer without prompts and in the C locale. Ctrl-C (or SIGTERM, taken as one) stops any
    command at once, but an install (:data:`TO_THE_END`): that runs to its end, then the stop
    goes on."""
    done = process.run(
        argv, timeout=None, env=NONINTERACTIVE, merged=True,
        to_the_end=Path(argv[0]).name in TO_THE_END,
    )  # fmt: skip
    return done.code, done.out


def which(name: str) -> str | None:
    """``name`` on PATH, else in the system folders (root's PATH may lack /usr/sbin)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")


class Host(Protocol):
    """What the engine logic needs from the machine; tests pass a fake."""

    def ping(self, docker_host: str) -> bool: ...
    def is_root(self) -> bool: ...
    def is_debian(self) -> bool: ...
    def which(self, name: str) -> str | None: ...
    def run(self, argv: Sequence[str]) -> tuple[int, str]: ...
    def spawn(self, argv: Sequence[str], log: Path) -> int: ...
    def alive(self, pid: int) -> bool: ...
    def cmdline(self, pid: int) -> str: ...
    def kill(self, pid: int, sig: int) -> None: ...
    def sleep(self, seconds: float) -> None: ...
    def now(self) -> float: ...


class SystemHost:
    """The real machine."""

    def ping(self, docker_host: str) -> bool:
        return wire.ping(docker_host)

    def is_root(self) -> bool:
        return os.geteuid() == 0

    def is_debian(self) -> bool:
        return Path("/etc/debian_version").exists()

    def which(self, name: str) -> str | None:
        return which(name)

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        return run_command(argv)

    def spawn(self, argv: Sequence[str], log: Path) -> int:
        return process.spawn_detached(argv, log)

    def alive(self, pid: int) -> bool:
        # Reap it if it is our own child (the same process ran `up` and `down`), else a zombie
        # would look alive forever.
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rpartition(")")[2].split()[0] != "Z"

    def cmdline(self, pid: int) -> str:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            return raw.replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            return ""

    def kill(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.monotonic()


PID_MAX = 2**22
"""The largest pid Linux hands out (``/proc/sys/kernel/pid_max`` cannot go higher)."""


def read_pid(path: Path) -> int | None:
    """The pid a pidfile holds; None when it is missing or holds anything but a pid (a FIFO or
    folder there is refused: see :func:`twinbuild.util.bounded.read_state_int`)."""
    return bounded.read_state_int(path, low=1, high=PID_MAX)


def read_port(path: Path) -> int | None:
    """The port a portfile holds; None when it is missing or holds anything but a port."""
    return bounded.read_state_int(path, low=1, high=65535)


def own_pid(pidfile: Path, program: str, host: Host) -> int | None:
    """The pid in ``pidfile`` if it names a live ``program`` process, else None."""
    pid = read_pid(pidfile)
    if pid is None or not host.alive(pid) or program not in host.cmdline(pid):
        return None
    return pid


#: ``apt-get install`` as every installer here runs it (the package names follow). It waits up to
#: ten minutes for the dpkg lock: another install may hold it (twinbuild's own, on another test
#: worker or job step, or the machine's), and without the wait apt refuses at once.
APT_INSTALL = (
    "apt-get", "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=600",
)  # fmt: skip


def apt_install(host: Host, package: str, *, update_first: bool = True) -> None:
    """``apt-get install`` one Debian package, with ``apt-get update`` before it, or (with
    ``update_first=False``) only once the install alone has failed. A failure is one line
    naming the command, its exit code and the end of its output."""
    install = [*APT_INSTALL, package]
    if not update_first and host.run(install)[0] == 0:
        return
    for argv in (["apt-get", "update"], install):
        rc, out = host.run(argv)
        if rc != 0:
            tail = " | ".join(out.strip().splitlines()[-3:])
            raise EngineError(
                f"`{' '.join(argv)}` failed (exit {rc}): {tail}; "
                f"install {package} by hand and rerun"
            )


def stop_pid(host: Host, pid: int, timeout: float, program: str) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; only ever a pid our own pidfile names."""
    host.kill(pid, signal.SIGTERM)
    deadline = host.now() + timeout
    while host.alive(pid):
        if host.now() >= deadline:
            host.kill(pid, signal.SIGKILL)
            kill_deadline = host.now() + 5.0
            while host.alive(pid):
                if host.now() >= kill_deadline:
                    raise EngineError(f"{program} (pid {pid}) survived SIGKILL; stop it by hand")
                host.sleep(0.1)
            return
        host.sleep(0.1)
