"""The embedded default base image (`twinbuild base`): a Debian minbase root filesystem.

No registry can be reached for a base image, so the local profile starts from one we make:
``mmdebstrap --variant=minbase --architectures=<arch>`` with the manifest's ``[local]`` packages,
tarred and loaded into the engine as an image of that architecture (``engine.archive``), tagged
``twinbuild/base:<hash prefix>``. The hash covers every input (suite, mirror, packages,
mmdebstrap version, architecture, this module's format), so the tag names its content and a
second call with the same inputs reuses the image without running mmdebstrap. An architecture
this host does not run natively (arm64 on x86_64) is made under QEMU (``engine.binfmt``): the
same packages, configured by their own maintainer scripts, only slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from twinbuild.engine import binfmt
from twinbuild.engine.host import APT_INSTALL, run_command, which
from twinbuild.errors import BuildFailed, ConfigError, EngineError
from twinbuild.manifest.model import ARCH_NAMES, Arch
from twinbuild.util.activity import Say, step, to_stderr
from twinbuild.util.paths import cache_root
from twinbuild.util.process import scrubbed

if TYPE_CHECKING:  # the no-op build reaches here; importing the docker SDK costs it 0.15 s
    from twinbuild.engine.api import EngineAPI
    from twinbuild.engine.base_capture import CaptureResult

REPOSITORY = "twinbuild/base"
INPUTS_LABEL = "org.twinbuild.base-inputs"
# Bump when the way the base is made changes (2: mmdebstrap, not debootstrap; 3: any
# architecture, loaded as a one-layer archive that names it; 4: mmdebstrap in a scrubbed
# environment, without manuals, translations and docs).
FORMAT = 4
HASH_PREFIX = 12
CMD = ("/bin/bash",)
LOG_TAIL_LINES = 5
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"  # debian-archive-keyring's

#: What dpkg leaves out of the base, as Debian's slim images do (mmdebstrap's manual shows the
#: same): manuals, info pages, translations and docs, 68 MB of the mini project's 291 MB base;
#: every licence (copyright) stays. Written into the root's dpkg configuration, so what a
#: recipe installs later follows it too.
SLIM = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
)

Runner = Callable[[Sequence[str]], tuple[int, str]]
Which = Callable[[str], str | None]

_SUITE = re.compile(r"[a-z][a-z0-9-]*")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseInputs:
    """Everything the base root filesystem depends on."""

    suite: str
    mirror: str
    packages: tuple[str, ...]
    mmdebstrap_version: str
    arch: Arch

    def digest(self) -> str:
        doc = {
            "format": FORMAT,
            "suite": self.suite,
            "mirror": self.mirror.rstrip("/"),
            "packages": sorted(set(self.packages)),
            "mmdebstrap": self.mmdebstrap_version,
            "arch": ARCH_NAMES[self.arch],
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    @property
    def tag(self) -> str:
        return f"{REPOSITORY}:{self.digest()[:HASH_PREFIX]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseResult:
    """What `ensure_base` did."""

    tag: str
    image_id: str
    inputs_hash: str
    built: bool  # False: an image with these inputs existed and mmdebstrap did not run
    size: int
    mmdebstrap_s: float = 0.0
    import_s: float = 0.0
    total_s: float = 0.0
    saved: str | None = None  # imported from this saved root filesystem: no mmdebstrap ran
    capture: str | None = None  # the cache file of its installed set (``twinbuild base``)

    def describe(self) -> str:
        mib = self.size / 2**20
        if not self.built:
            return f"{self.tag} is up to date ({self.image_id[:19]}, {mib:.0f} MiB)"
        if self.saved is not None:
            return (
                f"imported {self.tag} ({self.image_id[:19]}, {mib:.0f} MiB) from {self.saved} "
                f"in {self.import_s:.0f}s (no mmdebstrap)"
            )
        return (
            f"built {self.tag} ({self.image_id[:19]}, {mib:.0f} MiB): mmdebstrap "
            f"{self.mmdebstrap_s:.0f}s, import {self.import_s:.0f}s"
        )


def _check(suite: str, mirror: str, packages: Sequence[str]) -> None:
    if not _SUITE.fullmatch(suite):
        raise ConfigError(f"local.suite: {suite!r} is not a Debian suite name, e.g. 'bookworm'")
    if mirror and not mirror.startswith(("http://", "https://")):
        raise ConfigError(
            f"local.mirror: {mirror!r} is not an http(s) URL, e.g. 'http://<mirror host>/debian'; "
            "or leave it out for mmdebstrap's default"
        )
    for i, pkg in enumerate(packages):
        if not _PACKAGE.fullmatch(pkg):
            raise ConfigError(f"local.packages[{i}]: {pkg!r} is not a Debian package name")


def _tail(text: str) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-LOG_TAIL_LINES:])


def _must(run: Runner, argv: Sequence[str], what: str) -> str:
    rc, out = run(argv)
    if rc != 0:
        raise BuildFailed(f"{what}: `{' '.join(argv)}` failed (exit {rc}): {_tail(out)}")
    return out.strip()


def _is_root() -> bool:
    return os.geteuid() == 0


def _need_root(what: str) -> None:
    if not _is_root():
        raise BuildFailed(f"twinbuild base {what}, which needs root; rerun it as root")


def _ensure_program(
    program: str, packages: Sequence[str], run: Runner, which: Which, say: Say
) -> None:
    """``program`` on PATH, else ``packages`` installed with apt-get (as root)."""
    if which(program) is not None:
        return
    _need_root(f"installs {program} with apt-get")
    if which("apt-get") is None:
        raise BuildFailed(f"twinbuild base needs {program}; install it (Debian/Ubuntu: apt-get)")
    with step(f"base: installing {program} with apt-get", say):
        _must(run, ["apt-get", "update"], f"install {program}")
        _must(run, [*APT_INSTALL, *packages], f"install {program}")


def _ensure_mmdebstrap(run: Runner, which: Which, say: Say) -> None:
    # the keyring: a Debian suite's signatures checked on a host that is not Debian
    _ensure_program("mmdebstrap", ("mmdebstrap", "debian-archive-keyring"), run, which, say)


def base_tag(
    *,
    suite: str,
    mirror: str,
    packages: Sequence[str],
    arch: Arch,
    run: Runner = run_command,
) -> str:
    """The tag ``ensure_base`` gives the ``arch`` base of these inputs on this host.

    ``twinbuild render --profile local`` shows it and ``twinbuild build`` builds on it: one
    derivation, so render prints the tag the build really uses. Needs mmdebstrap installed (its
    version is an input).
    """
    return base_inputs(suite=suite, mirror=mirror, packages=packages, arch=arch, run=run).tag


def base_inputs(
    *, suite: str, mirror: str, packages: Sequence[str], arch: Arch, run: Runner = run_command
) -> BaseInputs:
    """The inputs as they are on this host (mmdebstrap must be installed)."""
    return BaseInputs(
        suite=suite,
        mirror=mirror,
        packages=tuple(packages),
        mmdebstrap_version=_mmdebstrap_version(run),
        arch=arch,
    )


_HOST_FACTS: list[str] = []


def _mmdebstrap_version(run: Runner) -> str:
    """mmdebstrap's version (asked of the real host once a process)."""
    found = _HOST_FACTS[0] if _HOST_FACTS and run is run_command else None
    if found is None:
        found = _must(
            run, ["dpkg-query", "-W", "-f=${Version}", "mmdebstrap"], "read mmdebstrap version"
        )
        if run is run_command:
            _HOST_FACTS.append(found)
    return found


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (mmdebstrap mounts /proc, /sys and /dev in the target
    while it runs, and a killed run can leave them)."""
    found = []
    prefix = str(root.resolve())
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")  # \040 for spaces etc.
        if point == prefix or point.startswith(prefix + "/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def _remove_tree(root: Path, run: Runner) -> None:
    """Remove a work dir, unmounting anything mmdebstrap left mounted inside it first.

    rmtree crosses mount points: deleting a still-mounted /proc or a bind mount would reach the
    host. Refuse to delete rather than risk that.
    """
    if not root.exists():
        return
    for point in _mounts_under(root):
        run(["umount", "--lazy", point])
    left = _mounts_under(root)
    if left:
        raise BuildFailed(f"{root}: still mounted after umount: {', '.join(left)}; unmount and rm")
    shutil.rmtree(root)


@contextmanager
def _workdir(cache: Path, run: Runner) -> Iterator[Path]:
    parent = cache / "base-tmp"
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="base-", dir=parent))
    try:
        yield work
    finally:
        _remove_tree(work, run)
        with contextlib.suppress(OSError):  # empty now, unless another build works there
            parent.rmdir()


def _existing(engine: EngineAPI, inputs_hash: str, tag: str) -> str | None:
    """The id of a finished image with these inputs (tagging it if only the tag was missing)."""
    found = engine.inspect_image(tag)
    if found is not None:
        labels = (found.get("Config") or {}).get("Labels") or {}
        if labels.get(INPUTS_LABEL) == inputs_hash:
            return str(found["Id"])
    # An import is atomic, so a labelled image is complete even if we died before tagging it.
    for image in engine.images_by_label(INPUTS_LABEL, inputs_hash):
        engine.tag(image.id, tag)
        return image.id
    return None


def _bootstrap(inputs: BaseInputs, rootfs: Path, cache: Path, run: Runner) -> None:
    # mmdebstrap, not debootstrap: apt fetches the packages in parallel and installs them in one
    # go, 25 s against 49 s for the same minbase bookworm with three packages (seen here).
    argv = [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        "--format=directory",
        f"--architectures={ARCH_NAMES[inputs.arch]}",
        # Named, not looked up: on a host that is not Debian (an Ubuntu runner) mmdebstrap finds
        # a Debian suite's keyring only with libdistro-info-perl, a recommends we do not install.
        f"--keyring={DEBIAN_KEYRING}",
        f"--include={','.join(inputs.packages)}",
        *(f"--dpkgopt={option}" for option in SLIM),
        inputs.suite,
        str(rootfs),
        *([inputs.mirror] if inputs.mirror else []),  # none: mmdebstrap's default mirror
    ]
    rc, out = run(scrubbed(argv))  # its environment reaches every maintainer script
    if rc != 0:
        # The work dir goes away; keep mmdebstrap's output where a person can read it.
        log = cache / "base-mmdebstrap.log"
        log.write_text(out)
        raise BuildFailed(
            f"mmdebstrap {inputs.suite} from {inputs.mirror or 'its default mirror'} failed "
            f"(exit {rc}): {_tail(out)}; "
            f"full log: {log}"
        )


def _slim(rootfs: Path) -> None:
    """Drop downloaded .debs and apt lists: they change every run and are not needed in an image."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*_*"):
        for path in rootfs.glob(pattern):
            path.unlink()


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseOptions:
    """What ``twinbuild base`` was asked for: the manifest whose ``[local]`` table says how, and
    the architecture (None: this host's)."""

    manifest: Path
    arch: Arch | None = None
    #: "capture" (``base capture``): a base's installed set instead (``engine/base_capture.py``)
    action: str | None = None
    root: Path = Path()
    image: str | None = None
    variant: str | None = None
    output: str | None = None


def base_for(options: BaseOptions) -> BaseResult | CaptureResult:
    """Make sure the base of the manifest's ``[local]`` table is in the engine; for an
    architecture this host emulates, register QEMU's interpreter first (as root). With
    ``action`` "capture", capture a base's installed set (``engine/base_capture.py``)."""
    from twinbuild.engine.base_capture import CaptureOptions, capture
    from twinbuild.engine.client import connect
    from twinbuild.manifest.loader import load

    if options.action == "capture":
        return capture(
            CaptureOptions(
                manifest=options.manifest, root=options.root, image=options.image,
                variant=options.variant, arch=options.arch, output=options.output,
            )
        )  # fmt: skip
    if options.image or options.variant or options.output:
        raise ConfigError("base: --variant, --image and --output go with `twinbuild base capture`")

    local = load(options.manifest).local  # a bad manifest fails before the engine is asked
    arch = options.arch or binfmt.host_arch()
    if binfmt.emulated(arch):
        binfmt.ensure(arch, run=run_command, which=which)
    with connect() as engine:
        made = ensure_base(
            engine, suite=local.suite, mirror=local.mirror, packages=local.packages, arch=arch
        )
        # The embedded base is this machine's own (Debian's archive on the day): its installed
        # set is captured here, by image id, into the cache (the local smoke's closure check).
        from twinbuild.engine.base_capture import embedded_capture, embedded_path

        embedded_capture(engine, made.tag, cache_root())
        return replace(made, capture=str(embedded_path(cache_root(), made.image_id)))


def ensure_base(
    engine: EngineAPI,
    *,
    suite: str,
    mirror: str,
    packages: Sequence[str],
    arch: Arch,
    cache: Path | None = None,
    run: Runner = run_command,
    which: Which = which,
    clock: Callable[[], float] = time.monotonic,
    say: Say = to_stderr,
    fetch: Callable[[str], bool] | None = None,
) -> BaseResult:
    """Make sure ``twinbuild/base:<hash>`` exists for these inputs; build it if not.

    mmdebstrap runs only when no image with the same inputs hash is in the engine (or, with
    ``fetch``, in the registry: ``fetch(tag)`` pulls it and says whether it could). The image is
    imported untagged and tagged only once complete, so a failure never leaves a tag behind, and the
    work dir under ``<cache>/base-tmp`` is removed whatever happens.
    """
    _check(suite, mirror, packages)
    start = clock()
    cache = cache if cache is not None else cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    inputs: BaseInputs | None = None
    if which("mmdebstrap") is not None:  # the usual case, the base exists: no lock to take
        inputs = base_inputs(suite=suite, mirror=mirror, packages=packages, arch=arch, run=run)
        if _existing(engine, inputs.digest(), inputs.tag) is not None:
            return _result(
                engine, inputs.tag, inputs.digest(), built=False, total_s=clock() - start
            )
    import filelock  # only here: an up-to-date base never needs it

    # One base build at a time per cache: a second caller waits, then reuses the first one's image.
    with filelock.FileLock(cache / "base.lock"):
        _ensure_mmdebstrap(run, which, say)
        if inputs is None:
            inputs = base_inputs(suite=suite, mirror=mirror, packages=packages, arch=arch, run=run)
        inputs_hash, tag = inputs.digest(), inputs.tag
        existing = _existing(engine, inputs_hash, tag)
        # A fresh engine takes the same base from the registry rather than make a new one:
        # the same image id keeps the inputs hash and the registry build cache of the layers above.
        if existing is None and fetch is not None and fetch(tag):
            existing = _existing(engine, inputs_hash, tag)
        if existing is not None:
            return _result(engine, tag, inputs_hash, built=False, total_s=clock() - start)
        saved = saved_rootfs(cache, inputs_hash)
        if saved.is_file():  # a fresh engine (or a pruned one): the root filesystem is made
            t1 = clock()
            _import(engine, saved, inputs, " from the saved root filesystem", say)
            return _result(
                engine, tag, inputs_hash, built=True, import_s=clock() - t1,
                total_s=clock() - start, saved=str(saved),
            )  # fmt: skip
        _need_root("runs mmdebstrap")
        binfmt.require(arch)  # an emulated architecture: QEMU runs its maintainer scripts
        if binfmt.emulated(arch):  # mmdebstrap asks arch-test (a recommends) whether it can
            _ensure_program("arch-test", ("arch-test",), run, which, say)
        with _workdir(cache, run) as work:
            rootfs = work / "rootfs"
            t0 = clock()
            # About a minute (several under QEMU) with nothing to show: say so before it starts.
            how = " under QEMU" if binfmt.emulated(arch) else ""
            with step(
                f"base: mmdebstrap {suite} {ARCH_NAMES[arch]}{how} "
                f"({len(packages)} extra packages)",
                say,
            ):
                _bootstrap(inputs, rootfs, cache, run)
            mmdebstrap_s = clock() - t0
            _slim(rootfs)
            tar = work / "rootfs.tar"
            _must(
                run,
                [
                    "tar",
                    "--numeric-owner",
                    "--xattrs",
                    "--xattrs-include=*",
                    "--one-file-system",
                    "-C",
                    str(rootfs),
                    "-cf",
                    str(tar),
                    ".",
                ],
                f"tar {rootfs}",
            )
            t1 = clock()
            _import(engine, tar, inputs, "", say)
            import_s = clock() - t1
            # Kept: the next engine with no such image (a test engine, a pruned or new data
            # root) imports it in seconds instead of running mmdebstrap again.
            saved.parent.mkdir(parents=True, exist_ok=True)
            tar.replace(saved)
        return _result(
            engine,
            tag,
            inputs_hash,
            built=True,
            mmdebstrap_s=mmdebstrap_s,
            import_s=import_s,
            total_s=clock() - start,
        )


def _import(engine: EngineAPI, tar: Path, inputs: BaseInputs, whence: str, say: Say) -> None:
    """Load a root filesystem tar as the base image and tag it once the image is complete:
    the same for a fresh mmdebstrap and a saved root filesystem (``whence`` says which)."""
    with step(f"base: importing {inputs.tag}{whence}", say):
        image_id = engine.import_rootfs(
            tar,
            arch=inputs.arch,
            labels={INPUTS_LABEL: inputs.digest(), "org.twinbuild.base-suite": inputs.suite},
            cmd=CMD,
        )
    engine.tag(image_id, inputs.tag)


def saved_rootfs(cache: Path, inputs_hash: str) -> Path:
    """Where the root filesystem tar of a base is kept once made (``<cache>/base/<hash>.tar``)."""
    return cache / "base" / f"{inputs_hash}.tar"


def _result(
    engine: EngineAPI,
    tag: str,
    inputs_hash: str,
    *,
    built: bool,
    saved: str | None = None,
    mmdebstrap_s: float = 0.0,
    import_s: float = 0.0,
    total_s: float = 0.0,
) -> BaseResult:
    found = engine.inspect_image(tag)
    labels = ((found or {}).get("Config") or {}).get("Labels") or {}
    if found is None or labels.get(INPUTS_LABEL) != inputs_hash:
        raise EngineError(f"{tag} is missing or lacks {INPUTS_LABEL}={inputs_hash} after import")
    return BaseResult(
        tag=tag,
        image_id=str(found["Id"]),
        inputs_hash=inputs_hash,
        built=built,
        size=int(found.get("Size") or 0),
        mmdebstrap_s=mmdebstrap_s,
        import_s=import_s,
        total_s=total_s,
        saved=saved,
    )
