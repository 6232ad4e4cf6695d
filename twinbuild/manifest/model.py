"""The pin manifest's model: variants, their groups, the local profile, pins and their values.

``loader.py`` builds it from ``pins/`` (the only code that reads it); everything else works on
these frozen records. A *variant* is one named image (a vendor, a toolkit, a base, a recipe, one
or more architectures); each of its architectures builds one image, an :class:`ImageKey`. A pin
sets its :class:`Values` once for every variant, or per *selector*: a group of variants (a
vendor or toolkit family), one variant, or one architecture. :meth:`PinManifest.resolve` lays them
over each other, in that order, into one :class:`ResolvedPin` per image.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

from twinbuild.errors import ConfigError
from twinbuild.manifest.tomlpos import KeyLines

Arch = Literal["linux/amd64", "linux/arm64"]
ARCHS: tuple[Arch, ...] = get_args(Arch)
#: An architecture's short name: the image tag's suffix, file names, a pin's selector.
ARCH_NAMES: Mapping[Arch, str] = {"linux/amd64": "amd64", "linux/arm64": "arm64"}
#: What ``uname -m`` (and an ELF's machine) says on each architecture.
MACHINES: Mapping[Arch, str] = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
Vendor = Literal["nvidia", "amd"]
VENDORS: tuple[Vendor, ...] = get_args(Vendor)
#: When a variant is validated on GPUs: every PR that changes it (the gate requires its
#: evidence), or the nightly run only.
Validation = Literal["pr", "nightly"]
VALIDATIONS: tuple[Validation, ...] = get_args(Validation)
Kind = Literal["pypi", "git", "url", "apt"]
KINDS: tuple[Kind, ...] = get_args(Kind)
Install = Literal["pip", "checkout", "file", "apt"]
INSTALLS: tuple[Install, ...] = get_args(Install)
Profile = Literal["local", "production"]
PROFILES: tuple[Profile, ...] = get_args(Profile)

DEFAULT_PATH = Path("pins/manifest.toml")
SCHEMA = 2
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""Pin, layer, variant and group names (matched whole): they become file names, tags, build args."""
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A Docker tag, as the engine accepts it: no spaces, no '|' (it is printed in tables and refs)."""
REPOSITORY_RE = re.compile(r"[a-z0-9][a-z0-9._/:-]*")
"""Loosely, an image repository: lower case, no spaces or markup (the engine checks the rest)."""
BRANCH_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}")
"""A branch name a git pin may ``track`` (matched whole; git's other rules are checked too)."""
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
"""A dotted Python module name (``variants.<v>.kernel_modules``)."""
#: A Docker size for shm_size: digits and a unit (b, k, m, g).
SIZE_RE = re.compile(r"[1-9][0-9]{0,5}[bkmg]")
#: A runner label as GitHub Actions matches it: no spaces, commas or expressions.
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
#: A build arg a recipe receives from ``build_args``: upper case, as recipes spell ARGs.
ARG_RE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
#: What only the smoke run reads from a variant, not the image's build: kept out of its digest.
SMOKE_ONLY = ("imports", "kernel_modules", "all_reduce_floors", "shm_size", "validate", "runners",
              "upstream")  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseImage:
    repository: str
    tag: str
    digest: str  # "" only when ``floating`` says why no digest is pinned yet
    floating: str | None = None
    line: int = 0

    @property
    def ref(self) -> str:
        """The pull reference: tag for people, digest for the engine."""
        if not self.digest:
            return f"{self.repository}:{self.tag}"
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
class Runners:
    """The runner labels of a variant's CI jobs; each job adds the architecture's own label."""

    build: tuple[str, ...] = ()
    gpu: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One named image of the manifest: built once per architecture it lists."""

    name: str
    vendor: Vendor
    toolkit: str
    archs: tuple[Arch, ...]
    recipe: str  # images/<recipe>/Dockerfile; the local profile's stage of the same name
    base: BaseImage
    python: str
    gpu_archs: tuple[str, ...]
    validate: Validation = "pr"
    runners: Runners = field(default_factory=Runners)
    #: This variant's own build args, over the manifest's shared ``[build_args]``.
    build_args: Mapping[str, str] = field(default_factory=dict)
    upstream: tuple[str, ...] = ()  # the upstream variant names this one builds
    imports: tuple[str, ...] = ()
    binaries: tuple[str, ...] = ()
    #: Extension modules whose device code the GPU check reads (cuobjdump / roc-obj-ls).
    kernel_modules: tuple[str, ...] = ()
    all_reduce_floors: tuple[BandwidthFloor, ...] = ()
    #: The GPU smoke container's /dev/shm; None: it shares the host's IPC namespace (--ipc=host).
    shm_size: str | None = None
    #: The base's glibc: the newest manylinux wheels ``twinbuild lock`` resolves for it.
    glibc: str = "2.28"
    line: int = 0

    def images(self) -> tuple[ImageKey, ...]:
        return tuple(ImageKey(variant=self.name, arch=arch) for arch in self.archs)


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class ImageKey:
    """One image: a variant on one architecture. ``name`` (``cu13-arm64``) names its tag's
    suffix, its build folder, its report and its evidence file."""

    variant: str
    arch: Arch

    @property
    def short(self) -> str:
        return ARCH_NAMES[self.arch]

    @property
    def name(self) -> str:
        return f"{self.variant}-{self.short}"

    def __str__(self) -> str:
        return f"{self.variant} ({self.arch})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """Variants a pin may be told apart by as one: a vendor or toolkit family, or a list."""

    name: str
    members: tuple[str, ...]
    line: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalProfile:
    suite: str
    mirror: str
    packages: tuple[str, ...]
    imports: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()  # what `twinbuild build` builds by default; () = every one
    line: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Values:
    """The fields a pin may set once for every variant or per selector."""

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

    def changes(self) -> dict[str, Any]:
        """The keys this (override) table sets."""
        return {k: getattr(self, k) for k in VALUE_KEYS if getattr(self, k) is not None}


VALUE_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Values))
PIN_KEYS: tuple[str, ...] = (
    *VALUE_KEYS,
    "why",
    "floating",
    "divergence",
    "asymmetry",
    "installs",
    "variants",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    name: str
    common: Values
    #: Per selector (a group, a variant or an architecture's short name), what it sets.
    overrides: Mapping[str, Values]
    variants: tuple[str, ...]  # every variant the pin applies to, in manifest order
    why: str
    listed: tuple[str, ...] = ()  # ``variants = [...]`` as written: variant and group names
    floating: str | None = None
    #: Per selector (a group or variant), why its values differ from the other variants'.
    divergence: Mapping[str, str] | None = None
    asymmetry: str | None = None
    #: A url pin whose ``version`` is not its download's own but what the download installs
    #: (rustup-init installing a toolchain) says so here; its ``--version`` bump keeps the url.
    installs: str | None = None
    line: int = 0

    @property
    def explicit_variants(self) -> bool:
        return bool(self.listed)

    def values_on(self, selectors: tuple[str, ...]) -> Values:
        """Common values with the overrides of ``selectors`` laid over them, in order."""
        values = self.common
        for selector in selectors:
            override = self.overrides.get(selector)
            if override is not None:
                values = _lay(values, override)
        return values


def _lay(under: Values, over: Values) -> Values:
    changes = over.changes()
    # A table that sets one of a pair replaces the other: a ref overrides the common commit, a
    # range overrides the common version (and the other way round).
    for one, other in (("commit", "ref"), ("version", "range")):
        if one in changes and other not in changes:
            changes[other] = None
        elif other in changes and one not in changes:
            changes[one] = None
    return replace(under, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedPin:
    """One pin's effective values on one image: its :class:`Values` with the image's overrides
    laid over the common ones and the defaults filled in (``kind``, ``install`` and ``layer`` are
    always set)."""

    name: str
    image: ImageKey
    values: Values
    why: str
    floating: str | None
    line: int

    @property
    def variant(self) -> str:
        return self.image.variant

    @property
    def arch(self) -> Arch:
        return self.image.arch

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
            shown = f"{v.url} sha256:{v.sha256 or '(not pinned)'}"
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
        """What must match across variants for the pin to be symmetric (``SYMMETRIC_KEYS``)."""
        return tuple(getattr(self.values, k) for k in SYMMETRIC_KEYS)

    def flat(self) -> dict[str, Any]:
        """Every field in one mapping, the values beside the name and image (``local`` as
        ``local_skip``): what the variant digest hashes and ``pins diff`` compares."""
        values = {k: getattr(self.values, k) for k in VALUE_KEYS if k != "local"}
        first = {"kind": values.pop("kind"), "install": values.pop("install")}
        return {
            "name": self.name, "variant": self.variant, "arch": self.arch, **first, **values,
            "why": self.why, "floating": self.floating, "local_skip": self.local_skip,
            "line": self.line,
        }  # fmt: skip


#: Values that never reach an image: the branch a commit is taken from (``track``).
NOTE_VALUES: tuple[str, ...] = ("track",)
#: The values that must match across variants for a pin to be symmetric: all but where it is
#: built (``layer``), whether the local profile takes it (``local``) and the notes.
SYMMETRIC_KEYS: tuple[str, ...] = tuple(
    k for k in VALUE_KEYS if k not in ("layer", "local", *NOTE_VALUES)
)


#: https://host[:port]/path, no credentials, spaces or query: what an OCI source label holds.
SOURCE_RE = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/[A-Za-z0-9._~/-]+")


def arg_prefix(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


@dataclass(frozen=True, slots=True, kw_only=True)
class PinManifest:
    path: Path
    text: str
    variants: Mapping[str, Variant]
    local: LocalProfile
    pins: Mapping[str, Pin]
    keylines: KeyLines = field(repr=False)
    groups: Mapping[str, Group] = field(default_factory=dict)
    #: Recipe settings every variant receives as build args (a variant's own win).
    build_args: Mapping[str, str] = field(default_factory=dict)
    #: The images' OCI ``source`` label where declared; else the run or the git remote says.
    source: str | None = None
    _resolved: dict[ImageKey, list[ResolvedPin]] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: Each variant's groups and pins, made once (:meth:`_index`): asking every group and pin
    #: whether it holds a variant made n variants cost n^2 (3,000 variants: 12 s).
    _groups_of: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False, compare=False)
    _pins_on: dict[str, list[Pin]] = field(default_factory=dict, repr=False, compare=False)

    # -- variants and images ---------------------------------------------------------------

    def variant(self, name: str) -> Variant:
        """The variant called ``name``; ConfigError naming the known ones otherwise."""
        found = self.variants.get(name)
        if found is None:
            # difflib's close matches only when a name is unknown: the CLI's start needs the
            # model, not the messages
            from twinbuild.manifest.messages import one_of

            raise ConfigError(
                f"{self.path}: variants.{name}: unknown variant '{name}'"
                f"{one_of(name, tuple(self.variants))}; `twinbuild variants` lists them"
            )
        return found

    def images(self, variants: tuple[str, ...] | None = None) -> list[ImageKey]:
        """Every image of ``variants`` (default: every variant), in manifest order."""
        names = tuple(self.variants) if variants is None else variants
        return [image for name in names for image in self.variant(name).images()]

    def image(self, variant: str, arch: Arch | None = None) -> ImageKey:
        """One image of ``variant``: on ``arch``, or its only architecture."""
        found = self.variant(variant)
        if arch is None:
            if len(found.archs) > 1:
                raise ConfigError(
                    f"{self.path}: variants.{variant}: builds {', '.join(found.archs)}; pass "
                    "--arch to say which image"
                )
            arch = found.archs[0]
        if arch not in found.archs:
            raise ConfigError(
                f"{self.path}: variants.{variant}.archs: {variant} does not build {arch} "
                f"(archs = {list(found.archs)})"
            )
        return ImageKey(variant=variant, arch=arch)

    def label(self, images: list[ImageKey] | tuple[ImageKey, ...]) -> str:
        """``cu13, cu12-x86, rocm720-mi35x (arm64)``: images named by variant, an architecture
        named only where a variant's images are not all there; manifest order."""
        wanted = set(images)
        order = {name: i for i, name in enumerate(self.variants)}
        names: list[str] = []
        for variant in sorted({i.variant for i in wanted}, key=lambda v: order.get(v, len(order))):
            found = self.variants.get(variant)
            mine = [i for i in (found.images() if found else ()) if i in wanted]
            mine += sorted(i for i in wanted if i.variant == variant and i not in mine)
            if found is not None and len(mine) == len(found.archs):
                names.append(variant)
            else:
                names.append(f"{variant} ({', '.join(i.short for i in mine)})")
        return ", ".join(names)

    def required(self) -> tuple[str, ...]:
        """The variants the PR gate requires evidence for (``validate = "pr"``)."""
        return tuple(v.name for v in self.variants.values() if v.validate == "pr")

    def local_variants(self) -> tuple[str, ...]:
        """What ``twinbuild build`` builds when no ``--variant`` is given."""
        return self.local.variants or tuple(self.variants)

    def members(self, selector: str) -> tuple[str, ...]:
        """The variants a selector (a variant or group name) stands for."""
        if selector in self.variants:
            return (selector,)
        group = self.groups.get(selector)
        return group.members if group is not None else ()

    def selectors(self, image: ImageKey) -> tuple[str, ...]:
        """The override tables that apply to ``image``, weakest first: its groups (in manifest
        order), the variant, the architecture."""
        self._index()
        groups = self._groups_of.get(image.variant)
        if groups is None:  # not a variant of this manifest: asked the long way
            groups = tuple(g.name for g in self.groups.values() if image.variant in g.members)
        return (*groups, image.variant, image.short)

    def _index(self) -> None:
        """Fill ``_groups_of`` and ``_pins_on`` in one pass over groups and pins (once)."""
        if self._groups_of or not self.variants:
            return
        groups: dict[str, list[str]] = {name: [] for name in self.variants}
        for group in self.groups.values():
            for member in dict.fromkeys(group.members):
                groups.setdefault(member, []).append(group.name)
        pins: dict[str, list[Pin]] = {name: [] for name in self.variants}
        for pin in self.pins.values():
            for variant in dict.fromkeys(pin.variants):
                pins.setdefault(variant, []).append(pin)
        self._pins_on.update(pins)
        self._groups_of.update({name: tuple(found) for name, found in groups.items()})

    def recipe_args(self, variant: str) -> dict[str, str]:
        """The recipe settings ``variant`` receives: the shared ones, its own over them."""
        return {**self.build_args, **self.variant(variant).build_args}

    # -- pins ------------------------------------------------------------------------------

    def resolve(self, image: ImageKey) -> list[ResolvedPin]:
        """Every pin of ``image`` with its effective values (computed once per manifest)."""
        found = self._resolved.get(image)
        if found is None:
            selectors = self.selectors(image)  # and the index of each variant's pins
            found = [_resolve(p, image, selectors) for p in self._pins_on.get(image.variant, [])]
            self._resolved[image] = found
        return list(found)

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()

    def image_digest(self, image: ImageKey, profile: Profile = "production") -> str:
        """Hash of what this image takes from the manifest in ``profile``, only that.

        A CUDA-only pin change leaves the ROCm digests unchanged; so does a change to a ``why``.
        """
        return self._digest(image, profile, skip=("line", *SMOKE_ONLY))

    def claims_digest(self, image: ImageKey) -> str:
        """Hash of all this manifest says about ``image`` in production: what its build takes
        (:meth:`image_digest`) and what the smoke run holds it to (:data:`SMOKE_ONLY`, and the
        versions and architectures no build arg carries). Not a ``why``, not a comment.
        """
        return self._digest(image, "production", skip=("line",))

    def _digest(self, image: ImageKey, profile: Profile, *, skip: tuple[str, ...]) -> str:
        variant = self.variant(image.variant)
        setting: object = variant if profile == "production" else self.local
        data = {
            "image": {"variant": image.variant, "arch": image.arch},
            "profile": profile,
            "setting": _plain(setting, skip=skip),
            "recipe_args": self.recipe_args(image.variant),
            "pins": [
                _skip(p.flat(), ("line", "why", "floating", *NOTE_VALUES))
                for p in self.resolve(image)
            ],
        }
        blob = json.dumps(data, sort_keys=True, default=_json_default)
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
        """Every pip layer named by any pin on any image, in first-seen order."""
        seen: dict[str, None] = {}
        for image in self.images():
            for pin in self.resolve(image):
                if pin.install == "pip":
                    seen.setdefault(pin.layer, None)
        return list(seen)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return dict(obj)
    return _plain(obj, skip=("line",))


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


def _resolve(pin: Pin, image: ImageKey, selectors: tuple[str, ...]) -> ResolvedPin:
    v = pin.values_on(selectors)
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
        image=image,
        values=values,
        why=pin.why,
        floating=pin.floating,
        line=pin.line,
    )


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def iter_resolved(manifest: PinManifest) -> Iterator[ResolvedPin]:
    """Every (pin, image) pair, in manifest order."""
    for image in manifest.images():
        yield from manifest.resolve(image)
