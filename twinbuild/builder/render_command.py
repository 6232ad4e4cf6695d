"""``twinbuild render``: what a build of one image receives, with the base tag this host's
build would give it and, in production, the constraints from the image's lock
(``closure/constraints.py``); the manifest alone decides everything else
(``manifest/rendered.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from twinbuild.closure.constraints import with_lock
from twinbuild.engine.base import base_tag
from twinbuild.errors import TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, Arch, Profile
from twinbuild.manifest.rendered import UNKNOWN_BASE, Rendered, check_mirrors, render


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderOptions:
    """What ``twinbuild render`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()  # the repository root: where the image's lock lies (pins/lock/)
    variant: str
    arch: Arch | None = None  # None: the variant's first architecture
    profile: Profile = "local"  # build's default: both describe the same build
    mirrors: Mapping[str, str] = field(default_factory=dict)  # as given to build (--mirror)


def render_manifest(options: RenderOptions) -> Rendered:
    """Load the manifest and render what a build of ``options.variant`` receives.

    For the local profile ``BASE_IMAGE`` is the tag ``twinbuild build`` gives the base of that
    architecture, from the one derivation (``engine.base.base_tag``); it needs mmdebstrap
    installed (its version is an input), and where it is not the rendering says so instead of
    naming a tag that does not exist.
    """
    manifest = load(options.manifest)
    check_mirrors(manifest, options.mirrors)
    variant = manifest.variant(options.variant)
    image = manifest.image(variant.name, options.arch or variant.archs[0])
    if options.profile != "local":
        rendered = render(manifest, image, options.profile, mirrors=options.mirrors)
        return with_lock(options.root, rendered)
    local = manifest.local
    try:
        tag = base_tag(
            suite=local.suite, mirror=local.mirror, packages=local.packages, arch=image.arch
        )
    except TwinbuildError as exc:
        rendered = render(manifest, image, "local", mirrors=options.mirrors,
                          local_base=UNKNOWN_BASE)  # fmt: skip
        return replace(
            rendered, notes=[f"BASE_IMAGE: unknown until mmdebstrap is installed ({exc})"]
        )
    return render(manifest, image, "local", local_base=tag, mirrors=options.mirrors)
