"""The local profile's offline inputs: wheels downloaded on the host, git mirrors cloned locally.

Containers here do not trust the machine's TLS egress, so nothing is downloaded inside one: the
host's pip (with the host's configuration) fills a wheelhouse per layer in the build context, and
git pins come from local mirrors copied into the context, installed as ``git+file://...@COMMIT`` so
pip records the commit (PEP 610) exactly as a production install from GitHub would.

Where the repository keeps locks, each pin is fetched as its local lock holds it
(``builder/locked.py``): ``name==version`` with the sha256 of every file the lock allows, by
``pip download --require-hashes``; a file of other bytes is refused in one line
(:class:`~twinbuild.errors.HashMismatch`) and nothing of it is kept.

Wheels are kept per architecture (``<cache>/wheels/<amd64|arm64>/<requirement>/``): for an image
of an architecture this host does not run, the host's pip downloads that architecture's wheels
(``--platform manylinux_2_*_aarch64 --python-version 3.11``: the Debian base's CPython).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from twinbuild.errors import BuildFailed, ConfigError, DiskFull, HashMismatch
from twinbuild.manifest.model import ARCH_NAMES, MACHINES, Arch, ImageKey, ResolvedPin
from twinbuild.manifest.rendered import GENERATED, Rendered, requirement
from twinbuild.util import process
from twinbuild.util.activity import Say, step, to_stderr
from twinbuild.util.git import run_git

if TYPE_CHECKING:
    from twinbuild.builder.locked import LockedReq

T = TypeVar("T")
#: The local base's CPython (Debian bookworm's), for wheels of an architecture pip cannot ask.
LOCAL_PYTHON = ("3.11", "cp311")
#: glibc of that base: manylinux wheels up to 2.36 run there.
GLIBC_MINOR = 36

#: pip processes at once. The first run's wheel stage is CPU-bound on 2 cores (pip checks every
#: file on a project's index page against the interpreter's tags): for the 46 pins of both
#: platforms, 4 calls of up to 12 pins took 13-14 s of CPU, 8 calls of 5 took 15-18 s.
DOWNLOAD_JOBS = 4
#: requirements per pip call at most: pip fetches one after another, so a long layer is split.
PER_CALL = 12


def prefetch_wheels(
    renders: Sequence[Rendered],
    cache: Path,
    say: Say = to_stderr,
    *,
    jobs: int | None = None,
    per_call: int | None = None,
    locked: Mapping[ImageKey, Mapping[str, LockedReq]] | None = None,
) -> int:
    """Fetch into the cache, in one parallel round, what every rendering in ``renders`` misses.

    A build of both platforms calls this first: otherwise the second platform's own few pins
    cost a second round of pip starts after the first build. Returns how many were fetched.
    ``jobs`` and ``per_call`` are there for the benchmark, which sets them to 1 to measure the
    one-pin-at-a-time fetch this replaced (None: ``DOWNLOAD_JOBS`` and ``PER_CALL``).
    ``locked``: per image, each pin as its local lock holds it (``builder/locked.py``).
    """
    import filelock  # here, not at the top: a no-op build never fetches

    # One fetcher of the cache at a time (`build --jobs 2`, or two builds at once): each decides
    # what is missing only once it holds the lock, so no wheel is fetched twice and no two pips
    # share a requirement's `.partial` folder.
    cache.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(cache / "wheels.lock")
    try:
        lock.acquire(timeout=0.1)
    except filelock.Timeout:
        say(f"wheelhouse: another build is filling {cache}; waiting for it")
        lock.acquire()
    try:
        missing: dict[tuple[Arch, str], tuple[ResolvedPin, str]] = {}
        for rendered in renders:
            mine = (locked or {}).get(rendered.image, {})
            for pin in rendered.installed:
                if pin.install == "pip" and pin.kind != "git":
                    req = wanted_line(pin, mine)
                    if (pin.arch, req) not in missing and not _cached(store(cache, pin.arch, req)):
                        missing[(pin.arch, req)] = (pin, req)
        if missing:
            layers = len({pin.layer for pin, _ in missing.values()})
            archs = ", ".join(sorted({ARCH_NAMES[a] for a, _ in missing}))
            with step(
                f"wheelhouse: downloading {len(missing)} pins ({layers} layers; {archs})", say
            ):
                _download_missing(
                    list(missing.values()), cache, jobs or DOWNLOAD_JOBS, per_call or PER_CALL
                )
        return len(missing)
    finally:
        lock.release()


def wanted_line(pin: ResolvedPin, locked: Mapping[str, LockedReq]) -> str:
    """What is fetched for ``pin``: its lock's hashed line, or (no locks kept) the pin itself."""
    found = locked.get(pin.name)
    return found.line if found is not None else requirement(pin)


def download_wheels(
    rendered: Rendered,
    context: Path,
    cache: Path,
    say: Say = to_stderr,
    locked: Mapping[str, LockedReq] | None = None,
) -> dict[str, int]:
    """Fill ``<context>/.twinbuild/wheels/<layer>/`` for every pip pin; return files per layer.

    Downloads go to a shared cache first (one folder per requirement), so a second build (or the
    other platform) re-uses them. What is missing is fetched by a few ``pip download`` calls in
    parallel, each for up to ``PER_CALL`` pins of one layer and index: one pip start per pin, one
    after another, made the first run wait 30 s here.
    """
    mine = locked or {}
    wanted = [
        (pin, wanted_line(pin, mine))
        for pin in rendered.installed
        if pin.install == "pip" and pin.kind != "git"
    ]
    prefetch_wheels([rendered], cache, say, locked={rendered.image: mine})
    counts: dict[str, int] = {}
    for pin, req in wanted:
        target = context / GENERATED / "wheels" / pin.layer
        target.mkdir(parents=True, exist_ok=True)
        for wheel in store(cache, pin.arch, req).iterdir():
            _link(wheel, target / wheel.name)
        counts[pin.layer] = counts.get(pin.layer, 0) + 1
    for layer_file in rendered.files:
        layer = Path(layer_file).stem
        (context / GENERATED / "wheels" / layer).mkdir(parents=True, exist_ok=True)
    return counts


def _cached(store: Path) -> bool:
    return store.is_dir() and any(store.iterdir())


def _download_missing(
    missing: Sequence[tuple[ResolvedPin, str]], cache: Path, jobs: int, per_call: int
) -> None:
    groups: dict[tuple[Arch, str, str | None], list[tuple[ResolvedPin, str]]] = {}
    for pin, req in missing:
        groups.setdefault((pin.arch, pin.layer, pin.values.index), []).append((pin, req))
    from concurrent.futures import ThreadPoolExecutor  # here: a no-op build downloads nothing

    calls = [call for group in groups.values() for call in split_evenly(group, per_call)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_download_group, call, cache) for call in calls]
        for future in futures:
            future.result()  # the first failure (in manifest order) is the one reported


def split_evenly(items: Sequence[T], most: int) -> list[list[T]]:
    """``items`` in order, in as few parts of at most ``most`` as can be, of near-equal size
    (25 by 12: 9, 8, 8, not 12, 12, 1, whose last pip call would start late for one pin)."""
    if not items:
        return []
    parts = -(-len(items) // max(most, 1))
    size, extra = divmod(len(items), parts)
    out: list[list[T]] = []
    at = 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        out.append(list(items[at : at + n]))
        at += n
    return out


def _download_group(group: Sequence[tuple[ResolvedPin, str]], cache: Path) -> None:
    """One pip call for the group, each file then filed under its requirement's cache folder.

    When that call fails, each pin is fetched alone so the error names the pin at fault.
    """
    index, arch = group[0][0].values.index, group[0][0].arch
    batch = cache / "wheels" / f".batch-{os.getpid()}-{threading.get_ident()}"
    shutil.rmtree(batch, ignore_errors=True)
    batch.mkdir(parents=True)
    try:
        proc = _pip(batch, [req for _, req in group], index, arch)
        files = list(batch.iterdir()) if proc.ok else []
        alone: list[tuple[ResolvedPin, str]] = []
        for pin, req in group:
            mine = [f for f in files if _names_dist(f.name, pin.values.dist or pin.name)]
            if len(mine) != 1:  # failed call, or a file we cannot attribute: fetch it alone
                alone.append((pin, req))
                continue
            _file(mine, store(cache, arch, req))
    finally:
        shutil.rmtree(batch, ignore_errors=True)
    for pin, req in alone:
        _pip_download(req, store(cache, arch, req), pin.name, index, arch)


def _names_dist(filename: str, dist: str) -> bool:
    """Is ``filename`` a wheel or sdist of ``dist`` (PEP 503 normalised names)?"""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    try:
        if filename.endswith(".whl"):
            name = parse_wheel_filename(filename)[0]
        else:
            name = parse_sdist_filename(filename)[0]
    except (InvalidWheelFilename, InvalidSdistFilename):
        return False
    return name == canonicalize_name(dist)


def _file(files: Sequence[Path], store: Path) -> None:
    """Move downloaded files into the store folder, whole or not at all (rename last)."""
    partial = store.with_name(store.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for f in files:
        f.rename(partial / f.name)
    shutil.rmtree(store, ignore_errors=True)
    partial.rename(store)


def store(cache: Path, arch: Arch, req: str) -> Path:
    """The cache folder of one requirement's files for one architecture."""
    return cache / "wheels" / ARCH_NAMES[arch] / _safe(req)


def platform_args(arch: Arch, machine: str | None = None) -> list[str]:
    """pip's flags for another architecture's wheels (none for this host's own): its manylinux
    tags down to 2.17, the base's CPython and ABIs. ``--no-deps`` lets sdists through too."""
    import platform

    if MACHINES[arch] == (machine or platform.machine()):
        return []
    tag = MACHINES[arch]
    found = [f"manylinux_2_{n}_{tag}" for n in range(GLIBC_MINOR, 16, -1)]
    args = [f"--platform={t}" for t in (*found, f"manylinux2014_{tag}", f"linux_{tag}")]
    version, abi = LOCAL_PYTHON
    return [*args, f"--python-version={version}", "--implementation=cp", f"--abi={abi}",
            "--abi=abi3", "--abi=none"]  # fmt: skip


def _pip(dest: Path, reqs: Sequence[str], index: str | None, arch: Arch) -> process.Finished[str]:
    hashed = any(" --hash=" in r for r in reqs)
    listed = dest.with_name(dest.name + ".requirements.txt")
    if hashed:  # hashes go in a requirements file only; all of them then, pip's rule
        listed.write_text("".join(f"{r}\n" for r in reqs), encoding="utf-8")
    asked = ["--require-hashes", "-r", str(listed)] if hashed else list(reqs)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
            "--quiet", *platform_args(arch), "-d", str(dest), *asked]  # fmt: skip
    if index:
        argv[4:4] = ["--extra-index-url", index]
    # No deadline of ours: pip's own (--timeout, 15 s a read) ends a stalled index, and a large
    # wheel on a slow line may take as long as it takes.
    try:
        return process.run(argv, timeout=None)
    finally:
        listed.unlink(missing_ok=True)


def _pip_download(req: str, folder: Path, name: str, index: str | None, arch: Arch) -> None:
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    proc = _pip(partial, [req], index, arch)
    if not proc.ok:
        shutil.rmtree(partial, ignore_errors=True)
        tail = (proc.err.strip().splitlines() or ["(no output)"])[-1]
        if "No space left" in proc.err:
            raise DiskFull(f"pip download {req}: no space left on device under {folder.parent}")
        if "DO NOT MATCH THE HASHES" in proc.err:
            raise HashMismatch(_mismatch(name, req, arch, proc.err))
        raise BuildFailed(
            f"pins.{name}: pip could not download '{req}' for the local profile ({arch}): "
            f'{tail}; fix the pin, or set local = "skip: why" on it'
        )
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)


def _mismatch(name: str, req: str, arch: Arch, err: str) -> str:
    """pip's several lines about a file of other bytes, as one."""
    import re

    got = re.search(r" from (\S+)[^\n]*\n\s*Expected sha256 .*\n\s*Got\s+(\w+)", err)
    what = "a downloaded file has a sha256"
    if got:
        shown = got.group(1).split("#", 1)[0].rsplit("/", 1)[-1]
        what = f"{shown} has sha256 {got.group(2)}"
    pinned = req.split(" ", 1)[0]
    return (
        f"pins.{name}: {what}, not one the local lock holds for {pinned} ({ARCH_NAMES[arch]}); "
        "refused and not kept: the index serves other bytes under a released name, find out "
        f"why before `twinbuild lock --upgrade {name}`"
    )


def copy_mirrors(rendered: Rendered, context: Path, mirrors: Mapping[str, str]) -> None:
    """Bare-clone each git pin's local mirror into the context; check the pinned commit is there."""
    for pin in rendered.installed:
        if pin.kind != "git" or pin.install != "pip":
            continue
        source = mirrors.get(pin.name)
        if source is None:  # render() skips git pins without a mirror; this is a safety net
            raise ConfigError(f"pins.{pin.name}: no mirror given; pass --mirror {pin.name}=PATH")
        dest = context / GENERATED / "mirrors" / f"{pin.name}.git"
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        cloned = run_git(dest.parent, "clone", "--quiet", "--bare", "--no-local", source, dest.name)
        if cloned.returncode != 0:
            tail = cloned.stderr.strip()[-300:]
            raise BuildFailed(f"pins.{pin.name}: git clone {source}: {tail}")
        found = run_git(dest, "cat-file", "-e", f"{pin.values.commit or pin.values.ref}^{{commit}}")
        if found.returncode != 0:
            raise ConfigError(
                f"pins.{pin.name}: commit {pin.values.commit or pin.values.ref} is not in the "
                f"mirror {source}; fetch it into the mirror or fix the pin"
            )


def _link(src: Path, dst: Path) -> None:
    if dst.exists():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-=" else "_" for c in text)[:120]
