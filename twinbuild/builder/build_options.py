"""What ``twinbuild build`` is asked for: the request (manifest, platforms, jobs) and the options
every build of one image takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from twinbuild.manifest.model import DEFAULT_PATH, Arch, Profile


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildOptions:
    root: Path
    profile: Profile = "local"
    force: bool = False
    mirrors: Mapping[str, str] = field(default_factory=dict)
    cache: Path | None = None  # wheel cache; default: the engine cache folder
    lock_timeout: float = 1800.0
    # The registry build cache: the image `twinbuild push` last pushed for the image (and the
    # local base) are pulled or used as BuildKit inline cache, so a fresh engine rebuilds only what
    # changed. None: no registry, everything builds here.
    registry: str | None = None
    source: str | None = None  # default: the manifest's, else the run's or the git remote's
    revision: str | None = None  # default: GITHUB_SHA in Actions, else the checkout's HEAD
    # An image in the engine with this build's labels counts as up to date. Off in CI (see
    # build_images): there only an image this checkout's build record names counts, so an image
    # planted in a shared engine with the next build's labels is never taken as its result.
    adopt: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRequest:
    """What ``twinbuild build`` was asked for: which manifest and images, how many at once."""

    manifest: Path = DEFAULT_PATH
    #: None: the local profile's variants ([local] variants), every variant in production
    variant: str | None = None
    arch: Arch | None = None  # None: the host's architecture (every one with all_archs)
    # --all-archs: also the architectures this host runs only under QEMU (installed and
    # registered first, as root); without it a build takes the host's own architecture only.
    all_archs: bool = False
    jobs: int = 1  # images built at once
    verbose: bool = False  # the summary lists each pin the profile leaves out, not just how many
    registry: str | None = None  # --registry; None: TWINBUILD_REGISTRY, else the private one
    no_registry_cache: bool = False
    options: BuildOptions
