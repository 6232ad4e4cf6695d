"""``twinbuild bake``: a ``docker buildx bake`` file for every production image.

One target per image (a variant on one architecture: ``cu13-arm64``), since an image's build
args may differ by architecture (kubectl's url and sha256); a group per variant names its images,
and ``default`` all of them. Each target gets the build args that ``twinbuild render`` prints, the
twinbuild labels and a registry build cache. The generated pip files differ per image (a
ROCm-only pin is only in ROCm's ``.twinbuild/pip/<layer>.txt``), so one shared context cannot hold
them all: each image gets its own context under ``.twinbuild/bake/<image>/`` holding a copy of
``images/`` and its generated files. Those are the image's only inputs besides the manifest, which
is what ``twinbuild plan`` watches. A variant's images become one multi-arch image by `twinbuild
push` (or ``docker buildx imagetools create``), not by bake.
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError, DiskFull, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, Manifest, Profile
from twinbuild.manifest.render import GENERATED, render
from twinbuild.util.atomic import write_atomic

DEFAULT_REPOSITORY = "ghcr.io/OWNER/twinbuild"
DEFAULT_OUT = Path("docker-bake.json")
STAGE = Path(GENERATED) / "bake"
PROFILE: Profile = "production"
_REPOSITORY = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
)
_DIGEST_CHARS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class BakeResult:
    out: Path
    definition: dict[str, Any]
    contexts: dict[str, Path]  # image name -> context

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
    contexts: dict[str, str] | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """The bake file as a JSON-ready dict (``contexts`` maps image name -> context directory)."""
    repository = check_repository(repository)
    images = manifest.images()
    contexts = contexts or {i.name: (STAGE / i.name).as_posix() for i in images}
    targets: dict[str, Any] = {}
    groups: dict[str, Any] = {"default": {"targets": [i.name for i in images]}}
    source = source or manifest.source or source_url(repository)
    for image in images:
        rendered = render(manifest, image, PROFILE)
        variant = manifest.variant(image.variant)
        short = manifest.image_digest(image, PROFILE).removeprefix("sha256:")[:_DIGEST_CHARS]
        cache = f"type=registry,ref={repository}:buildcache-{image.name}"
        targets[image.name] = {
            "context": contexts[image.name],
            "dockerfile": rendered.recipe.as_posix(),
            "args": dict(sorted(rendered.args.items())),
            "labels": {
                "org.twinbuild.variant": image.variant,
                "org.twinbuild.arch": image.arch,
                "org.twinbuild.profile": PROFILE,
                "org.twinbuild.manifest-hash": manifest.digest(),
                "org.twinbuild.base-digest": variant.base.digest,
                "org.opencontainers.image.source": source,
                "org.opencontainers.image.title": f"twinbuild-{image.name}",
            },
            "platforms": [image.arch],
            "tags": [f"{repository}:{image.name}", f"{repository}:{image.name}-{short}"],
            "cache-from": [cache],
            "cache-to": [f"{cache},mode=max"],
        }
        groups.setdefault(image.variant, {"targets": []})["targets"].append(image.name)
    return {"group": groups, "target": targets}


def stage(manifest: Manifest, root: Path, image: ImageKey) -> Path:
    """Make ``.twinbuild/bake/<image>/``: a copy of images/ plus the generated pip files."""
    return _stage_all(manifest, root, (image,))[image.name]


def _stage_all(manifest: Manifest, root: Path, images: tuple[ImageKey, ...]) -> dict[str, Path]:
    """Stage every context in a fresh folder beside it, then swap them all in.

    A read-only tree or a full disk fails before any context is replaced: the half-made folders
    are removed and the previous contexts (if any) stay as they were.
    """
    parent = root / STAGE
    made: dict[str, Path] = {}
    failures: list[OSError] = []

    def copy(src: str, dst: str) -> object:
        # copytree folds every failure into one shutil.Error of strings; keep the first errno
        try:
            return shutil.copy2(src, dst)
        except OSError as exc:
            failures.append(exc)
            raise

    try:
        parent.mkdir(parents=True, exist_ok=True)
        for image in images:
            folder = made[image.name] = Path(tempfile.mkdtemp(prefix=f".{image.name}.", dir=parent))
            folder.chmod(0o755)  # mkdtemp's 0700 would leak into the context's mode
            shutil.copytree(root / "images", folder / "images", symlinks=True, copy_function=copy)
            for name, body in render(manifest, image, PROFILE).files.items():
                # within=: a generated name never writes outside its context
                write_atomic(folder / name, body, within=folder)
    except (OSError, TwinbuildError) as exc:
        for folder in made.values():
            shutil.rmtree(folder, ignore_errors=True)
        if isinstance(exc, TwinbuildError):
            raise
        if isinstance(exc, shutil.Error) and failures:
            exc = failures[0]
        raise _stage_error(parent, exc) from None
    contexts: dict[str, Path] = {}
    for name, folder in made.items():
        context = parent / name
        if context.exists():
            shutil.rmtree(context)
        folder.rename(context)
        contexts[name] = context
    return contexts


def _stage_error(parent: Path, exc: OSError) -> TwinbuildError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(
            f"{parent}: disk full while staging the bake contexts; nothing was kept, "
            "free space, re-run"
        )
    where = exc.filename or parent
    return ConfigError(
        f"{where}: cannot stage the bake contexts: {exc.strerror or exc}; nothing was kept; "
        "run bake where the repository is writable"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class BakeOptions:
    """What ``twinbuild bake`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    out: Path = DEFAULT_OUT  # relative: under root
    repository: str = DEFAULT_REPOSITORY
    source: str | None = None  # default: the manifest's source, else from a ghcr.io repository


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
    """Stage every context and write the bake file (a relative ``out`` is under ``root``)."""
    data = definition(manifest, repository=repository, source=source)
    for target in data["target"].values():
        if not (root / target["dockerfile"]).is_file():
            raise ConfigError(f"{target['dockerfile']}: recipe not found under {root}")
    contexts = _stage_all(manifest, root, tuple(manifest.images()))
    target = out if out.is_absolute() else root / out
    write_atomic(target, json.dumps(data, indent=2) + "\n")
    return BakeResult(out=target, definition=data, contexts=contexts)
