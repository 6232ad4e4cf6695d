"""A second implementation of the inputs hash, written from its description, for tests.

The build stamps ``org.twinbuild.inputs-hash`` and decides "up to date" with it; a test that
compares that label with another value the build computed passes even with a constant hash. This
module computes the expected value on its own: every file under the root but the ones written out
below (deny by default), found with ``rglob``; the files a recipe reads found by regex (COPY/ADD
sources, bind-mount sources), not with the recipe scanner; the framing spelled out (format 3).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from twinbuild.manifest.rendered import Rendered

#: What is not an input, as the format describes it: folders end in "/".
NOT_INPUTS = (
    "docs/",
    "tests/",
    "tools/",
    "evidence/",
    "README.md",
    ".github/CODEOWNERS",
    "CODEOWNERS",
)
#: What twinbuild writes into a tree, and what no commit holds.
NEVER = ("build/", ".twinbuild/")


def _left_out(rel: str, family: str, families: tuple[str, ...], image: str | None) -> bool:
    parts = rel.split("/")
    if ".git" in parts or "__pycache__" in parts:
        return True
    # another image's lock or base capture: pins/lock/[base/|local/]<image>.toml (``image`` of a
    # local build: local/<image>)
    if image is not None and rel.startswith("pins/lock/") and rel.endswith(".toml"):
        owner = rel.removeprefix("pins/lock/").removeprefix("base/").removesuffix(".toml")
        mine = owner.count("/") == 0 or (owner.startswith("local/") and owner.count("/") == 1)
        if mine and owner != image:
            return True
    for prefix in (*NOT_INPUTS, *NEVER):
        if rel.startswith(prefix) if prefix.endswith("/") else rel == prefix:
            return True
    return any(rel.startswith(f"images/{f}/") for f in families if f != family)


def every_input(
    root: Path,
    family: str,
    manifest: str = "pins/manifest.toml",
    families: tuple[str, ...] = ("cuda", "rocm"),
    image: str | None = None,
) -> set[str]:
    """Every file under ``root`` that the hash covers for a variant of recipe ``family`` (before
    the copies)."""
    found = set()
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        kept = (path.is_file() or path.is_symlink()) and rel != manifest
        if kept and not _left_out(rel, family, families, image):
            found.add(rel)
    return found


def _files_under(root: Path, rel: str) -> set[str]:
    path = root / rel
    if not path.exists():
        return set()
    if path.is_file():
        return {rel}
    return {
        p.relative_to(root).as_posix()
        for p in path.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def copied_by_regex(root: Path, recipe: Path) -> set[str]:
    """Repository paths a recipe reads (COPY/ADD sources, bind-mount sources), by regex only."""
    text = recipe.read_text()
    found: set[str] = set()
    for m in re.finditer(r"source=([^,\s]+)", text):
        found.add(m.group(1))
    for line in text.splitlines():
        words = line.split()
        if words[:1] not in (["COPY"], ["ADD"]) or any(w.startswith("--from") for w in words):
            continue
        found.update(w for w in words[1:-1] if not w.startswith("--"))  # the last is the target
    paths: set[str] = set()
    for src in found:
        if src.startswith(".twinbuild") or "://" in src:
            continue
        rel = src.lstrip("/")
        if any(c in rel for c in "*?["):
            paths.update(p.relative_to(root).as_posix() for p in root.glob(rel) if p.is_file())
        else:
            paths.update(_files_under(root, rel.rstrip("/")))
    return paths | {recipe.relative_to(root).as_posix()}


def _attributes(root: Path, paths: list[str]) -> list[str]:
    folders: set[str] = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    names = {f"{f}/.gitattributes" if f else ".gitattributes" for f in folders}
    return sorted(n for n in names if (root / n).is_file())


def _mode(path: Path) -> bytes:
    return b"executable" if path.stat().st_mode & 0o100 else b"file"


def reference(root: Path, rendered: Rendered, base_id: str, builder: Mapping[str, str]) -> str:
    """The documented format: length-framed (kind, name, sha256(data)) triples, in this order."""
    out = hashlib.sha256()

    def part(kind: str, name: str, data: bytes) -> None:
        for chunk in (kind.encode(), name.encode(), hashlib.sha256(data).digest()):
            out.update(len(chunk).to_bytes(8, "big"))
            out.update(chunk)

    copied = copied_by_regex(root, root / rendered.recipe)
    files = sorted(
        every_input(
            root,
            rendered.family,
            families=rendered.families,
            image=("local/" if rendered.profile == "local" else "") + rendered.image.name,
        )
        | copied
        | set(_attributes(root, sorted(copied)))
    )
    part("format", "", b"4")
    part("recipe", rendered.recipe.as_posix(), b"")
    for rel in files:
        part("file", rel, (root / rel).read_bytes())
        part("mode", rel, _mode(root / rel))
    part("args", "", json.dumps(rendered.args, sort_keys=True).encode())
    for name in sorted(rendered.files):
        part("generated", name, rendered.files[name].encode())
    part("base", "", base_id.encode())
    part("arch", rendered.arch, b"")
    part("profile", rendered.profile, (rendered.target or "").encode())
    part("builder", "", json.dumps(dict(builder), sort_keys=True).encode())
    return "sha256:" + out.hexdigest()
