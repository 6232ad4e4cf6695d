"""The lock of a local image: what images/local installs on the embedded base, file by file.

The local profile installs each pip pin it can (``manifest/rendered.py`` says which) ``--no-deps``
from a wheelhouse the host fills, on the embedded Debian base (CPython 3.11, glibc 2.36). So its
lock is those pins alone, each resolved by uv without its dependencies for that Python and
platform (``x86_64-manylinux_2_36``, ``aarch64-manylinux_2_36``), with every file's sha256: a
floating pin (``tqdm``, ``pyyaml``) is held at the locked version until ``twinbuild lock
--upgrade`` moves it. Git pins (installed from local mirrors) are locked at their commit.

The embedded base is made per machine from Debian's archive, so what it ships is not in this
committed file: its capture lives in the cache (``engine/base_capture.py``) and the local smoke
compares the image with this lock plus that capture. The lock is ``pins/lock/local/<image>.toml``
(``profile = "local"``), the local image's input (``inputs_rule.lock_owner``) and no other's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

from twinbuild.closure import uv
from twinbuild.closure.lock_model import (
    DEFAULT_INDEX,
    BaseState,
    ImageLock,
    LockedDist,
    LockedFile,
    LockedGit,
)
from twinbuild.closure.lockfile import LOCAL_DIR
from twinbuild.closure.resolve import dist_name
from twinbuild.manifest.model import MACHINES, ImageKey, PinManifest, ResolvedPin
from twinbuild.manifest.rendered import render, requirement

#: The embedded base's CPython (Debian bookworm's) and glibc: what the local lock resolves for.
LOCAL_PYTHON = "3.11"
LOCAL_GLIBC = "2.36"
#: What a local lock's ``[base]`` says: the base is this machine's own, captured in the cache.
EMBEDDED_BASE = "twinbuild/base (embedded, made per machine by `twinbuild base`)"
EMBEDDED_NOTE = (
    "the embedded base is made per machine from Debian's archive: its installed set is "
    "captured into the cache by `twinbuild base`, never committed"
)


def local_platform(image: ImageKey) -> str:
    return f"{MACHINES[image.arch]}-manylinux_{LOCAL_GLIBC.replace('.', '_')}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalAsked:
    """What a local image installs from PyPI (``pins``: pin, requirement) and from git."""

    pins: tuple[tuple[ResolvedPin, str], ...]
    git: tuple[ResolvedPin, ...]

    def lines(self) -> tuple[str, ...]:
        """The lock's ``asked``: any change makes it stale."""
        return tuple(
            f"no-deps{f' index {p.values.index}' if p.values.index else ''}: {req}"
            for p, req in self.pins
        )

    def digest(self) -> str:
        """The local lock's ``manifest-digest``: what the manifest asks of this image here."""
        blob = json.dumps([self.lines(), [(g.name, g.values.repo, g.values.commit or g.values.ref)
                                          for g in self.git]])  # fmt: skip
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def local_asked(manifest: PinManifest, image: ImageKey) -> LocalAsked:
    rendered = render(manifest, image, "local")
    pins = tuple(
        (pin, requirement(pin))
        for pin in rendered.installed
        if pin.install == "pip" and pin.kind == "pypi"
    )
    git = tuple(
        pin for pin in manifest.resolve(image)
        if pin.kind == "git" and pin.install == "pip" and pin.local_skip is None
    )  # fmt: skip
    return LocalAsked(pins=pins, git=git)


def resolve_local(
    manifest: PinManifest,
    image: ImageKey,
    previous: ImageLock | None,
    *,
    index_url: str | None,
    upgrade_all: bool,
    upgrade: frozenset[str],
    resolver: str,
) -> ImageLock:
    """Resolve ``image``'s local lock (nothing is written here): each pin alone, its files'
    hashes; the previous lock's version kept wherever the pin still allows it."""
    what = local_asked(manifest, image)
    source = str(LOCAL_DIR / f"{image.name}.toml")
    platform = local_platform(image)
    by_index: dict[str | None, list[str]] = {}
    for pin, req in what.pins:
        by_index.setdefault(pin.values.index, []).append(req)
    kept = _kept(what, previous, upgrade_all=upgrade_all, upgrade=upgrade)
    pins_of: dict[str, list[str]] = {}
    for pin, req in what.pins:
        pins_of.setdefault(dist_name(req), []).append(pin.name)
    dists: dict[str, LockedDist] = {}
    for index, reqs in by_index.items():
        ask = uv.Ask(
            requirements=tuple(reqs), python=LOCAL_PYTHON, platform=platform, no_deps=True,
            index_url=index_url, extra_index=index, upgrade=upgrade_all,
            upgrade_packages=tuple(sorted(upgrade)), source=source,
            constraints=tuple(kept.get(dist_name(r), "") for r in reqs if dist_name(r) in kept),
        )  # fmt: skip
        for one in uv.resolve_cached_first(ask):
            dists[one.name] = LockedDist(
                name=one.name, version=one.version, origin="layer",
                index=index or DEFAULT_INDEX,
                files=tuple(LockedFile(name=n, sha256=s) for n, s in one.files),
                pins=tuple(pins_of.get(one.name, ())), no_deps=True,
            )  # fmt: skip
    return ImageLock(
        image=image.name, variant=image.variant, arch=image.arch, python=LOCAL_PYTHON,
        platform=platform, manifest_digest=what.digest(),
        base=BaseState(image=EMBEDDED_BASE, captured=False, note=EMBEDDED_NOTE),
        resolver=resolver, asked=what.lines(), profile="local",
        dists=tuple(dists[n] for n in sorted(dists)),
        git=tuple(_git(pin) for pin in what.git),
    )  # fmt: skip


def _kept(
    what: LocalAsked, previous: ImageLock | None, *, upgrade_all: bool, upgrade: frozenset[str]
) -> dict[str, str]:
    """The previous lock's versions (``name==version``) the pins still allow and nobody moves."""
    if previous is None or upgrade_all:
        return {}
    out: dict[str, str] = {}
    for pin, req in what.pins:
        name = dist_name(req)
        before = previous.dist(name)
        if before is None or name in upgrade or pin.name in upgrade:
            continue
        try:
            spec = Requirement(req).specifier
        except InvalidRequirement:
            continue
        if spec.contains(before.version, prereleases=True):
            out[name] = f"{name}=={before.version}"
    return out


def _git(pin: ResolvedPin) -> LockedGit:
    v = pin.values
    if v.commit:
        return LockedGit(pin=pin.name, repo=v.repo or "", ref="", commit=v.commit,
                         dist=v.dist or "")  # fmt: skip
    return LockedGit(
        pin=pin.name, repo=v.repo or "", ref=v.ref or "", commit="", dist=v.dist or "",
        note=f"{v.ref} is resolved from the local mirror at build time; pin a commit in the "
        "manifest to lock it",
    )  # fmt: skip


def local_stale_reason(
    manifest: PinManifest, image: ImageKey, previous: ImageLock | None
) -> str | None:
    """Why ``image``'s local lock must be made again; None when it is up to date."""
    if previous is None:
        return "no lock yet"
    if previous.manifest_digest != local_asked(manifest, image).digest():
        return "the pins the local profile installs changed"
    return None
