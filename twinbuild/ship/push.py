"""`twinbuild push`: push each built image to the registry and name it by digest.

The build record (``build/<profile>/<variant>/<arch>/image.json``) says which image the build
made; it is tagged ``REGISTRY/twinbuild-ci/<variant>:<profile>-<arch>`` and pushed through the
engine. A variant of several architectures, each pushed, then gets its image index
(``ship.oci_index``), tagged ``REGISTRY/twinbuild-ci/<variant>:<profile>``. That is the CI
namespace: release tags live in ``REGISTRY/twinbuild/<variant>``, which only `twinbuild release`
writes. The tags are only handles (and the build cache of the next build outside CI, see
``twinbuild.builder.image``): what is printed, recorded and handed to the GPU job is
``REPOSITORY@sha256:DIGEST``, which cannot move: each architecture's own digest, and the
index's. A digest the registry already holds is pushed again at the cost of one manifest: the
engine sends no layer the registry has. Where each architecture was built on a machine of its
own (CI), ``twinbuild push --index`` makes the index from the digests those pushes printed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from twinbuild.builder.build_record import BuildRecord, PushRecord, record_path
from twinbuild.engine.api import EngineAPI
from twinbuild.engine.registry_names import cache_ref, ci_ref, index_ref, repository
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import DEFAULT_PATH, Arch, ImageKey, PinManifest, Profile
from twinbuild.util.activity import Say

if TYPE_CHECKING:  # a push without --index speaks to the engine alone
    from twinbuild.ship.oci import Client


@dataclass(frozen=True, slots=True, kw_only=True)
class PushOptions:
    """What `twinbuild push` was asked for."""

    root: Path = Path()
    manifest: Path = DEFAULT_PATH
    variant: str | None = None  # None: the local profile's variants (every one in production)
    arch: Arch | None = None  # None: the host's architecture (every one with all_archs)
    all_archs: bool = False  # --all-archs: the emulated architectures' images too
    profile: Profile = "local"
    registry: str | None = None  # --registry; None: TWINBUILD_REGISTRY, else the private one
    github_output: Path | None = None  # $GITHUB_OUTPUT inside Actions
    #: ``--index REF``: make the variant's index of these pushed images (one per architecture)
    #: instead of pushing built ones.
    index: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PushResult:
    image: ImageKey
    ref: str  # REPOSITORY@sha256:DIGEST
    image_id: str
    layers_sent: int
    layers_present: int

    def describe(self) -> str:
        moved = (
            "nothing transferred: the registry had every layer"
            if self.layers_sent == 0
            else f"{self.layers_sent} layers sent, {self.layers_present} already there"
        )
        return f"{self.image.name}: {self.ref} ({moved})"


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexResult:
    variant: str
    ref: str  # REPOSITORY@sha256:DIGEST of the index
    archs: dict[Arch, str]  # each architecture's REPOSITORY@sha256:DIGEST

    def describe(self) -> str:
        named = ", ".join(f"{a} {r.rpartition('@')[2][:19]}" for a, r in self.archs.items())
        return f"{self.variant}: {self.ref} (index of {named})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pushes:
    images: list[PushResult]
    indexes: list[IndexResult]

    def text(self) -> str:
        """One line per image pushed, then one per index made (the command's data)."""
        lines = [r.describe() for r in self.images] + [i.describe() for i in self.indexes]
        return "".join(line + "\n" for line in lines)

    def outputs(self) -> dict[str, str]:
        """``<image>-image`` for each image (``cu13-arm64-image``), ``<variant>-image`` for
        each variant: its index where it has one, else its one image; and ``image`` where one
        image was pushed (what a workflow's matrix leg reads)."""
        found = {f"{r.image.name}-image": r.ref for r in self.images}
        for r in self.images:
            found.setdefault(f"{r.image.variant}-image", r.ref)
        for index in self.indexes:
            found[f"{index.variant}-image"] = index.ref
        if len(self.images) == 1 and not self.indexes:  # a matrix leg's one image: ``image``
            found["image"] = self.images[0].ref
        return found


def _record(path: Path) -> BuildRecord:
    data = BuildRecord.load(path)
    if data is None:
        raise ConfigError(
            f"{path}: no build record; run `twinbuild build` first (push sends what it built)"
        )
    return data


def _push_base(engine: EngineAPI, registry: str, data: BuildRecord, say: Say) -> None:
    """The local profile's base goes too: a fresh engine pulls it instead of running mmdebstrap,
    and only the very same base keeps the registry build cache of the layers above it."""
    ref = data.base.ref if data.base is not None else ""
    if not ref.startswith("twinbuild/base:") or engine.inspect_image(ref) is None:
        return
    remote = ci_ref(registry, ref)
    engine.tag(ref, remote)
    pushed = engine.push(remote)
    if pushed.layers_sent:
        say(f"base: {ref} -> {pushed.ref}")


def push_images(options: PushOptions, say: Say = print) -> Pushes:
    """`twinbuild push`: resolve the registry, connect to the engine (or, for ``--index``, the
    registry alone), push."""
    from twinbuild.engine.registry import resolve
    from twinbuild.manifest.loader import load

    manifest = load(options.manifest)
    registry = resolve(options.registry)
    if options.index:
        pushes = Pushes(images=[], indexes=[push_index(manifest, options, registry)])
    else:
        from twinbuild.engine.client import connect

        with connect() as engine:
            pushes = push(engine, manifest, options, registry, say)
    if options.github_output is not None:
        from twinbuild.util.github import append_outputs

        append_outputs(options.github_output, pushes.outputs())
    return pushes


def push(
    engine: EngineAPI, manifest: PinManifest, options: PushOptions, registry: str, say: Say = print
) -> Pushes:
    """Push each built image; record and print ``REPOSITORY@sha256:DIGEST``; then the index of
    each variant whose every architecture was pushed here."""
    from twinbuild.builder.image import wanted_images

    results: list[PushResult] = []
    wanted = wanted_images(
        manifest, options.variant, options.arch, options.profile, emulated=options.all_archs
    )
    for image in wanted:
        path = record_path(options.root, options.profile, image)
        data = _record(path)
        image_id = data.image_id
        if engine.inspect_image(image_id) is None:
            raise ConfigError(
                f"{path}: names {image_id}, which the engine at {engine.docker_host} lacks; "
                "rebuild it"
            )
        _push_base(engine, registry, data, say)
        tag = cache_ref(registry, image, options.profile)
        engine.tag(image_id, tag)
        pushed = engine.push(tag)
        result = PushResult(
            image=image, ref=pushed.ref, image_id=image_id,
            layers_sent=pushed.layers_sent, layers_present=pushed.layers_present,
        )  # fmt: skip
        # Recorded only after the registry confirmed the digest: a failed push records nothing.
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        data.with_push(PushRecord(ref=pushed.ref, registry=registry, at=at)).save(path)
        results.append(result)  # the caller prints them: data, not progress
    indexes: list[IndexResult] = []
    for name, variant in manifest.variants.items():
        mine = {r.image.arch: r.ref for r in results if r.image.variant == name}
        if len(variant.archs) > 1 and len(mine) == len(variant.archs):
            indexes.append(_index(name, mine, registry, options.profile))
    return Pushes(images=results, indexes=indexes)


def push_index(manifest: PinManifest, options: PushOptions, registry: str) -> IndexResult:
    """``push --variant V --index REF...``: the index of images other machines pushed."""
    from twinbuild.ship.oci import Client, ImageRef
    from twinbuild.ship.oci_index import image_arch

    if options.variant is None:
        raise ConfigError("--index needs --variant NAME: the variant whose images it names")
    variant = manifest.variant(options.variant)
    client = Client(registry)
    found: dict[Arch, str] = {}
    for text in options.index:
        ref = ImageRef.parse(text, where="--index")
        data = client.manifest(ref.repository, ref.digest)
        if data is None:
            raise ConfigError(f"--index {ref}: the registry has no such digest; push it first")
        arch = image_arch(client, ref, data)
        if arch not in variant.archs or arch in found:
            twice = "twice" if arch in found else f"but {variant.name} builds {list(variant.archs)}"
            raise ConfigError(f"--index {ref}: a {arch} image {twice}")
        found[arch] = str(ref)
    missing = [a for a in variant.archs if a not in found]
    if missing:
        raise ConfigError(
            f"--index: no image for {', '.join(missing)}; an index of {variant.name} names "
            f"every architecture it builds ({', '.join(variant.archs)})"
        )
    return _index(variant.name, found, registry, options.profile, client=client)


def _index(
    variant: str,
    refs: dict[Arch, str],
    registry: str,
    profile: Profile,
    *,
    client: Client | None = None,
) -> IndexResult:
    from twinbuild.ship.oci import Client, ImageRef
    from twinbuild.ship.oci_index import put_index

    chosen = client or Client(registry)
    repo = repository(registry, variant).removeprefix(f"{registry}/")
    images = {arch: ImageRef.parse(ref, where=f"{variant} {arch}") for arch, ref in refs.items()}
    tag = index_ref(registry, variant, profile).rpartition(":")[2]
    made = put_index(chosen, repo, tag, images, annotations={"org.twinbuild.variant": variant})
    return IndexResult(variant=variant, ref=str(made.ref), archs=dict(refs))
