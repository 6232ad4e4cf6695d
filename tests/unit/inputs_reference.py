"""A second implementation of the inputs hash, written from its description, for tests.

The build stamps ``org.twinbuild.inputs-hash`` and decides "up to date" with it; a test that
compares that label with another value the build computed passes even with a constant hash. This
module computes the expected value on its own: the files a recipe reads found by regex (COPY/ADD
sources, bind-mount sources), not with the recipe scanner; the builder code by walking the folders
written out below; the framing spelled out (format 2).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from twinbuild.manifest.render import Rendered

#: The build tool's code that decides an image's bytes, as the format describes it.
BUILDER_CODE = (
    "twinbuild/manifest",
    "twinbuild/builder",
    "twinbuild/engine",
    "twinbuild/util/exact_pin.py",
    "pyproject.toml",
)


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


def builder_code(root: Path) -> list[str]:
    return sorted(p for part in BUILDER_CODE for p in _files_under(root, part))


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

    inputs = sorted(copied_by_regex(root, root / rendered.recipe))
    code = builder_code(root)
    part("format", "", b"2")
    for rel in inputs:
        part("file", rel, (root / rel).read_bytes())
        part("mode", rel, _mode(root / rel))
    for rel in _attributes(root, [*inputs, *code]):
        part("attributes", rel, (root / rel).read_bytes())
    for rel in code:
        part("code", rel, (root / rel).read_bytes())
        part("mode", rel, _mode(root / rel))
    part("args", "", json.dumps(rendered.args, sort_keys=True).encode())
    for name in sorted(rendered.files):
        part("generated", name, rendered.files[name].encode())
    part("base", "", base_id.encode())
    part("profile", rendered.profile, (rendered.target or "").encode())
    part("builder", "", json.dumps(dict(builder), sort_keys=True).encode())
    return "sha256:" + out.hexdigest()
