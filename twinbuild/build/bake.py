"""``twinbuild bake``: a ``docker buildx bake`` file for both production images.

Each target gets the build args that ``twinbuild render`` prints, the twinbuild labels and a
registry build cache. The generated pip files differ per platform (a ROCm-only pin is only in ROCm's
``.twinbuild/pip/<layer>.txt``), so one shared context cannot hold both: each platform gets its own
context under ``.twinbuild/bake/<platform>/`` holding a copy of ``images/`` and its generated files.
Those are the image's only inputs besides the manifest, which is what ``twinbuild plan`` watches.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import DEFAULT_PATH, PLATFORMS, Manifest, Platform, Profile, load
from twinbuild.manifest.render import GENERATED, RECIPES, render
from twinbuild.util.atomic import write_atomic

DEFAULT_REPOSITORY = "ghcr.io/OWNER/twinbuild"
DEFAULT_OUT = Path("docker-bake.json")
STAGE = Path(GENERATED) / "bake"
PROFILE: Profile = "production"
#: Linux platforms per image; both bases are amd64 images.
TARGET_PLATFORMS: dict[Platform, list[str]] = {"cuda": ["linux/amd64"], "rocm": ["linux/amd64"]}
_REPOSITORY = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
)
_DIGEST_CHARS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class BakeResult:
    out: Path
    definition: dict[str, Any]
    contexts: dict[Platform, Path]

    def report(self) -> str:
        lines = [f"wrote {self.out}"]
        lines += [f"  {p}: context {c}" for p, c in self.contexts.items()]
        lines.append(f"build: docker buildx bake -f {self.out} (from the repository root)")
        return "\n".join(lines) + "\n"


def check_repository(repository: str) -> str:
    """An image repository without tag or digest, e.g. ghcr.io/owner/twinbuild."""
    if not _REPOSITORY.match(repository.lower()) or "@" in repository:
        raise ConfigError(
            f"--repository '{repository}': not an image repository; pass one without tag or "
            "digest, e.g. ghcr.io/owner/twinbuild"
        )
    return repository.lower()


def source_url(repository: str) -> str:
    """``org.opencontainers.image.source``: the GitHub repository for a ghcr.io image."""
    if repository.startswith("ghcr.io/"):
        return "https://github.com/" + repository.removeprefix("ghcr.io/")
    return f"https://{repository}"


def definition(
    manifest: Manifest,
    *,
    repository: str = DEFAULT_REPOSITORY,
    contexts: dict[Platform, str] | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """The bake file as a JSON-ready dict (``contexts`` maps platform -> context directory)."""
    repository = check_repository(repository)
    contexts = contexts or {p: (STAGE / p).as_posix() for p in PLATFORMS}
    targets: dict[str, Any] = {}
    for platform in PLATFORMS:
        rendered = render(manifest, platform, PROFILE)
        spec = manifest.platforms[platform]
        short = manifest.platform_digest(platform, PROFILE).removeprefix("sha256:")[:_DIGEST_CHARS]
        cache = f"type=registry,ref={repository}:buildcache-{platform}"
        targets[platform] = {
            "context": contexts[platform],
            "dockerfile": RECIPES[PROFILE][platform].as_posix(),
            "args": dict(sorted(rendered.args.items())),
            "labels": {
                "org.twinbuild.platform": platform,
                "org.twinbuild.profile": PROFILE,
                "org.twinbuild.manifest-hash": manifest.digest(),
                "org.twinbuild.base-digest": spec.base.digest,
                "org.opencontainers.image.source": source or source_url(repository),
                "org.opencontainers.image.title": f"twinbuild-{platform}",
            },
            "platforms": list(TARGET_PLATFORMS[platform]),
            "tags": [f"{repository}:{platform}", f"{repository}:{platform}-{short}"],
            "cache-from": [cache],
            "cache-to": [f"{cache},mode=max"],
        }
    return {"group": {"default": {"targets": list(PLATFORMS)}}, "target": targets}


def stage(manifest: Manifest, root: Path, platform: Platform) -> Path:
    """Make ``.twinbuild/bake/<platform>/``: a copy of images/ plus the generated pip files."""
    context = root / STAGE / platform
    if context.exists():
        shutil.rmtree(context)
    shutil.copytree(root / "images", context / "images", symlinks=True)
    for name, body in render(manifest, platform, PROFILE).files.items():
        path = context / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return context


@dataclass(frozen=True, slots=True, kw_only=True)
class BakeOptions:
    """What ``twinbuild bake`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    out: Path = DEFAULT_OUT  # relative: under root
    repository: str = DEFAULT_REPOSITORY
    source: str | None = None  # default: from a ghcr.io repository


def bake_images(options: BakeOptions) -> BakeResult:
    """Load the manifest and write the bake file ``options`` asks for."""
    return bake(
        load(options.manifest), options.root, out=options.out,
        repository=options.repository, source=options.source,
    )  # fmt: skip


def bake(
    manifest: Manifest,
    root: Path,
    *,
    out: Path = DEFAULT_OUT,
    repository: str = DEFAULT_REPOSITORY,
    source: str | None = None,
) -> BakeResult:
    """Stage both contexts and write the bake file (a relative ``out`` is under ``root``)."""
    data = definition(manifest, repository=repository, source=source)
    for platform in PLATFORMS:
        if not (root / RECIPES[PROFILE][platform]).is_file():
            raise ConfigError(f"{RECIPES[PROFILE][platform]}: recipe not found under {root}")
    contexts = {p: stage(manifest, root, p) for p in PLATFORMS}
    target = out if out.is_absolute() else root / out
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, json.dumps(data, indent=2) + "\n")
    return BakeResult(out=target, definition=data, contexts=contexts)
