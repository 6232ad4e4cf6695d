"""The host half of the fence (tests/write_fence.py): a test not marked docker cannot run a
program that changes this machine (installs packages, mounts, registers binfmt handlers, starts
an engine or a registry), however the call is wrapped.

Found the hard way: the CLI fuzz suite generated ``twinbuild binfmt --arch linux/arm64``, which on
a fresh machine, as root, ran ``apt-get install qemu-user-static binfmt-support`` for real; the
fuzz time bound then killed it mid-``dpkg`` and left the machine's package database broken for
the Docker tests that followed. Stand-ins of the test's own, in its temporary folder, still run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.write_fence import HOST_PROGRAMS, RanOnHost
from twinbuild.cli.main import main
from twinbuild.engine import binfmt, host

WRAPPED = [
    ["apt-get", "install", "-y", "hello"],
    ["/usr/bin/apt-get", "update"],
    ["env", "-i", "PATH=/usr/bin:/bin", "dpkg", "--configure", "-a"],
    ["sh", "-c", "cd /tmp && exec apt-get install -y hello", "sh"],
    ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", "/tmp", "apt-get", "download", "x"],
    ["timeout", "5", "update-binfmts", "--enable", "qemu-aarch64"],
    ["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"],
    ["mmdebstrap", "bookworm", "/tmp/x.tar"],
    ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs tmpfs /mnt && apt-get update"],
]


@pytest.mark.parametrize("argv", WRAPPED, ids=[" ".join(a)[:40] for a in WRAPPED])
def test_a_program_that_changes_the_machine_never_starts(argv: list[str]) -> None:
    with pytest.raises(RanOnHost, match="changes this machine"):
        subprocess.run(argv, capture_output=True, check=False)


def test_the_other_ways_to_start_a_program_are_fenced_too() -> None:
    with pytest.raises(RanOnHost):
        os.system("apt-get update")  # noqa: S605
    with pytest.raises(RanOnHost):
        os.posix_spawnp("apt-get", ["apt-get", "update"], dict(os.environ))
    with pytest.raises(RanOnHost):
        host.run_command(["apt-get", "update"])


def test_twinbuild_binfmt_as_root_stops_at_the_host_boundary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the fuzz suite ran: a foreign architecture, no QEMU registered, as root."""
    unregistered = binfmt.Interpreter(
        arch="linux/arm64", entry="qemu-aarch64", mounted=False, registered=False,
        enabled=False, flags="", interpreter="",
    )  # fmt: skip
    monkeypatch.setattr(binfmt, "emulated", lambda arch, machine=None: True)
    monkeypatch.setattr(binfmt, "interpreter", lambda arch, root=binfmt.BINFMT: unregistered)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host, "which", lambda name: f"/usr/bin/{name}")
    # apt-get where QEMU is missing, else mount or update-binfmts: each changes the machine
    with pytest.raises(RanOnHost, match="changes this machine"):
        main(["binfmt", "--arch", "linux/arm64"])


def test_a_stand_in_of_the_tests_own_runs(tmp_path: Path) -> None:
    stand_in = tmp_path / "bin" / "apt-get"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/sh\necho stand-in "$@"\n')
    stand_in.chmod(0o755)
    ran = subprocess.run(
        ["apt-get", "install", "hello"], capture_output=True, text=True, check=True,
        env={**os.environ, "PATH": f"{stand_in.parent}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert ran.stdout == "stand-in install hello\n"
    assert subprocess.run([str(stand_in), "x"], capture_output=True, check=True).returncode == 0


def test_programs_that_only_read_still_run() -> None:
    ran = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    assert ran.stdout.startswith("git version")
    # a package's name is not a program: what base's version check asks
    subprocess.run(["dpkg-query", "-W", "-f=${Version}", "dpkg"], capture_output=True, check=True)


@pytest.mark.skipif(
    shutil.which("unshare") is None
    or subprocess.run(["unshare", "-Urm", "true"], capture_output=True, check=False).returncode
    != 0,
    reason="needs unshare and unprivileged user namespaces (a private mount)",
)
def test_mount_in_a_mount_namespace_of_its_own_runs() -> None:
    """What the full-disk tests do: it changes nothing outside the namespace."""
    ran = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs tmpfs /mnt && echo mounted"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert ran.stdout == "mounted\n"
    assert {"apt-get", "dpkg", "mount", "update-binfmts", "dockerd"} <= HOST_PROGRAMS
