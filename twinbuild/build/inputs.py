"""The inputs hash: one content hash of everything that feeds one image.

Recipe, every file it copies, its platform's slice of the manifest (through what ``render``
hands the build), the base image, the profile and the builder settings. Nothing else: a
CUDA-only pin change leaves the ROCm hash alone, and docs or tests never move either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import Platform, Profile
from twinbuild.manifest.render import GENERATED, RECIPES, Rendered

#: Bump when the meaning of the hash changes, so that old images stop matching.
FORMAT = 1


def input_files(root: Path, platform: Platform, profile: Profile) -> list[Path]:
    """The recipe and every repository file it copies, relative to ``root``, sorted."""
    rel = RECIPES[profile][platform]
    found: set[Path] = {rel}
    for line, source in recipe_copies(root / rel):
        if source.startswith((GENERATED, "--")) or "://" in source:
            continue
        matches = (
            sorted(root.glob(source.lstrip("/")))
            if any(c in source for c in "*?[")
            else [root / source.lstrip("/")]
        )
        if not matches or not matches[0].exists():
            raise ConfigError(f"{rel}:{line}: copies {source}, which does not exist under {root}")
        for match in matches:
            found.update(_walk(match, root))
    return sorted(found)


def recipe_copies(recipe: Path) -> list[tuple[int, str]]:
    """What the recipe copies from the context (line, source), remembered by content.

    Parsing a recipe means loading the whole pin scanner (dockerfile-parse, the shell and pip
    readers), which took most of a no-op build's time. The answer depends only on the recipe's
    bytes and the scanner's code, so it is kept under ``<cache>/recipe-copies/`` keyed by both.
    """
    from twinbuild.engine.daemon import cache_root

    data = recipe.read_bytes()
    key = hashlib.sha256(data + b"\0" + _scanner_identity()).hexdigest()
    memo = cache_root() / "recipe-copies" / f"{key}.json"
    try:
        return [(int(line), str(source)) for line, source in json.loads(memo.read_text())]
    except (OSError, ValueError, TypeError):
        pass  # not remembered yet (or unreadable): parse it
    from twinbuild.recipe import scan
    from twinbuild.util.atomic import write_atomic

    copies = scan.parse(recipe).copies  # raises on a bad recipe: nothing is remembered then
    with contextlib.suppress(OSError):  # a read-only cache only costs the next run a parse
        write_atomic(memo, json.dumps(copies))
    return copies


_SCANNER: list[bytes] = []


def _scanner_identity() -> bytes:
    """A hash of the recipe scanner's source files, so a change to it forgets old answers."""
    if not _SCANNER:
        digest = hashlib.sha256()
        for path in sorted((Path(__file__).parent.parent / "recipe").glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        _SCANNER.append(digest.digest())
    return _SCANNER[0]


def _walk(path: Path, root: Path) -> Iterable[Path]:
    if path.is_dir():
        for child in sorted(path.rglob("*")):
            if child.is_file():
                yield child.relative_to(root)
    else:
        yield path.relative_to(root)


def inputs_hash(
    root: Path,
    rendered: Rendered,
    *,
    base_id: str,
    builder: Mapping[str, str],
    files: Iterable[Path] | None = None,
) -> str:
    """``sha256:<hex>`` over recipe, copied files, rendered pins, base, profile and builder."""
    digest = hashlib.sha256()

    def feed(kind: str, name: str, data: bytes) -> None:
        for part in (kind.encode(), name.encode(), hashlib.sha256(data).digest()):
            digest.update(len(part).to_bytes(8, "big") + part)

    feed("format", "", str(FORMAT).encode())
    for rel in (
        files if files is not None else input_files(root, rendered.platform, rendered.profile)
    ):
        feed("file", rel.as_posix(), (root / rel).read_bytes())
    feed("args", "", json.dumps(rendered.args, sort_keys=True).encode())
    for name, body in sorted(rendered.files.items()):
        feed("generated", name, body.encode())
    feed("base", "", base_id.encode())
    feed("profile", rendered.profile, (rendered.target or "").encode())
    feed("builder", "", json.dumps(dict(builder), sort_keys=True).encode())
    return "sha256:" + digest.hexdigest()
