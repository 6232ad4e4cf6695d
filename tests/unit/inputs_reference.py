"""A second implementation of the inputs hash, written from its description, for tests.

The build stamps ``org.twinbuild.inputs-hash`` and decides "up to date" with it; a test that
compares that label with another value the build computed passes even with a constant hash. This
module computes the expected value on its own: the files a recipe reads by regex (COPY/ADD
sources, bind-mount sources), not with the recipe scanner, and the framing spelled out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path

from twinbuild.manifest.render import Rendered


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
        hit = root / src.lstrip("/")
        items = [hit] if not hit.is_dir() else [p for p in hit.rglob("*") if p.is_file()]
        paths.update(p.relative_to(root).as_posix() for p in items)
    return paths | {recipe.relative_to(root).as_posix()}


def reference(root: Path, rendered: Rendered, base_id: str, builder: Mapping[str, str]) -> str:
    """The documented format: length-framed (kind, name, sha256(data)) triples, in this order."""
    out = hashlib.sha256()

    def part(kind: str, name: str, data: bytes) -> None:
        for chunk in (kind.encode(), name.encode(), hashlib.sha256(data).digest()):
            out.update(len(chunk).to_bytes(8, "big"))
            out.update(chunk)

    part("format", "", b"1")
    for rel in sorted(copied_by_regex(root, root / rendered.recipe)):
        part("file", rel, (root / rel).read_bytes())
    part("args", "", json.dumps(rendered.args, sort_keys=True).encode())
    for name in sorted(rendered.files):
        part("generated", name, rendered.files[name].encode())
    part("base", "", base_id.encode())
    part("profile", rendered.profile, (rendered.target or "").encode())
    part("builder", "", json.dumps(dict(builder), sort_keys=True).encode())
    return "sha256:" + out.hexdigest()
