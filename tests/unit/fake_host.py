"""A scripted machine for the provisioning tests of the engine and the registry.

Both talk to the machine through :class:`twinbuild.engine.host.Host`; the process, apt and
clock part of that is the same for both, so it lives here once. Each test module subclasses it
with the program it installs and what a spawn of that program leaves behind.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar


@dataclass
class FakeHost:
    """A machine whose sockets, processes and apt are scripted: no process starts, no port opens."""

    PROGRAM: ClassVar[tuple[str, str]]  # (name, path) that `apt-get install` puts on PATH

    answering: set[str] = field(default_factory=set)
    root: bool = True
    debian: bool = True
    binaries: dict[str, str] = field(default_factory=dict)  # a subclass: its program installed
    procs: dict[int, str] = field(default_factory=dict)  # live pid -> cmdline
    ran: list[list[str]] = field(default_factory=list)
    run_results: dict[str, tuple[int, str]] = field(default_factory=dict)
    spawned: list[list[str]] = field(default_factory=list)
    signals: list[tuple[int, int]] = field(default_factory=list)
    clock: float = 0.0
    die_after_spawn: bool = False
    ignores_sigterm: bool = False
    next_pid: int = 4242

    def ping(self, docker_host: str) -> bool:
        return docker_host in self.answering

    def is_root(self) -> bool:
        return self.root

    def is_debian(self) -> bool:
        return self.debian

    def which(self, name: str) -> str | None:
        return self.binaries.get(name)

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        self.ran.append(list(argv))
        result = self.run_results.get(" ".join(argv), (0, ""))
        if result[0] == 0 and argv[:2] == ["apt-get", "install"]:
            name, path = self.PROGRAM
            self.binaries[name] = path
        return result

    def spawn(self, argv: Sequence[str], log: Path) -> int:
        """Record the start; the process lives on unless ``die_after_spawn``."""
        self.spawned.append(list(argv))
        pid = self.next_pid
        if not self.die_after_spawn:
            self.procs[pid] = " ".join(argv)
        return pid

    def alive(self, pid: int) -> bool:
        return pid in self.procs

    def cmdline(self, pid: int) -> str:
        return self.procs.get(pid, "")

    def kill(self, pid: int, sig: int) -> None:
        self.signals.append((pid, sig))
        if sig == signal.SIGKILL or not self.ignores_sigterm:
            self.procs.pop(pid, None)

    def sleep(self, seconds: float) -> None:
        self.clock += seconds

    def now(self) -> float:
        return self.clock
