"""QEMU through binfmt_misc: what a build asked for an emulated architecture installs and
registers, and each thing it cannot fix as one line naming it and its fix, exit 2, before
anything is built or tagged.

The binfmt_misc folder is one of the test's own (``root=``); apt-get, mount and update-binfmts are
stand-ins that do to it what the real ones do to /proc/sys/fs/binfmt_misc (tests/write_fence.py
refuses the real ones here). The read-only case mounts a real read-only file system, in a mount
namespace of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import mini_project
from twinbuild.builder.image import wanted_images
from twinbuild.cli.main import main
from twinbuild.engine import binfmt
from twinbuild.errors import BuildFailed, ConfigError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import Arch

FOREIGN: Arch = "linux/arm64" if binfmt.host_arch() == "linux/amd64" else "linux/amd64"
ENTRY = binfmt.ENTRIES[FOREIGN]
WITH_BINFMT = "nodev\tsysfs\nnodev\tproc\nnodev\tbinfmt_misc\n\text4\n"


@dataclass
class Machine:
    """apt-get, mount and update-binfmts as the real ones behave, on a folder of the test's."""

    root: Path
    installed: set[str] = field(default_factory=set)
    calls: list[list[str]] = field(default_factory=list)
    refuse: dict[str, tuple[int, str]] = field(default_factory=dict)

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        if argv[0] in self.refuse:
            return self.refuse[argv[0]]
        if argv[:2] == ["apt-get", "install"]:
            self.installed |= {a for a in argv[2:] if not a.startswith("-") and "::" not in a}
        elif argv[0] == "mount":
            (self.root / "register").write_text("")
        elif argv[0] == "update-binfmts":
            assert (self.root / "register").exists(), "update-binfmts before the mount"
            (self.root / argv[-1]).write_text(
                f"enabled\ninterpreter /usr/bin/{argv[-1]}-static\nflags: F\n"
            )
        return 0, ""

    def which(self, name: str) -> str | None:
        if name in ("update-binfmts", f"{ENTRY}-static") and not self.installed:
            return None
        return f"/usr/bin/{name}"

    def names(self) -> list[str]:
        return [" ".join(c[:2]) for c in self.calls]


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    root = tmp_path / "binfmt_misc"
    root.mkdir()
    return Machine(root=root)


def _ensure(
    machine: Machine, tmp_path: Path, *, kernel: str = WITH_BINFMT, root: bool = True
) -> binfmt.Interpreter:
    filesystems = tmp_path / "filesystems"
    filesystems.write_text(kernel)
    return binfmt.ensure(
        FOREIGN, run=machine.run, which=machine.which, say=lambda _line: None,
        root=machine.root, filesystems=filesystems, is_root=lambda: root,
    )  # fmt: skip


def test_a_fresh_machine_gets_qemu_installed_mounted_and_registered(
    machine: Machine, tmp_path: Path
) -> None:
    found = _ensure(machine, tmp_path)
    assert found.usable
    assert machine.names() == [
        "apt-get update",
        "apt-get install",
        "mount -t",
        "update-binfmts --enable",
    ]
    assert machine.installed == {"qemu-user-static", "binfmt-support"}
    assert machine.calls[-1] == ["update-binfmts", "--enable", ENTRY]
    # registered: a second call changes nothing
    machine.calls.clear()
    assert _ensure(machine, tmp_path).usable
    assert machine.calls == []


def test_not_root_is_one_line_naming_the_command(machine: Machine, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _ensure(machine, tmp_path, root=False)
    assert str(info.value) == (
        f"{FOREIGN}: binfmt_misc is not mounted at /proc/sys/fs/binfmt_misc; registering "
        f"{ENTRY} needs root: run `sudo twinbuild binfmt --arch {FOREIGN}` once (or this "
        "command as root)"
    )
    assert info.value.exit_code == 2
    assert machine.calls == []


def test_a_kernel_without_binfmt_misc_is_one_line(machine: Machine, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _ensure(machine, tmp_path, kernel="nodev\tsysfs\nnodev\tproc\n\text4\n")
    message = str(info.value)
    assert message.startswith(f"{FOREIGN}: this kernel has no binfmt_misc (")
    assert "`modprobe binfmt_misc`" in message
    assert "\n" not in message
    assert info.value.exit_code == 2
    assert machine.calls == []  # nothing installed for a kernel that cannot use it


def test_update_binfmts_refusing_is_one_line_with_its_reason(
    machine: Machine, tmp_path: Path
) -> None:
    said = "update-binfmts: warning: qemu-aarch64 not in database of installed binary formats."
    machine.refuse["update-binfmts"] = (2, f"noise\n{said}\n")
    with pytest.raises(ConfigError) as info:
        _ensure(machine, tmp_path)
    assert str(info.value) == (
        f"{FOREIGN}: `update-binfmts --enable {ENTRY}` refused (exit 2: {said}); see "
        f"`update-binfmts --display {ENTRY}`, and reinstall as root: "
        "`apt-get install --reinstall qemu-user-static binfmt-support`"
    )
    assert info.value.exit_code == 2


def test_a_mount_that_fails_is_one_line_with_the_mount_command(
    machine: Machine, tmp_path: Path
) -> None:
    machine.refuse["mount"] = (32, "mount: /proc/sys/fs/binfmt_misc: permission denied.\n")
    with pytest.raises(ConfigError) as info:
        _ensure(machine, tmp_path)
    assert str(info.value).endswith(
        f"; mount it as root on the host: `mount -t binfmt_misc binfmt_misc {machine.root}`"
    )
    assert "permission denied" in str(info.value)
    assert "update-binfmts --enable" not in machine.names()


def test_apt_get_failing_stays_a_build_failure(machine: Machine, tmp_path: Path) -> None:
    """The network or the mirror, not the machine's set-up: exit 4, the output's tail."""
    machine.refuse["apt-get"] = (100, "E: Unable to locate package qemu-user-static\n")
    with pytest.raises(BuildFailed, match="Unable to locate package"):
        _ensure(machine, tmp_path)


_READ_ONLY_CHILD = """
import sys
from pathlib import Path
from twinbuild.engine import binfmt
from twinbuild.errors import ConfigError
root = Path(sys.argv[1])
ran = []
try:
    binfmt.ensure(
        sys.argv[2], run=lambda argv: ran.append(argv) or (0, ""),
        which=lambda name: "/usr/bin/" + name, say=lambda line: None, root=root,
    )
except ConfigError as exc:
    print(exc.exit_code, exc, ran)
"""


@pytest.mark.skipif(
    shutil.which("unshare") is None
    or subprocess.run(["unshare", "-Urm", "true"], capture_output=True, check=False).returncode
    != 0,
    reason="needs unshare and unprivileged user namespaces (a private, read-only mount)",
)
def test_a_read_only_binfmt_misc_is_one_line(tmp_path: Path) -> None:
    """A container's /proc/sys is read-only: binfmt_misc is mounted, but nothing registers."""
    root = tmp_path / "binfmt_misc"
    root.mkdir()
    script = (
        'mount -t tmpfs tmpfs "$1" && : > "$1/register" && mount -o remount,ro "$1" '
        '&& exec "$2" -c "$3" "$1" "$4"'
    )
    ran = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script, "sh", str(root), sys.executable,
         _READ_ONLY_CHILD, FOREIGN],
        capture_output=True, text=True, check=False, timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(binfmt.__file__).parents[2])},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == (
        f"2 {FOREIGN}: {root} is read-only (a container's /proc/sys?), so {ENTRY} cannot be "
        f"registered here; register it on the host as root: `twinbuild binfmt --arch "
        f"{FOREIGN}` (or run this container with --privileged) []\n"
    )


def test_the_default_build_takes_the_hosts_architecture_only() -> None:
    manifest = load(Path(__file__).parents[2] / "pins" / "manifest.toml")
    here = binfmt.host_arch()
    default = wanted_images(manifest, None, None, "local", emulated=False)
    every = wanted_images(manifest, None, None, "local", emulated=True)
    assert default
    assert {i.arch for i in default} == {here}
    assert {i.arch for i in every} == {"linux/amd64", "linux/arm64"}
    assert default == [i for i in every if i.arch == here]
    # an --arch names its images whatever --all-archs says
    assert wanted_images(manifest, "cu13", FOREIGN, "local", emulated=False) == [
        manifest.image("cu13", FOREIGN)
    ]


def test_build_all_archs_as_a_user_is_one_line_and_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's main job asked for arm64 too, without root: exit 2 before the engine."""
    project = mini_project(tmp_path)
    manifest = project / "pins" / "manifest.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'archs = ["linux/amd64"]', 'archs = ["linux/amd64", "linux/arm64"]', 1
        )
    )
    unregistered = binfmt.Interpreter(
        arch=FOREIGN, entry=ENTRY, mounted=False, registered=False, enabled=False, flags="",
        interpreter="",
    )  # fmt: skip
    monkeypatch.setattr(binfmt, "interpreter", lambda arch, root=binfmt.BINFMT: unregistered)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    from twinbuild.engine import client

    def no_engine() -> None:
        raise AssertionError("the engine was asked before the refusal")

    monkeypatch.setattr(client, "connect", no_engine)
    assert main(["build", "--root", str(project), "--all-archs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"`sudo twinbuild binfmt --arch {FOREIGN}`" in err
