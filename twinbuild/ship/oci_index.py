"""A variant's multi-arch image: an OCI image index naming one pushed image per architecture.

``twinbuild push`` pushes each architecture's image by digest; a variant of several architectures
then gets one more manifest, an index (``application/vnd.oci.image.index.v1+json``) whose entries
are those digests with their platforms, tagged ``<registry>/twinbuild-ci/<variant>:<profile>``.
Each entry is checked before it is named: it is in the variant's repository, it is an image
manifest (not another index), and its config says the architecture the entry claims, so an
amd64 digest never stands in the index as arm64. ``docker pull`` of the index's digest then gets
each machine its own architecture, and the evidence of each stays bound to the entry's digest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from twinbuild.errors import ConfigError, EngineError
from twinbuild.manifest.model import ARCH_NAMES, Arch
from twinbuild.ship.oci import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    Client,
    ImageRef,
    OciManifest,
    descriptor,
    json_object,
)

CONFIG_MAX = 1 << 20  # an image config is a few KiB


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One architecture's image in an index."""

    arch: Arch
    image: ImageRef


@dataclass(frozen=True, slots=True, kw_only=True)
class Index:
    ref: ImageRef  # the index's own digest
    entries: tuple[Entry, ...]

    def describe(self) -> str:
        archs = ", ".join(f"{e.arch} {e.image.digest[:19]}" for e in self.entries)
        return f"{self.ref} (index: {archs})"


def image_arch(client: Client, image: ImageRef, manifest: OciManifest) -> Arch:
    """The architecture an image manifest's config names; EngineError for anything else."""
    what = f"read {image}"
    doc = json_object(manifest.data, what)
    media = doc.get("mediaType") or manifest.media_type
    if media in (OCI_INDEX, DOCKER_LIST) or "manifests" in doc:
        raise ConfigError(f"{image}: is an image index, not one architecture's image")
    if media not in (OCI_MANIFEST, DOCKER_MANIFEST) or "config" not in doc:
        raise EngineError(f"{what}: not an image manifest ({media!r}); refusing it")
    config = descriptor(doc["config"], f"{what}: config")
    if config.size > CONFIG_MAX:
        raise EngineError(f"{what}: its config claims {config.size} bytes; refusing it")
    body = client.blob(
        image.repository, config.digest, limit=CONFIG_MAX, note="an image config is small"
    )
    found = json_object(body, f"{what}: config")
    name = f"{found.get('os')}/{found.get('architecture')}"
    for arch, short in ARCH_NAMES.items():
        if name == f"linux/{short}":
            return arch
    raise ConfigError(
        f"{image}: its config says {name[:60]!r}, not an architecture twinbuild builds"
    )


def children(client: Client, image: ImageRef, manifest: OciManifest) -> tuple[Entry, ...]:
    """The entries of the index ``manifest`` (of ``image``), each checked to be the image of
    the architecture it claims; () for a single image."""
    what = f"read {image}"
    doc = json_object(manifest.data, what)
    if (doc.get("mediaType") or manifest.media_type) not in (OCI_INDEX, DOCKER_LIST):
        return ()
    entries: list[Entry] = []
    for i, item in enumerate(doc.get("manifests") or []):
        child = descriptor(item, f"{what}: manifests[{i}]")
        platform = item.get("platform") if isinstance(item, dict) else None
        if not isinstance(platform, dict) or (platform.get("os"), platform.get("architecture")) == (
            "unknown",
            "unknown",
        ):
            continue  # an attestation (BuildKit's is unknown/unknown): no engine runs it
        ref = ImageRef(registry=image.registry, repository=image.repository, digest=child.digest)
        found = client.manifest(image.repository, child.digest)
        if found is None:
            raise EngineError(f"{what}: the registry lacks its entry {child.digest}")
        arch = image_arch(client, ref, found)
        claimed = f"{platform.get('os')}/{platform.get('architecture')}"
        if claimed != arch:
            raise ConfigError(
                f"{image}: entry {child.digest[:19]} claims {claimed[:40]!r} but is a {arch} "
                "image; refusing the index"
            )
        entries.append(Entry(arch=arch, image=ref))
    if len({e.arch for e in entries}) != len(entries):
        raise ConfigError(f"{image}: names an architecture twice; refusing the index")
    return tuple(entries)


def put_index(
    client: Client,
    repository: str,
    tag: str,
    images: Mapping[Arch, ImageRef],
    *,
    annotations: Mapping[str, str] | None = None,
) -> Index:
    """Push the index of ``images`` (one per architecture, all in ``repository``) under
    ``tag``; read it back by digest."""
    entries: list[dict[str, object]] = []
    made: list[Entry] = []
    for arch, image in images.items():
        if image.repository != repository or image.registry != client.registry:
            raise ConfigError(
                f"{image}: not in {client.registry}/{repository}; an index names images of its "
                "own repository"
            )
        found = client.manifest(repository, image.digest)
        if found is None:
            raise ConfigError(f"{image}: the registry has no such digest; push it first")
        own = image_arch(client, image, found)
        if own != arch:
            raise ConfigError(f"{image}: is a {own} image, not {arch}; pass that architecture's")
        entries.append({
            "mediaType": found.media_type,
            "digest": found.digest,
            "size": len(found.data),
            "platform": {"architecture": ARCH_NAMES[arch], "os": "linux"},
        })  # fmt: skip
        made.append(Entry(arch=arch, image=image))
    doc = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": entries,
        "annotations": dict(annotations or {}),
    }
    index = OciManifest(
        media_type=OCI_INDEX, data=json.dumps(doc, sort_keys=True, indent=1).encode()
    )
    client.put_manifest(repository, tag, index)
    stored = client.manifest(repository, tag)
    if stored is None or stored.digest != index.digest:
        got = stored.digest if stored else "nothing"
        raise EngineError(f"{client.registry}/{repository}:{tag} names {got} after the push")
    ref = ImageRef(registry=client.registry, repository=repository, digest=index.digest)
    return Index(ref=ref, entries=tuple(made))
