"""The inputs hash: one content hash of everything that feeds one image.

Recipe, every file it copies, its platform's slice of the manifest (through what ``render``
hands the build), the base image, the profile and the builder settings. Nothing else: a
CUDA-only pin change leaves the ROCm hash alone, and docs or tests never move either.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import Platform, Profile
from twinbuild.manifest.render import GENERATED, RECIPES, Rendered
from twinbuild.recipe import scan as recipes

#: Bump when the meaning of the hash changes, so that old images stop matching.
FORMAT = 1


def input_files(root: Path, platform: Platform, profile: Profile) -> list[Path]:
    """The recipe and every repository file it copies, relative to ``root``, sorted."""
    rel = RECIPES[profile][platform]
    parsed = recipes.parse(root / rel)
    found: set[Path] = {rel}
    for line, source in parsed.copies:
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
