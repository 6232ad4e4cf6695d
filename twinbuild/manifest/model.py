"""The pin manifest's model: platforms, the local profile, pins and their values per platform.

``loader.py`` builds it from ``pins/`` (the only code that reads it); everything else works on
these frozen records. A pin sets its :class:`Values` once for all platforms or per platform;
:meth:`Manifest.resolve` lays them over each other into one :class:`ResolvedPin` per platform.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

from twinbuild.manifest.tomlpos import KeyLines

Platform = Literal["cuda", "rocm"]
PLATFORMS: tuple[Platform, ...] = get_args(Platform)
Kind = Literal["pypi", "git", "url", "apt"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Install = Literal["pip", "checkout", "file", "apt"]
INSTALLS: tuple[Install, ...] = get_args(Install)
Profile = Literal["local", "production"]
PROFILES: tuple[Profile, ...] = get_args(Profile)

DEFAULT_PATH = Path("pins/manifest.toml")
SCHEMA = 1
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")
"""Pin and layer names (matched whole): they become file names and build-arg names."""
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A Docker tag, as the engine accepts it: no spaces, no '|' (it is printed in tables and refs)."""
REPOSITORY_RE = re.compile(r"[a-z0-9][a-z0-9._/:-]*")
"""Loosely, an image repository: lower case, no spaces or markup (the engine checks the rest)."""
BRANCH_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}")
"""A branch name a git pin may ``track`` (matched whole; git's other rules are checked too)."""
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
"""A dotted Python module name (``platforms.<p>.kernel_modules``)."""
#: A Docker size for shm_size: digits and a unit (b, k, m, g).
SIZE_RE = re.compile(r"[1-9][0-9]{0,5}[bkmg]")
#: What only the smoke run reads from a platform, not the image's build: kept out of its digest.
SMOKE_ONLY = ("imports", "kernel_modules", "all_reduce_floors", "shm_size")


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseImage:
    repository: str
    tag: str
    digest: str
    line: int = 0

    @property
    def ref(self) -> str:
        """The pull reference: tag for people, digest for the engine."""
        return f"{self.repository}:{self.tag}@{self.digest}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthFloor:
    """The least all-reduce bus bandwidth ``gpus`` GPUs of model ``gpu`` must reach at the
    largest message size of the smoke run (nccl-tests' busbw column), and where it comes from."""

    gpu: str  # the device name torch reports, e.g. "NVIDIA H200"
    gpus: int  # GPUs in the all-reduce, two or more
    busbw_gbs: float  # GB/s
    source: str
    line: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformSpec:
    name: Platform
    base: BaseImage
    python: str
    toolkit: str
    vendor: str
    gpu_archs: tuple[str, ...]
    imports: tuple[str, ...] = ()
    binaries: tuple[str, ...] = ()
    #: Extension modules whose device code the GPU check reads (cuobjdump / roc-obj-ls).
    kernel_modules: tuple[str, ...] = ()
    all_reduce_floors: tuple[BandwidthFloor, ...] = ()
    #: The GPU smoke container's /dev/shm; None: it shares the host's IPC namespace (--ipc=host).
    shm_size: str | None = None
    line: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalProfile:
    suite: str
    mirror: str
    packages: tuple[str, ...]
    imports: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Values:
    """The fields a pin may set once for all platforms or per platform."""

    kind: Kind | None = None
    dist: str | None = None
    version: str | None = None
    range: str | None = None
    repo: str | None = None
    commit: str | None = None
    ref: str | None = None
    url: str | None = None
    sha256: str | None = None
    package: str | None = None
    install: Install | None = None
    path: str | None = None
    layer: str | None = None
    index: str | None = None
    subdirectory: str | None = None
    local: str | None = None
    #: The branch a git pin's commit is taken from: what `pins outdated` and Renovate compare the
    #: commit with. Metadata, like ``why``: not in the image, its digest or the symmetry check.
    track: str | None = None


VALUE_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Values))
PIN_KEYS: tuple[str, ...] = (
    *VALUE_KEYS,
    "why",
    "floating",
    "divergence",
    "asymmetry",
    "installs",
    "platforms",
    *PLATFORMS,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    name: str
    common: Values
    overrides: Mapping[Platform, Values]
    platforms: tuple[Platform, ...]
    why: str
    floating: str | None = None
    divergence: str | None = None
    asymmetry: str | None = None
    #: A url pin whose ``version`` is not its download's own but what the download installs
    #: (rustup-init installing a toolchain) says so here; its ``--version`` bump keeps the url.
    installs: str | None = None
    line: int = 0
    explicit_platforms: bool = False

    def values_on(self, platform: Platform) -> Values:
        """Common values with that platform's overrides laid over them."""
        override = self.overrides.get(platform)
        if override is None:
            return self.common
        changes = {k: getattr(override, k) for k in VALUE_KEYS if getattr(override, k) is not None}
        # A platform that sets one of a pair replaces the other: a ref overrides the common
        # commit, a range overrides the common version (and the other way round).
        for one, other in (("commit", "ref"), ("version", "range")):
            if one in changes and other not in changes:
                changes[other] = None
            elif other in changes and one not in changes:
                changes[one] = None
        return replace(self.common, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedPin:
    """One pin's effective values on one platform: its :class:`Values` with the platform's
    overrides laid over the common ones and the defaults filled in (``kind``, ``install`` and
    ``layer`` are always set)."""

    name: str
    platform: Platform
    values: Values
    why: str
    floating: str | None
    line: int

    @property
    def kind(self) -> Kind:
        return cast(Kind, self.values.kind)

    @property
    def install(self) -> Install:
        return cast(Install, self.values.install)

    @property
    def layer(self) -> str:
        return cast(str, self.values.layer)

    @property
    def local_skip(self) -> str | None:
        """Why the local profile leaves the pin out, where the manifest says (``local``)."""
        return self.values.local

    def arg_prefix(self) -> str:
        """Build-arg prefix: ``torch_memory_saver`` -> ``TORCH_MEMORY_SAVER``."""
        return arg_prefix(self.name)

    def expected(self) -> str:
        """The pinned value as a person reads it."""
        v = self.values
        if self.kind == "git":
            return f"{v.repo}@{v.commit or v.ref}"
        if self.kind == "url":
            shown = f"{v.url} sha256:{v.sha256}"
            # a version the url does not carry (what the download installs) is shown too
            if v.version is not None and v.url is not None and v.version not in v.url:
                shown += f" version {v.version}"
            return shown
        if v.version is not None:
            return f"=={v.version}" if self.kind == "pypi" else v.version
        if v.range:
            return v.range
        return "(unpinned)"

    def value_key(self) -> tuple[str | None, ...]:
        """What must match across platforms for the pin to be symmetric (``SYMMETRIC_KEYS``)."""
        return tuple(getattr(self.values, k) for k in SYMMETRIC_KEYS)

    def flat(self) -> dict[str, Any]:
        """Every field in one mapping, the values beside the name and platform (``local`` as
        ``local_skip``): what the platform digest hashes and ``pins diff`` compares."""
        values = {k: getattr(self.values, k) for k in VALUE_KEYS if k != "local"}
        first = {"kind": values.pop("kind"), "install": values.pop("install")}
        return {
            "name": self.name, "platform": self.platform, **first, **values, "why": self.why,
            "floating": self.floating, "local_skip": self.local_skip, "line": self.line,
        }  # fmt: skip


#: Values that never reach an image: the branch a commit is taken from (``track``).
NOTE_VALUES: tuple[str, ...] = ("track",)
#: The values that must match across platforms for a pin to be symmetric: all but where it is
#: built (``layer``), whether the local profile takes it (``local``) and the notes.
SYMMETRIC_KEYS: tuple[str, ...] = tuple(
    k for k in VALUE_KEYS if k not in ("layer", "local", *NOTE_VALUES)
)


#: https://host[:port]/path, no credentials, spaces or query: what an OCI source label holds.
SOURCE_RE = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/[A-Za-z0-9._~/-]+")


def arg_prefix(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    path: Path
    text: str
    platforms: Mapping[Platform, PlatformSpec]
    local: LocalProfile
    pins: Mapping[str, Pin]
    keylines: KeyLines = field(repr=False)
    #: The images' OCI ``source`` label where declared; else the run or the git remote says.
    source: str | None = None
    _resolved: dict[Platform, list[ResolvedPin]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def resolve(self, platform: Platform) -> list[ResolvedPin]:
        """Every pin of ``platform`` with its effective values (computed once per manifest)."""
        found = self._resolved.get(platform)
        if found is None:
            found = [_resolve(p, platform) for p in self.pins.values() if platform in p.platforms]
            self._resolved[platform] = found
        return list(found)

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()

    def platform_digest(self, platform: Platform, profile: Profile = "production") -> str:
        """Hash of what this platform's image takes from the manifest in ``profile``, only that.

        A CUDA-only pin change leaves the ROCm digest unchanged; so does a change to a ``why``.
        """
        return self._digest(platform, profile, skip=("line", *SMOKE_ONLY))

    def claims_digest(self, platform: Platform) -> str:
        """Hash of all this manifest says about ``platform``'s production image: what its build
        takes (:meth:`platform_digest`) and what the smoke run holds it to (:data:`SMOKE_ONLY`,
        and the versions and architectures no build arg carries). Not a ``why``, not a comment.
        """
        return self._digest(platform, "production", skip=("line",))

    def _digest(self, platform: Platform, profile: Profile, *, skip: tuple[str, ...]) -> str:
        setting: object = self.platforms[platform] if profile == "production" else self.local
        data = {
            "platform": platform,
            "profile": profile,
            "setting": _plain(setting, skip=skip),
            "pins": [
                _skip(p.flat(), ("line", "why", "floating", *NOTE_VALUES))
                for p in self.resolve(platform)
            ],
        }
        blob = json.dumps(data, sort_keys=True, default=lambda o: _plain(o, skip=("line",)))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()

    def find(self, name: str) -> Pin | None:
        """The pin called ``name``, or the one it names after -/_/. normalisation."""
        found = self.pins.get(name)
        if found is not None:
            return found
        wanted = norm(name)
        return next((pin for key, pin in self.pins.items() if norm(key) == wanted), None)

    def line_of(self, *key: str) -> int:
        return self.keylines.line_of(key)

    def where(self, *key: str) -> str:
        """``pins/manifest.toml:42`` for a dotted key path."""
        return f"{self.path}:{self.line_of(*key)}"

    def layers(self) -> list[str]:
        """Every pip layer named by any pin on any platform, in first-seen order."""
        seen: dict[str, None] = {}
        for platform in PLATFORMS:
            for pin in self.resolve(platform):
                if pin.install == "pip":
                    seen.setdefault(pin.layer, None)
        return list(seen)


def _plain(obj: Any, *, skip: tuple[str, ...]) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in skip}


def _skip(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in keys}


def _default_install(kind: Kind, values: Values) -> Install:
    if kind == "apt":
        return "apt"
    if kind == "url" and values.dist is None:
        return "file"
    return "pip"


def _resolve(pin: Pin, platform: Platform) -> ResolvedPin:
    v = pin.values_on(platform)
    kind = cast(Kind, v.kind)
    dist = v.dist
    if dist is None and kind == "pypi":
        dist = pin.name
    if dist == "":
        dist = None
    values = replace(
        v,
        dist=dist,
        install=v.install or _default_install(kind, v),
        package=v.package if v.package is not None else (pin.name if kind == "apt" else None),
        layer=v.layer or "pins",
    )
    return ResolvedPin(
        name=pin.name,
        platform=platform,
        values=values,
        why=pin.why,
        floating=pin.floating,
        line=pin.line,
    )


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def iter_resolved(manifest: Manifest) -> Iterator[ResolvedPin]:
    """Every (pin, platform) pair, CUDA first."""
    for platform in PLATFORMS:
        yield from manifest.resolve(platform)
