"""The inputs hash: one content hash of everything that decides the bytes of one image.

Deny by default: it covers, for one image (a variant on one architecture) and profile,

- every file of the tree (what a commit holds) but the few that no build installs or runs
  (:mod:`twinbuild.inputs_rule`: docs/, tests/, evidence/, README.md, another recipe
  family's ``images/<other>/``), each with the one mode bit git keeps (executable): the recipes,
  the scripts
  they copy, the build tool's whole package, ``pyproject.toml``, any ``setup.py`` or ``.pth``
  file, the workflows that run the build, the ``.gitattributes`` that decide a checkout's bytes;
- every file the recipe copies, even from that list, and the ``.gitattributes`` above it;
- what ``render`` hands the build (its image's slice of the manifest: build args and the
  generated ``.twinbuild/`` files) instead of the manifest file, so a CUDA-only pin change leaves
  the ROCm hashes alone;
- the base image, the recipe, the architecture, the profile and the builder settings.

A symlink, a submodule or anything else that is not a regular file among them is refused: what it
points at is not in the commit. ``twinbuild build`` computes the hash over the working tree (its
up-to-date check), the evidence gate over a commit's git objects; both call :func:`inputs_hash`,
so equal hashes mean the same bytes went into the same build.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import posixpath
from collections.abc import Iterable, Mapping
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.inputs_rule import RULE, check_name, is_input, lock_name
from twinbuild.manifest.model import DEFAULT_PATH, Profile
from twinbuild.manifest.rendered import GENERATED, Rendered
from twinbuild.util import bounded
from twinbuild.util.repo_tree import KIND_NAMES, Entry, Tree, WorkTree

#: Bump when the meaning of the hash changes, so that old images and old evidence stop matching
#: (4: an image is a variant on one architecture).
FORMAT = 4
_GLOB = frozenset("*?[")


def input_files(tree: Tree | Path, recipe: Path, profile: Profile) -> list[Entry]:
    """The recipe and every repository file it copies, sorted by path.

    A symlink, a gitlink (submodule) or anything else that is not a regular file among them is
    refused: what it points at is not in the commit the gate judges.
    """
    tree = WorkTree(tree) if isinstance(tree, Path) else tree
    rel = recipe.as_posix()
    entries = _files(tree, tree.entries(rel), what=f"the recipe {rel}")
    if not entries:
        raise ConfigError(f"{tree.name}: no {rel}; the {profile} profile builds from it")
    text = tree.read([rel])[rel]
    found: dict[str, Entry] = {e.path: e for e in entries}
    # Remembered parses for the working tree only: the gate, judging a commit, parses afresh.
    remember = isinstance(tree, WorkTree)
    for line, source in recipe_copies(Path(rel), text, remember=remember):
        if source.startswith((GENERATED, "--")) or "://" in source:
            continue
        where = f"{rel}:{line}"
        pattern = posixpath.normpath(source.lstrip("/"))
        if pattern == ".." or pattern.startswith("../"):
            raise ConfigError(f"{where}: copies {source}, outside the repository; copy from it")
        matched = _match(tree, "" if pattern == "." else pattern)
        if not matched:
            raise ConfigError(f"{where}: copies {source}, which does not exist under {tree.name}")
        for entry in _files(tree, matched, what=f"copied by {where}"):
            found[entry.path] = entry
    return sorted(found.values(), key=lambda e: e.path)


def recipe_copies(recipe: Path, data: bytes, *, remember: bool = True) -> list[tuple[int, str]]:
    """What the recipe (its bytes ``data``) copies from the context: (line, source), remembered.

    Parsing a recipe means loading the whole pin scanner (dockerfile-parse, the shell and pip
    readers), which took most of a no-op build's time. The answer depends only on the recipe's
    bytes and the scanner's code, so it is kept under ``<cache>/recipe-copies/`` keyed by both.
    """
    if not remember:
        from twinbuild.recipe import scan

        return scan.parse(recipe, data=data).copies
    from twinbuild.util.paths import cache_root

    key = hashlib.sha256(data + b"\0" + _scanner_identity()).hexdigest()
    memo = cache_root() / "recipe-copies" / f"{key}.json"
    try:
        remembered = bounded.read_bytes(memo, limit=len(data) + _MEMO_SLACK, what="memo")
        return [(int(line), str(source)) for line, source in json.loads(remembered)]
    except (ConfigError, ValueError, TypeError, RecursionError):
        pass  # not remembered yet (or unreadable, or not ours: a FIFO, a mangled file): parse it
    from twinbuild.recipe import scan
    from twinbuild.util.atomic import write_atomic

    copies = scan.parse(recipe, data=data).copies  # raises on a bad recipe: nothing remembered
    # write_atomic reports a failed write as ConfigError; a read-only cache must not fail the build.
    with contextlib.suppress(OSError, ConfigError):  # it only costs the next run a parse
        write_atomic(memo, json.dumps(copies))
    return copies


_MEMO_SLACK = 1 << 16
"""A remembered answer is a list of the recipe's COPY sources: never much more than the recipe."""

_SCANNER: list[bytes] = []


def _scanner_identity() -> bytes:
    """A hash of the recipe scanner's source files, so a change to it forgets old answers."""
    if not _SCANNER:
        digest = hashlib.sha256()
        for path in sorted((Path(__file__).parent.parent / "recipe").glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        _SCANNER.append(digest.digest())
    return _SCANNER[0]


def image_inputs(
    tree: Tree | Path,
    rendered: Rendered,
    *,
    manifest: str | None = DEFAULT_PATH.as_posix(),
) -> list[Entry]:
    """Every file the hash of ``rendered``'s image covers in ``tree`` (see the module doc), by
    path.

    ``manifest`` is the pin manifest's path in the tree (its slice is hashed instead), or None
    when it lies outside the tree.
    """
    tree = WorkTree(tree) if isinstance(tree, Path) else tree
    found = {e.path: e for e in input_files(tree, rendered.recipe, rendered.profile)}
    copied = list(found.values())  # each names the COPY line that copies it
    own, families = rendered.family, rendered.families
    for entry in tree.listing():
        check_name(tree.name, entry.path)
        if (
            entry.path not in found
            and entry.path != manifest
            and is_input(
                entry.path, own, families, lock_name(rendered.image.name, rendered.profile)
            )
        ):
            found[entry.path] = _files(tree, [entry], what=RULE)[0]
    for entry in _attributes(tree, copied):
        found.setdefault(entry.path, entry)
    return sorted(found.values(), key=lambda e: e.path)


def inputs_hash(
    root: Tree | Path,
    rendered: Rendered,
    *,
    base_id: str,
    builder: Mapping[str, str],
    manifest: str | None = DEFAULT_PATH.as_posix(),
) -> str:
    """``sha256:<hex>`` over everything that decides the image's bytes (see the module doc).

    ``root`` is the working tree (a folder) or a :class:`~twinbuild.util.repo_tree.CommitTree`;
    ``manifest`` the manifest's path in it (None: outside it).
    """
    tree = WorkTree(root) if isinstance(root, Path) else root
    files = image_inputs(tree, rendered, manifest=manifest)
    data = tree.read([e.path for e in files])
    digest = hashlib.sha256()

    def feed(kind: str, name: str, body: bytes) -> None:
        for part in (kind.encode(), os.fsencode(name), hashlib.sha256(body).digest()):
            digest.update(len(part).to_bytes(8, "big") + part)

    feed("format", "", str(FORMAT).encode())
    feed("recipe", rendered.recipe.as_posix(), b"")
    for entry in files:
        feed("file", entry.path, data[entry.path])
        feed("mode", entry.path, entry.kind.encode())
    feed("args", "", json.dumps(rendered.args, sort_keys=True).encode())
    for name, body in sorted(rendered.files.items()):
        feed("generated", name, body.encode())
    feed("base", "", base_id.encode())
    feed("arch", rendered.arch, b"")
    feed("profile", rendered.profile, (rendered.target or "").encode())
    feed("builder", "", json.dumps(dict(builder), sort_keys=True).encode())
    return "sha256:" + digest.hexdigest()


def _files(tree: Tree, entries: Iterable[Entry], *, what: str) -> list[Entry]:
    out = []
    for entry in entries:
        if entry.kind not in ("file", "executable"):
            raise ConfigError(
                f"{tree.name}:{entry.path}: {KIND_NAMES[entry.kind]} among the image inputs "
                f"({what}); commit the file itself, the gate hashes only what the commit holds"
            )
        out.append(entry)
    return out


def _match(tree: Tree, pattern: str) -> list[Entry]:
    """Entries a COPY source names: a file, a folder (everything below it) or a glob."""
    parts = pattern.split("/") if pattern else []
    fixed = 0
    while fixed < len(parts) and not _GLOB & set(parts[fixed]):
        fixed += 1
    if fixed == len(parts):
        return tree.entries(pattern)
    top = "/".join(parts[:fixed])
    targets: set[str] = set()
    for entry in tree.entries(top):
        segments = entry.path.split("/")
        if len(segments) < len(parts):
            continue
        if all(fnmatch.fnmatchcase(s, p) for s, p in zip(segments, parts, strict=False)):
            targets.add("/".join(segments[: len(parts)]))
    return [e for target in sorted(targets) for e in tree.entries(target)]


def _attributes(tree: Tree, entries: Iterable[Entry]) -> list[Entry]:
    """The ``.gitattributes`` in any folder above a copied file: they decide a checkout's bytes
    (the rest are inputs anyway, unless a folder of not-inputs holds them)."""
    folders = {posixpath.dirname(e.path) for e in entries}
    candidates: set[str] = set()
    for start in folders:
        folder = start
        while folder:
            candidates.add(f"{folder}/.gitattributes")
            folder = posixpath.dirname(folder)
        candidates.add(".gitattributes")
    found = [e for c in sorted(candidates) for e in tree.entries(c) if e.path == c]
    return _files(tree, found, what="attributes of the image inputs")


def builder_settings(rendered: Rendered) -> dict[str, str]:
    """The builder part of the inputs hash; the evidence gate recomputes hashes with it too.
    Every image is built one way (buildx on the engine's BuildKit), so only the stage varies."""
    return {"builder": "buildx", "target": rendered.target or ""}
