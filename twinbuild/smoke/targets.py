"""What to smoke: the image the last build recorded, any image by reference, or this machine.

An image is always resolved to its id first, and smoked by that id; the registry digest a report
names is one the engine lists for that very image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinbuild.builder.build_record import BuildRecord, record_path
from twinbuild.engine.api import EngineAPI
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import (
    ARCH_NAMES,
    ARCHS,
    PROFILES,
    Arch,
    ImageKey,
    PinManifest,
    Profile,
)

LOCAL_PYTHON = "/opt/venv/bin/python"
PRODUCTION_PYTHON = "python3"
LABEL = "org.twinbuild."


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One thing to smoke: an image (by id) or this machine (``image_id`` None)."""

    image: ImageKey  # which variant, on which architecture
    profile: Profile
    image_id: str | None
    python: str
    inspect: Mapping[str, Any] = field(default_factory=dict)
    record: BuildRecord | None = (
        None  # build/<profile>/<variant>/<arch>/image.json, if it is this image
    )
    digest: str | None = None  # REPOSITORY@sha256:... this image was asked for (or pushed) as
    gpu_only: bool = False  # a bare GPU host (--host --gpu): its GPUs, not an image's contents


def built_target(eng: EngineAPI, root: Path, image: ImageKey, profile: Profile) -> Target:
    """The image the last ``twinbuild build`` recorded for ``image`` and ``profile``."""
    path = record_path(root, profile, image)
    record = BuildRecord.load(path)
    if record is None:
        raise ConfigError(
            f"{path}: no build record; run `twinbuild build --variant {image.variant} --arch "
            f"{image.arch} --profile {profile}` first, or pass --image REF"
        )
    image_id = record.image_id
    inspect = eng.inspect_image(image_id)
    if inspect is None:
        raise ConfigError(
            f"{path}: names {image_id}, which the engine at {eng.docker_host} lacks; rebuild it"
        )
    return Target(
        image=image,
        profile=profile,
        image_id=str(inspect["Id"]),
        python=record.python or python_for(profile),
        inspect=inspect,
        record=record,
    )


def image_target(
    eng: EngineAPI,
    root: Path,
    ref: str,
    manifest: PinManifest,
    variant: str | None,
    arch: Arch | None,
    profile: Profile | None,
) -> Target:
    """Any image, resolved to its id first: variant, architecture and profile from flags, else
    its labels; the architecture must be the image's own.

    A ``REPOSITORY@sha256:...`` the engine lacks is pulled by that digest (the GPU job of CI gets
    the image the build job pushed, never a rebuild; an index's digest names one image per
    architecture, so CI passes each architecture's own digest), and the report names exactly
    that digest.
    """
    inspect = eng.inspect_image(ref)
    if inspect is None and "@sha256:" in ref:
        eng.pull(ref)  # a digest the registry lacks: ConfigError (exit 2)
        inspect = eng.inspect_image(ref)
    if inspect is None:
        raise ConfigError(f"--image {ref}: the engine at {eng.docker_host} has no such image")
    labels = labels_of(inspect)
    name = variant or labels.get(LABEL + "variant")
    if name is None:
        raise ConfigError(
            f"--image {ref}: no org.twinbuild.variant label; pass --variant NAME "
            f"({', '.join(manifest.variants)})"
        )
    own = f"linux/{inspect.get('Architecture', '')}"
    wanted = arch or labels.get(LABEL + "arch") or own
    if wanted not in ARCHS:
        raise ConfigError(
            f"--image {ref}: architecture {wanted!r} is not one of {', '.join(ARCHS)}"
        )
    if own in ARCHS and own != wanted:
        raise ConfigError(
            f"--image {ref}: is a {own} image, not {wanted}; pass that architecture's digest"
        )
    image = manifest.image(manifest.variant(name).name, wanted)
    found = profile or labels.get(LABEL + "profile") or "production"
    if found not in PROFILES:
        raise ConfigError(
            f"--image {ref}: unknown profile {found!r}; pass --profile local|production"
        )
    prof: Profile = found
    record = BuildRecord.load(record_path(root, prof, image))
    if record is not None and record.image_id != inspect["Id"]:
        record = None  # the record describes another image
    python = record.python if record and record.python else python_for(prof)
    return Target(
        image=image,
        profile=prof,
        image_id=str(inspect["Id"]),
        python=python,
        inspect=inspect,
        record=record,
        digest=ref if "@sha256:" in ref else None,
    )


def host_target(image: ImageKey, profile: Profile, python: str | None, *, gpu_only: bool) -> Target:
    """This machine, through testinfra's local backend (``--host``)."""
    return Target(
        image=image,
        profile=profile,
        image_id=None,
        python=python or python_for(profile),
        gpu_only=gpu_only,
    )


def repo_digest(target: Target, digests: list[str]) -> str | None:
    """The registry digest the report names: the one asked for, else the one last pushed.

    Only a digest the engine lists for this very image counts, so evidence subjects are always
    registry digests that pull this image.
    """
    pushed = target.record.pushed if target.record is not None else None
    for wanted in (target.digest, pushed.ref if pushed is not None else None):
        if wanted and wanted in digests:
            return str(wanted)
    if target.digest:
        raise ConfigError(
            f"--image {target.digest}: the engine lists {digests or 'no registry digest'} for "
            f"{target.image_id}; pull it by that digest again"
        )
    return digests[0] if digests else None


def heading(target: Target) -> str:
    """The line above each suite's output: which image, and which one it is (id and tag)."""
    what = f"smoke {target.image.variant} {ARCH_NAMES[target.image.arch]} ({target.profile})"
    if target.image_id is None:
        return f"== {what}: this machine =="
    tags = list(target.inspect.get("RepoTags") or [])
    if target.record is not None and target.record.tag:
        tags = [target.record.tag]
    named = f" ({', '.join(tags[:2])})" if tags else ""
    return f"== {what}: image {target.image_id.removeprefix('sha256:')[:12]}{named} =="


def python_for(profile: str) -> str:
    return LOCAL_PYTHON if profile == "local" else PRODUCTION_PYTHON


def labels_of(inspect: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((inspect.get("Config") or {}).get("Labels") or {}).items()}
