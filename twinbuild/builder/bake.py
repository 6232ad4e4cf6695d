"""``twinbuild bake``: a ``docker buildx bake`` file for the images, and their staged contexts.

One target per image (a variant on one architecture: ``cu13-arm64``), since an image's build
args may differ by architecture (kubectl's url and sha256); a group per variant names its images,
and ``default`` all of them. Each target is exactly what
``twinbuild build`` of that image builds: the build args ``twinbuild render`` prints, the same
labels (the inputs hash among them, so the evidence gate and ``twinbuild build``'s up-to-date
check know the image, and the pins the profile left out, so ``twinbuild smoke`` of an image
``docker buildx bake`` made checks what ``build``'s image is checked for), the same
:class:`~twinbuild.engine.api.BuildTarget` (``builder.bake_target`` writes it as a bake target),
and a context staged by the same code as ``build``'s
(``twinbuild.builder.context.assemble``: the recipe and everything it copies or bind-mounts, the
generated pip files, for the local profile the wheelhouse). Each image has its own context,
``.twinbuild/bake/<image>/``, because the generated files differ per image. A variant's images
become one multi-arch image by ``twinbuild push``, not by bake.

With ``--repository`` the tags and the registry build cache (``cache-from``/``cache-to``,
``mode=max``) name that repository: what a team with a remote BuildKit builder uses. Without it
the tags are the ones ``twinbuild build`` gives (``twinbuild/<variant>:<profile>-<arch>``), and
there is no registry cache. ``--build`` then builds each target buildx resolves from the file
through the one build function (``twinbuild.builder.bake_build``).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinbuild.builder import context
from twinbuild.builder.bake_build import build_baked
from twinbuild.builder.bake_target import bake_entry
from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.build_record import BaseRef
from twinbuild.builder.image import BuildResult, PlannedImage, plan_image, wanted_images
from twinbuild.engine.api import BuildTarget, EngineAPI
from twinbuild.errors import ConfigError, DiskFull, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, SOURCE_RE, ImageKey, PinManifest, Profile
from twinbuild.manifest.rendered import GENERATED, Rendered, recipe_path
from twinbuild.util import bounded
from twinbuild.util.activity import Say, to_stderr
from twinbuild.util.atomic import need_folder, resolve_target, write_atomic
from twinbuild.util.output import plain

DEFAULT_OUT = Path("docker-bake.json")
STAGE = Path(GENERATED) / "bake"
_REPOSITORY = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
)
_DIGEST_CHARS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """One image bake builds: what ``twinbuild build`` of it would receive and label."""

    planned: PlannedImage
    labels: dict[str, str] = field(repr=False)

    @property
    def key(self) -> ImageKey:
        return self.planned.key

    @property
    def profile(self) -> Profile:
        return self.planned.profile

    @property
    def rendered(self) -> Rendered:
        return self.planned.rendered

    @property
    def inputs_hash(self) -> str:
        return self.planned.inputs_hash

    @property
    def base(self) -> BaseRef:
        return self.planned.base

    @property
    def name(self) -> str:
        return self.key.name

    def targets(self) -> list[str]:
        return [self.name]

    def target(self, root: Path, name: str, repository: str | None) -> BuildTarget:
        """The target ``name``: what ``twinbuild build`` builds, with bake's tags and cache."""
        cache = f"type=registry,ref={repository}:buildcache-{name}"
        return self.planned.target(
            root / STAGE / self.name, self.labels, tags=tuple(tags(self, name, repository)),
            cache_from=(cache,) if repository else (),
            cache_to=(f"{cache},mode=max",) if repository else (),
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class BakeResult:
    out: Path
    profile: Profile
    definition: dict[str, Any] = field(repr=False)
    contexts: dict[str, Path]
    images: tuple[Image, ...] = field(repr=False)
    built: tuple[BuildResult, ...] = ()  # each target built (--build)

    def report(self) -> str:
        lines = [f"wrote {self.out} ({self.profile} profile)"]
        for name, folder in self.contexts.items():
            lines.append(f"  {name}: target {name}; context {folder}")
        if self.built:
            lines += [b.describe() for b in self.built]
        else:
            lines.append(f"build: docker buildx bake -f {self.out} (from the repository root)")
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        return self.report()

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out), "profile": self.profile,
            "contexts": {k: str(v) for k, v in self.contexts.items()},
            "definition": self.definition, "built": [plain(b) for b in self.built],
        }  # fmt: skip


def check_repository(repository: str) -> str:
    """An image repository without tag or digest, e.g. registry.example/team/twinbuild (its path
    lower case, as Docker and every registry want it: never folded quietly into another name)."""
    if not _REPOSITORY.match(repository) or "@" in repository:
        lower = repository.lower()
        case = (
            f" (its path must be lower case: {lower!r})"
            if _REPOSITORY.match(lower) and "@" not in lower
            else ""
        )
        raise ConfigError(
            f"--repository {repository!r}: not an image repository{case}; pass one without tag "
            "or digest, e.g. registry.example:5000/team/twinbuild"
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


def tags(image: Image, target: str, repository: str | None) -> list[str]:
    """``twinbuild build``'s tag without a repository; else the target and its inputs hash."""
    if repository is None:
        return [image.planned.tag]
    short = image.inputs_hash.removeprefix("sha256:")[:_DIGEST_CHARS]
    suffix = "" if image.profile == "production" else f"-{image.profile}"
    return [f"{repository}:{target}{suffix}", f"{repository}:{target}{suffix}-{short}"]


def definition(
    images: list[Image],
    *,
    root: Path = Path(),
    repository: str | None = None,
    contexts: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The bake file as a JSON-ready dict (``contexts``: image name -> context folder, relative
    to the file; default: where ``twinbuild bake`` stages it under ``root``)."""
    if repository is not None:
        repository = check_repository(repository)
    contexts = contexts or {i.name: (STAGE / i.name).as_posix() for i in images}
    targets: dict[str, Any] = {}
    groups: dict[str, Any] = {"default": {"targets": []}}
    for image in images:
        group = groups.setdefault(image.key.variant, {"targets": []})
        group["targets"] += image.targets()
        for name in image.targets():
            targets[name] = bake_entry(image.target(root, name, repository), contexts[image.name])
            groups["default"]["targets"].append(name)
    return {"group": groups, "target": targets}


def plan_images(
    manifest: PinManifest,
    root: Path,
    profile: Profile,
    *,
    engine: EngineAPI | None = None,
    say: Say = to_stderr,
    source: str | None = None,
) -> list[Image]:
    """Every image of the manifest in ``profile``, with what its build receives and its labels
    (the local profile makes or finds the embedded base in ``engine`` first)."""
    options = BuildOptions(root=root, profile=profile, source=source)
    found: list[Image] = []
    for key in wanted_images(manifest, None, None, profile):
        recipe = recipe_path(manifest.variant(key.variant).recipe, profile)
        if not (root / recipe).is_file():
            raise ConfigError(f"{recipe}: recipe not found under {root}")
        planned = plan_image(manifest, engine, key, options, say)
        labels = planned.labels(manifest, root, source=source, revision=None)
        found.append(Image(planned=planned, labels=labels))
    return found


def stage(manifest: PinManifest, root: Path, image: ImageKey) -> Path:
    """Make ``.twinbuild/bake/<image>/`` for the production profile (no engine needed)."""
    images = [i for i in plan_images(manifest, root, "production") if i.key == image]
    return _stage_all(root, images, say=to_stderr)[image.name]


def _stage_all(root: Path, images: list[Image], *, say: Say) -> dict[str, Path]:
    """Stage every context in a fresh folder beside it, then swap them all in.

    A read-only tree or a full disk fails before any context is replaced: the half-made folders
    are removed and the previous contexts (if any) stay as they were.
    """
    parent = root / STAGE
    made: dict[str, Path] = {}
    try:
        parent.mkdir(parents=True, exist_ok=True)
        for image in images:
            made[image.name] = Path(tempfile.mkdtemp(prefix=f".{image.name}.", dir=parent))
            made[image.name].chmod(0o755)  # mkdtemp's 0700 would leak into the context's mode
            options = BuildOptions(root=root, profile=image.profile)
            context.assemble(options, image.rendered, made[image.name], say)
    except (OSError, TwinbuildError) as exc:
        for folder in made.values():
            shutil.rmtree(folder, ignore_errors=True)
        if isinstance(exc, TwinbuildError):
            raise
        raise _stage_error(parent, exc) from None
    contexts: dict[str, Path] = {}
    for name, folder in made.items():
        target = parent / name
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
        contexts[name] = target
    return contexts


def _stage_error(parent: Path, exc: OSError) -> TwinbuildError:
    if isinstance(exc, shutil.Error):  # copytree folds failures into strings: find the errno
        exc = next((a for a in exc.args if isinstance(a, OSError)), exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc):
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
    profile: Profile = "production"
    repository: str | None = None  # None: build's own tags, no registry cache
    source: str | None = None  # default: the manifest's source, else the run's or git remote's
    build: bool = False  # build each target with buildx on the engine


def bake_images(options: BakeOptions, say: Say = to_stderr) -> BakeResult:
    """Load the manifest, write the bake file ``options`` asks for, and build it if asked."""
    if options.source is not None:
        check_source(options.source)
    manifest = load(options.manifest)
    if options.profile == "production" and not options.build:
        return bake(manifest, options, engine=None, say=say)
    from twinbuild.engine.client import connect

    with connect() as engine:
        result = bake(manifest, options, engine=engine, say=say)
        if not options.build:
            return result
        planned = {name: i.planned for i in result.images for name in i.targets()}
        built = build_baked(result.out, planned, manifest, options.root, engine=engine, say=say)
        return dataclasses.replace(result, built=tuple(built))


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
    manifest: PinManifest,
    options: BakeOptions,
    *,
    engine: EngineAPI | None = None,
    say: Say = to_stderr,
) -> BakeResult:
    """Stage every context and write the bake file (a relative ``out`` is under the root).

    Every argument is checked before anything is written: the bake file stays inside the
    repository, in a folder that exists, and replaces only a bake file.
    """
    root = options.root
    if options.repository is not None:
        check_repository(options.repository)
    target = options.out if options.out.is_absolute() else root / options.out
    real, inside = Path(os.path.realpath(target)), Path(os.path.realpath(root))
    if inside not in real.parents:
        raise ConfigError(
            f"--out {options.out}: resolves to {real}, outside the repository {root}; pass a path "
            "inside it"
        )
    # a folder, FIFO or device there, or a missing folder, is refused before staging
    need_folder(target, resolve_target(target, within=root).parent)
    _replaceable(target, options.out)
    images = plan_images(
        manifest, root, options.profile, engine=engine, say=say, source=options.source
    )
    data = definition(images, root=root, repository=options.repository)
    contexts = _stage_all(root, images, say=say)
    write_atomic(target, json.dumps(data, indent=2) + "\n", within=root, parents=False)
    return BakeResult(
        out=target, profile=options.profile, definition=data, contexts=contexts,
        images=tuple(images),
    )  # fmt: skip
