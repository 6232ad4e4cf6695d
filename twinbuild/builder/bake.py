"""``twinbuild bake``: a ``docker buildx bake`` file for both production images.

Each target gets the build args that ``twinbuild render`` prints, the twinbuild labels and a
registry build cache. The generated pip files differ per platform (a ROCm-only pin is only in ROCm's
``.twinbuild/pip/<layer>.txt``), so one shared context cannot hold both: each platform gets its own
context under ``.twinbuild/bake/<platform>/`` holding a copy of ``images/`` and its generated files.
Those are the image's only inputs besides the manifest, which is what ``twinbuild plan`` watches.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError, DiskFull, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    PLATFORMS,
    SOURCE_RE,
    Manifest,
    Platform,
    Profile,
)
from twinbuild.manifest.render import GENERATED, RECIPES, render
from twinbuild.util import bounded
from twinbuild.util.atomic import need_folder, resolve_target, write_atomic

DEFAULT_REPOSITORY = "ghcr.io/owner/twinbuild"
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
    """An image repository without tag or digest, e.g. ghcr.io/owner/twinbuild (its path lower
    case, as Docker and every registry want it: never folded quietly into another name)."""
    if not _REPOSITORY.match(repository) or "@" in repository:
        lower = repository.lower()
        case = (
            f" (its path must be lower case: {lower!r})"
            if _REPOSITORY.match(lower) and "@" not in lower
            else ""
        )
        raise ConfigError(
            f"--repository {repository!r}: not an image repository{case}; pass one without tag "
            "or digest, e.g. ghcr.io/owner/twinbuild"
        )
    return repository


def check_source(source: str) -> str:
    """``--source``: a repository's web address, by the rule the manifest's ``source`` follows."""
    if not SOURCE_RE.fullmatch(source):
        raise ConfigError(
            f"--source {source!r}: not a repository's web address; write it as "
            "'https://github.com/OWNER/NAME' (https, no credentials, spaces or query)"
        )
    return source


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
    source = source or manifest.source or source_url(repository)
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
                "org.opencontainers.image.source": source,
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
    return _stage_all(manifest, root, (platform,))[platform]


def _stage_all(
    manifest: Manifest, root: Path, platforms: tuple[Platform, ...]
) -> dict[Platform, Path]:
    """Stage every context in a fresh folder beside it, then swap them all in.

    A read-only tree or a full disk fails before any context is replaced: the half-made folders
    are removed and the previous contexts (if any) stay as they were.
    """
    parent = root / STAGE
    made: dict[Platform, Path] = {}
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
        for platform in platforms:
            made[platform] = Path(tempfile.mkdtemp(prefix=f".{platform}.", dir=parent))
            made[platform].chmod(0o755)  # mkdtemp's 0700 would leak into the context's mode
            shutil.copytree(
                root / "images", made[platform] / "images", symlinks=True, copy_function=copy
            )
            for name, body in render(manifest, platform, PROFILE).files.items():
                # within=: a generated name never writes outside its context
                write_atomic(made[platform] / name, body, within=made[platform])
    except (OSError, TwinbuildError) as exc:
        for folder in made.values():
            shutil.rmtree(folder, ignore_errors=True)
        if isinstance(exc, TwinbuildError):
            raise
        if isinstance(exc, shutil.Error) and failures:
            exc = failures[0]
        raise _stage_error(parent, exc) from None
    contexts: dict[Platform, Path] = {}
    for platform, folder in made.items():
        context = parent / platform
        if context.exists():
            shutil.rmtree(context)
        folder.rename(context)
        contexts[platform] = context
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
    source = check_source(options.source) if options.source is not None else None
    repository = check_repository(options.repository)
    return bake(
        load(options.manifest), options.root, out=options.out, repository=repository,
        source=source,
    )  # fmt: skip


_BAKE_FILE_LIMIT = 1 << 20
"""Bytes of an existing ``--out`` read to see whether it is a bake file (ours are a few kB)."""


def _replaceable(target: Path, out: Path) -> None:
    """Refuse an ``--out`` that names an existing file other than a bake file: it is in the
    repository, so it may be the manifest, a recipe or a README, which a bake file would replace
    (a FIFO, folder or device there is write_atomic's to refuse)."""
    if not target.is_file():
        return
    try:
        data = json.loads(bounded.read_bytes(target, limit=_BAKE_FILE_LIMIT, what="bake file"))
    except (TwinbuildError, ValueError, RecursionError):
        data = None
    if not (isinstance(data, dict) and isinstance(data.get("target"), dict)):
        raise ConfigError(
            f"--out {out}: {target} exists and is not a bake file; nothing was written; pass a "
            "new path (or the bake file twinbuild wrote before)"
        )


def bake(
    manifest: Manifest,
    root: Path,
    *,
    out: Path = DEFAULT_OUT,
    repository: str = DEFAULT_REPOSITORY,
    source: str | None = None,
) -> BakeResult:
    """Stage both contexts and write the bake file (a relative ``out`` is under ``root``).

    Every argument is checked before anything is written: the bake file stays inside the
    repository, in a folder that exists, and replaces only a bake file.
    """
    data = definition(manifest, repository=repository, source=source)
    for platform in PLATFORMS:
        if not (root / RECIPES[PROFILE][platform]).is_file():
            raise ConfigError(f"{RECIPES[PROFILE][platform]}: recipe not found under {root}")
    target = out if out.is_absolute() else root / out
    real, inside = Path(os.path.realpath(target)), Path(os.path.realpath(root))
    if inside not in real.parents:
        raise ConfigError(
            f"--out {out}: resolves to {real}, outside the repository {root}; pass a path inside it"
        )
    # a folder, FIFO or device there, or a missing folder, is refused before staging
    need_folder(target, resolve_target(target, within=root).parent)
    _replaceable(target, out)
    contexts = _stage_all(manifest, root, PLATFORMS)
    write_atomic(target, json.dumps(data, indent=2) + "\n", within=root, parents=False)
    return BakeResult(out=target, definition=data, contexts=contexts)
