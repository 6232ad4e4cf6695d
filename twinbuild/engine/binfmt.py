"""Running another architecture's images on this host: QEMU through the kernel's binfmt_misc.

An arm64 image built or smoke-tested on an x86_64 machine runs every one of its programs under
``qemu-aarch64``. The kernel starts it for each arm64 ELF it is asked to run, when the
interpreter is registered in ``/proc/sys/fs/binfmt_misc``, and the *fix-binary* flag (``F``)
makes the kernel open the interpreter at registration, so it works inside containers and
mmdebstrap's chroot, where no ``/usr/libexec/qemu-binfmt`` exists. Debian's ``qemu-user-static``
and ``binfmt-support`` register it that way (``update-binfmts --enable qemu-aarch64``).

:func:`require` is what a build asks (one line saying what to install, exit 2, when it is
missing); :func:`ensure` (``twinbuild binfmt``, ``twinbuild base`` for an emulated architecture,
and ``twinbuild build`` asked for one: ``--all-archs`` or ``--arch``) installs and registers it,
as root. What it cannot do is one line naming what is missing and the command that fixes it,
exit 2, before anything is built: not root, a kernel without binfmt_misc, a read-only
binfmt_misc (a container's ``/proc/sys``), ``update-binfmts`` refusing.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from twinbuild.errors import BuildFailed, ConfigError
from twinbuild.manifest.model import ARCH_NAMES, ARCHS, MACHINES, Arch
from twinbuild.util.activity import Say, step, to_stderr

BINFMT = Path("/proc/sys/fs/binfmt_misc")
#: The file systems this kernel knows: binfmt_misc is one, unless it was built without it.
FILESYSTEMS = Path("/proc/filesystems")
#: The binfmt_misc entry Debian's qemu-user-static registers per architecture.
ENTRIES: dict[Arch, str] = {"linux/arm64": "qemu-aarch64", "linux/amd64": "qemu-x86_64"}
PACKAGES = ("qemu-user-static", "binfmt-support")

Runner = Callable[[Sequence[str]], tuple[int, str]]
Which = Callable[[str], str | None]


def host_arch(machine: str | None = None) -> Arch:
    """The architecture this machine runs natively (``uname -m``)."""
    found = machine or platform.machine()
    for arch, name in MACHINES.items():
        if name == found or ARCH_NAMES[arch] == found:
            return arch
    raise ConfigError(f"this host is {found}; twinbuild builds on {', '.join(MACHINES.values())}")


def emulated(arch: Arch, machine: str | None = None) -> bool:
    """Whether images of ``arch`` run under QEMU here."""
    return arch != host_arch(machine)


@dataclass(frozen=True, slots=True, kw_only=True)
class Interpreter:
    """What binfmt_misc says of one architecture's interpreter."""

    arch: Arch
    entry: str
    mounted: bool
    registered: bool
    enabled: bool
    flags: str
    interpreter: str
    native: bool = False  # this host's own architecture: nothing to emulate

    @property
    def usable(self) -> bool:
        """Registered, enabled, and opened at registration: usable inside containers too."""
        return self.native or (self.registered and self.enabled and "F" in self.flags)

    def describe(self) -> str:
        if self.native:
            return f"{self.arch}: this host's own architecture; nothing to emulate"
        if self.usable:
            return f"{self.arch}: {self.entry} registered ({self.interpreter}, flags {self.flags})"
        if not self.mounted:
            return f"{self.arch}: binfmt_misc is not mounted at {BINFMT}"
        if not self.registered:
            return f"{self.arch}: no {self.entry} interpreter is registered"
        if not self.enabled:
            return f"{self.arch}: {self.entry} is registered but disabled"
        return f"{self.arch}: {self.entry} lacks the fix-binary flag (flags {self.flags or '-'})"


def interpreter(arch: Arch, root: Path = BINFMT) -> Interpreter:
    """Read ``<root>/<entry>``: the kernel's record of that architecture's interpreter."""
    entry = ENTRIES[arch]
    mounted = (root / "register").exists()
    try:
        text = (root / entry).read_text()
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        fields.setdefault(name.rstrip(":"), value.strip())
    return Interpreter(
        arch=arch,
        entry=entry,
        mounted=mounted,
        registered=bool(text),
        enabled="enabled" in fields,
        flags=fields.get("flags", ""),
        interpreter=fields.get("interpreter", ""),
    )


def advice(arch: Arch) -> str:
    return (
        f"install and register it as root: `twinbuild binfmt` (apt-get install "
        f"{' '.join(PACKAGES)}; mounts binfmt_misc; update-binfmts --enable {ENTRIES[arch]})"
    )


def require(arch: Arch, *, root: Path = BINFMT, machine: str | None = None) -> None:
    """Refuse (exit 2, before anything is built or tagged) an ``arch`` this host cannot run."""
    if not emulated(arch, machine):
        return
    found = interpreter(arch, root)
    if not found.usable:
        raise ConfigError(
            f"{arch} images run under QEMU on this {host_arch(machine)} host, and "
            f"{found.describe().partition(': ')[2]}; {advice(arch)}"
        )


def ensure(
    arch: Arch = "linux/arm64",
    *,
    run: Runner,
    which: Which,
    say: Say = to_stderr,
    root: Path = BINFMT,
    machine: str | None = None,
    filesystems: Path = FILESYSTEMS,
    is_root: Callable[[], bool] = lambda: os.geteuid() == 0,
) -> Interpreter:
    """Install QEMU's static interpreters, mount binfmt_misc and register ``arch``'s (root).

    Each thing this host lacks and twinbuild cannot fix is a :class:`ConfigError` (exit 2) that
    names it and the command that fixes it; nothing is built or tagged before this returns.
    """
    if not emulated(arch, machine):
        return interpreter(arch, root)
    found = interpreter(arch, root)
    if found.usable:
        return found
    entry = ENTRIES[arch]
    if not is_root():
        raise ConfigError(
            f"{found.describe()}; registering {entry} needs root: run "
            f"`sudo twinbuild binfmt --arch {arch}` once (or this command as root)"
        )
    if not found.mounted and not _kernel_has_binfmt_misc(filesystems):
        raise ConfigError(
            f"{arch}: this kernel has no binfmt_misc ({filesystems} does not list it), so it "
            f"cannot run {arch} images under QEMU; load it as root: `modprobe binfmt_misc`, "
            "or build only this host's architecture (leave out --all-archs and --arch)"
        )
    if which("update-binfmts") is None or which(f"{entry}-static") is None:
        from twinbuild.engine.host import APT_INSTALL

        if which("apt-get") is None:
            raise ConfigError(
                f"{found.describe()}; install {' '.join(PACKAGES)} (Debian/Ubuntu: "
                f"`apt-get install {' '.join(PACKAGES)}`), then `twinbuild binfmt --arch {arch}`"
            )
        with step(f"binfmt: installing {' '.join(PACKAGES)} with apt-get", say):
            _must(run, ["apt-get", "update"], "apt-get update")
            _must(run, [*APT_INSTALL, *PACKAGES], f"install {' '.join(PACKAGES)}")
    if not (root / "register").exists():
        mount = ["mount", "-t", "binfmt_misc", "binfmt_misc", str(root)]
        rc, out = run(mount)
        if rc != 0 or not (root / "register").exists():
            raise ConfigError(
                f"{arch}: binfmt_misc cannot be mounted at {root} ({_last(out) or f'exit {rc}'})"
                f"; mount it as root on the host: `{' '.join(mount)}`"
            )
    if _read_only(root):
        raise ConfigError(
            f"{arch}: {root} is read-only (a container's /proc/sys?), so {entry} cannot be "
            f"registered here; register it on the host as root: `twinbuild binfmt --arch {arch}` "
            "(or run this container with --privileged)"
        )
    argv = ["update-binfmts", "--enable", entry]
    rc, out = run(argv)
    if rc != 0:
        raise ConfigError(
            f"{arch}: `{' '.join(argv)}` refused (exit {rc}: {_last(out) or 'no output'}); "
            f"see `update-binfmts --display {entry}`, and reinstall as root: "
            f"`apt-get install --reinstall {' '.join(PACKAGES)}`"
        )
    found = interpreter(arch, root)
    if not found.usable:
        raise ConfigError(
            f"{found.describe()} after `{' '.join(argv)}`; check {root / entry} and "
            f"`update-binfmts --display {entry}`"
        )
    say(f"binfmt: {found.describe()}")
    return found


def ensure_for(archs: Iterable[Arch], *, say: Say = to_stderr) -> None:
    """Make this host run images of each of ``archs`` it emulates (the build asked for them):
    QEMU installed and registered as :func:`ensure` does, on the real machine."""
    from twinbuild.engine.host import run_command, which

    for arch in sorted(set(archs)):
        if emulated(arch):
            ensure(arch, run=run_command, which=which, say=say)


def _kernel_has_binfmt_misc(filesystems: Path) -> bool:
    try:
        text = filesystems.read_text()
    except OSError:
        return True  # cannot tell: let mount say what is wrong
    return any(line.split()[-1:] == ["binfmt_misc"] for line in text.splitlines())


def _read_only(root: Path) -> bool:
    """Whether the kernel refuses writes to binfmt_misc's ``register`` (a read-only mount)."""
    try:
        return bool(os.statvfs(root).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _last(out: str) -> str:
    lines = out.strip().splitlines()
    return lines[-1].strip()[:200] if lines else ""


def _must(run: Runner, argv: Sequence[str], what: str) -> None:
    rc, out = run(argv)
    if rc != 0:
        tail = " ".join(out.strip().splitlines()[-3:])[:300]
        raise BuildFailed(f"{what}: `{' '.join(argv)}` failed (exit {rc}): {tail}")


def all_interpreters(root: Path = BINFMT) -> list[Interpreter]:
    """Each architecture twinbuild builds that this host would emulate, as binfmt_misc says."""
    return [interpreter(a, root) for a in ARCHS if emulated(a)]


@dataclass(frozen=True, slots=True, kw_only=True)
class BinfmtOptions:
    """What ``twinbuild binfmt`` was asked for."""

    arch: Arch = "linux/arm64"


def binfmt(options: BinfmtOptions) -> Interpreter:
    """``twinbuild binfmt``: make this host run ``options.arch`` images (as root)."""
    from twinbuild.engine.host import run_command, which

    if not emulated(options.arch):
        return replace(interpreter(options.arch), native=True)
    return ensure(options.arch, run=run_command, which=which)
