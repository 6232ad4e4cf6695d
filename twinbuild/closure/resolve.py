"""One image's lock: what its pins ask for, resolved by uv for its Python and platform.

What is asked (:func:`asked`): every PyPI pin the image pip-installs, split the way its recipe
installs them: a layer installed with its dependencies is resolved with them; a ``--no-deps``
layer (the recipe says which, ``layers.py``) is resolved alone, its own files only; a pin on an
index of its own is resolved against that index (where it does not answer, the entry stays and
says so). Every exact pin overrides what any dependency asks of it, as the recipe's later,
forced install does; the base's captured set constrains the rest. Unless upgrading, the
previous lock's versions are kept wherever the manifest still allows them, so a lock run moves
only what it must.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from twinbuild.closure import uv
from twinbuild.closure.capture import BaseCapture, capture_command
from twinbuild.closure.layers import no_deps_layers
from twinbuild.closure.lock_model import (
    DEFAULT_INDEX,
    BaseState,
    ImageLock,
    LockedApt,
    LockedDist,
    LockedFile,
    LockedGit,
)
from twinbuild.closure.lockfile import LOCK_DIR
from twinbuild.closure.refs import resolve_ref
from twinbuild.errors import ConfigError, IndexUnreachable, ResolutionFailed
from twinbuild.manifest.model import MACHINES, ImageKey, PinManifest, ResolvedPin
from twinbuild.manifest.rendered import recipe_path, requirement

_NO_FILE = re.compile(r"Because ([A-Za-z0-9._-]+)==(\S+) has no wheels with a matching platform")
#: How a lock entry of a pin no file of which this image's platform can install begins.
NO_FILE_NOTE = "the index has no file of this version for"


@dataclass(frozen=True, slots=True, kw_only=True)
class Asked:
    """What one image's lock resolves, from the manifest and the recipe alone."""

    with_deps: tuple[str, ...]
    no_deps: tuple[str, ...]
    own_index: tuple[tuple[str, str], ...]  # (index, requirement)
    exact: tuple[str, ...]  # name==version of every exact PyPI pin: overrides
    pins_of: dict[str, tuple[str, ...]]  # normalised dist name -> the pins naming it
    git: tuple[ResolvedPin, ...]
    apt: tuple[ResolvedPin, ...]
    python: str
    platform: str

    def lines(self) -> tuple[str, ...]:
        """What the lock records as ``asked``: any change to it makes the lock stale."""
        return (
            *(f"deps: {r}" for r in self.with_deps),
            *(f"no-deps: {r}" for r in self.no_deps),
            *(f"index {i}: {r}" for i, r in self.own_index),
        )


def platform_of(manifest: PinManifest, image: ImageKey) -> str:
    glibc = manifest.variant(image.variant).glibc.replace(".", "_")
    return f"{MACHINES[image.arch]}-manylinux_{glibc}"


def dist_name(req: str) -> str:
    try:
        return canonicalize_name(Requirement(req).name)
    except InvalidRequirement:
        return canonicalize_name(req.split("@", maxsplit=1)[0].split("[", maxsplit=1)[0].strip())


def asked(manifest: PinManifest, root: Path, image: ImageKey) -> Asked:
    variant = manifest.variant(image.variant)
    no_deps = no_deps_layers(root / recipe_path(variant.recipe, "production"))
    with_deps: list[str] = []
    alone: list[str] = []
    own: list[tuple[str, str]] = []
    exact: list[str] = []
    pins_of: dict[str, list[str]] = defaultdict(list)
    git: list[ResolvedPin] = []
    apt: list[ResolvedPin] = []
    for pin in manifest.resolve(image):
        if pin.kind == "git":
            git.append(pin)
        elif pin.kind == "apt":
            apt.append(pin)
        elif pin.kind == "pypi" and pin.install == "pip":
            req = requirement(pin)
            name = dist_name(req)
            pins_of[name].append(pin.name)
            if pin.values.version is not None:
                exact.append(f"{name}=={pin.values.version}")
            if pin.values.index:
                own.append((pin.values.index, req))
            elif pin.layer in no_deps:
                alone.append(req)
            else:
                with_deps.append(req)
    return Asked(
        with_deps=tuple(with_deps), no_deps=tuple(alone), own_index=tuple(own),
        exact=tuple(exact), pins_of={k: tuple(v) for k, v in pins_of.items()},
        git=tuple(git), apt=tuple(apt), python=variant.python,
        platform=platform_of(manifest, image),
    )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRequest:
    manifest: PinManifest
    root: Path
    image: ImageKey
    previous: ImageLock | None
    capture: BaseCapture | None
    index_url: str | None = None
    upgrade_all: bool = False
    upgrade: frozenset[str] = frozenset()  # normalised dist names or pin names to move
    resolver: str = "uv"
    #: The pins' own indexes that did not answer in this run (shared by its images).
    unreachable: set[str] = field(default_factory=set)


def _kept(request: ImageRequest, what: Asked) -> list[str]:
    """The previous lock's versions, as constraints, wherever the manifest still allows them."""
    if request.previous is None or request.upgrade_all:
        return []
    specs: dict[str, list[Requirement]] = defaultdict(list)
    for req in (*what.with_deps, *what.no_deps):
        try:
            parsed = Requirement(req)
        except InvalidRequirement:
            continue
        specs[canonicalize_name(parsed.name)].append(parsed)
    out = []
    for dist in request.previous.dists:
        if dist.name in request.upgrade or dist.origin == "base" or dist.index != DEFAULT_INDEX:
            continue
        if any(not r.specifier.contains(dist.version, prereleases=True) for r in specs[dist.name]):
            continue  # the manifest moved it: its pin decides
        out.append(f"{dist.name}=={dist.version}")
    return out


def _base_constraints(capture: BaseCapture | None, what: Asked) -> list[str]:
    if capture is None:
        return []
    return [f"{n}=={v}" for n, v in sorted(capture.dists.items()) if n not in what.pins_of]


def resolve_image(request: ImageRequest) -> ImageLock:
    """Resolve one image's lock (nothing is written here)."""
    manifest, image = request.manifest, request.image
    what = asked(manifest, request.root, image)
    source = str(LOCK_DIR / f"{image.name}.toml")
    kept = _kept(request, what)
    base = _base_constraints(request.capture, what)
    moving = tuple(sorted(request.upgrade))

    def ask(reqs: tuple[str, ...], **kw: object) -> uv.Ask:
        return uv.Ask(
            requirements=reqs, python=what.python, platform=what.platform,
            index_url=request.index_url, upgrade=request.upgrade_all,
            upgrade_packages=moving, source=source, **kw,  # type: ignore[arg-type]
        )  # fmt: skip

    # pins the index has no file of for this platform (as the previous lock found them)
    unavailable: dict[str, str] = {
        d.name: d.version
        for d in (request.previous.dists if request.previous else ())
        if d.note.startswith(NO_FILE_NOTE) and f"{d.name}=={d.version}" in what.exact
        and d.name not in request.upgrade
    }  # fmt: skip

    def with_kept(reqs: tuple[str, ...], **kw: object) -> list[uv.Found]:
        reqs = tuple(r for r in reqs if dist_name(r) not in unavailable)
        if not reqs:
            return []
        try:
            return uv.resolve(ask(reqs, constraints=(*base, *kept), **kw))
        except ResolutionFailed as exc:
            missing = _NO_FILE.search(str(exc))
            if missing and canonicalize_name(missing.group(1)) in what.pins_of:
                # a pin this platform cannot install: locked as such (the lint names it), and
                # the rest resolved without it
                unavailable[canonicalize_name(missing.group(1))] = missing.group(2)
                return with_kept(reqs, **kw)
            if not kept:
                raise
        # the previous versions cannot all stay: resolve afresh within the manifest
        return uv.resolve(ask(reqs, constraints=tuple(base), **kw))

    alone = with_kept(what.no_deps, no_deps=True)
    own: list[tuple[str, uv.Found | None, str]] = []
    kept_own: dict[str, LockedDist] = {}
    for index, req in what.own_index:
        name = dist_name(req)
        before = request.previous.dist(name) if request.previous else None
        exact = next((s.version for s in Requirement(req).specifier if s.operator == "=="), "")
        if (
            before
            and before.version == exact
            and before.index == index
            and not (request.upgrade_all or name in request.upgrade)
        ):
            kept_own[name] = before  # an exact pin on its own index: asked again on --upgrade
            continue
        if index in request.unreachable:
            own.append((index, None, req))
            continue
        try:
            found = uv.resolve(ask((req,), no_deps=True, extra_index=index))
            own += [(index, f, "") for f in found]
        except IndexUnreachable:
            request.unreachable.add(index)  # asked once per run, not once per image
            own.append((index, None, req))
    pinned = {dist_name(x) for x in what.exact}
    overrides = (*what.exact, *(f"{f.name}=={f.version}" for f in alone if f.name not in pinned))
    deps = with_kept(what.with_deps, overrides=overrides)

    dists: dict[str, LockedDist] = {}
    for one in deps:
        dists[one.name] = _dist(one, what, request.capture, no_deps=False)
    for one in alone:
        dists[one.name] = _dist(one, what, request.capture, no_deps=True)
    dists.update(kept_own)
    for index, maybe, req in own:
        if maybe is not None:
            dists[maybe.name] = _dist(maybe, what, request.capture, no_deps=True, index=index)
            continue
        name = dist_name(req)
        spec = Requirement(req).specifier
        exact = next((s.version for s in spec if s.operator == "=="), "")
        dists[name] = LockedDist(
            name=name, version=exact, index=index, pins=what.pins_of.get(name, ()),
            no_deps=True,
            note=f"{index} did not answer here: its files' hashes are not locked; run "
            f"`twinbuild lock --upgrade {name}` where it answers",
        )  # fmt: skip
    for name, missing in unavailable.items():
        dists[name] = LockedDist(
            name=name, version=missing, pins=what.pins_of.get(name, ()),
            note=f"{NO_FILE_NOTE} {what.platform} (Python {what.python}): this image cannot "
            "install it; fix the pin for this image in pins/manifest.toml",
        )  # fmt: skip
    if request.capture is not None:
        for name, held in request.capture.dists.items():
            dists.setdefault(name, LockedDist(name=name, version=held, origin="base"))
    return ImageLock(
        image=image.name,
        variant=image.variant,
        arch=image.arch,
        python=what.python,
        platform=what.platform,
        manifest_digest=manifest.image_digest(image),
        base=_base_state(manifest, image, request.capture),
        resolver=request.resolver,
        asked=what.lines(),
        dists=tuple(dists[n] for n in sorted(dists)),
        git=tuple(_git(pin, request) for pin in what.git),
        apt=tuple(_apt(pin, manifest, image, request.capture) for pin in what.apt),
    )


def _dist(
    found: uv.Found,
    what: Asked,
    capture: BaseCapture | None,
    *,
    no_deps: bool,
    index: str = DEFAULT_INDEX,
) -> LockedDist:
    pins = what.pins_of.get(found.name, ())
    from_base = capture is not None and capture.dists.get(found.name) == found.version and not pins
    return LockedDist(
        name=found.name, version=found.version, origin="base" if from_base else "layer",
        index=index, files=tuple(LockedFile(name=n, sha256=s) for n, s in found.files),
        pins=pins, via=tuple(v for v in found.via if v != found.name), no_deps=no_deps,
    )  # fmt: skip


def _base_state(manifest: PinManifest, image: ImageKey, capture: BaseCapture | None) -> BaseState:
    ref = manifest.variant(image.variant).base.ref
    if capture is not None:
        return BaseState(image=ref, captured=True, capture_digest=capture.digest)
    return BaseState(
        image=ref,
        captured=False,
        note=f"no capture of the base's installed set exists here: "
        f"{capture_command(image.name, ref)}, and commit both",
    )


def _git(pin: ResolvedPin, request: ImageRequest) -> LockedGit:
    v = pin.values
    repo, dist = v.repo or "", v.dist or ""
    if v.commit:
        return LockedGit(pin=pin.name, repo=repo, ref="", commit=v.commit, dist=dist)
    ref = v.ref or ""
    old = next((g for g in request.previous.git if g.pin == pin.name), None) if (
        request.previous) else None  # fmt: skip
    moving = request.upgrade_all or pin.name in request.upgrade
    if old is not None and old.repo == repo and old.ref == ref and not moving:
        return old  # resolved, or not resolvable here: asked again on --upgrade
    answer = resolve_ref(repo, ref)
    if answer.commit:  # answer.why is this machine's error, not the lock's business
        return LockedGit(pin=pin.name, repo=repo, ref=ref, commit=answer.commit, dist=dist)
    return LockedGit(
        pin=pin.name, repo=repo, ref=ref, commit="", dist=dist,
        note=f"{ref} could not be resolved here ({repo} did not answer); where it answers run "
        f"`twinbuild lock --upgrade {pin.name}` and commit the lock",
    )  # fmt: skip


def _apt(
    pin: ResolvedPin, manifest: PinManifest, image: ImageKey, capture: BaseCapture | None
) -> LockedApt:
    package = pin.values.package or pin.name
    if pin.values.version:
        return LockedApt(pin=pin.name, package=package, version=pin.values.version)
    if capture is not None and package in capture.apt:
        return LockedApt(pin=pin.name, package=package, version=capture.apt[package])
    ref = manifest.variant(image.variant).base.ref
    return LockedApt(
        pin=pin.name, package=package, version="",
        note=f"the version the base's archive installs is known only from a capture of the "
        f"base: {capture_command(image.name, ref)}",
    )  # fmt: skip


def check_upgrade_names(manifest: PinManifest, names: tuple[str, ...]) -> None:
    """Every ``--upgrade NAME`` names a pin of the manifest (or a distribution: checked later)."""
    for name in names:
        if not name or name.startswith("-"):
            raise ConfigError(f"--upgrade {name!r}: not a pin or distribution name")
