"""TB013: every pin laid out the way Renovate's managers read it (``.github/renovate.json``).

Renovate reads ``pins/manifest.toml`` as text, with regular expressions (RE2: no look-ahead), so
the keys it needs must come in a fixed order where a pin's table opens:

- a PyPI pin's table: ``kind = "pypi"``, then ``dist`` (where it has one), then the version or
  range where the table sets one, as its first lines; an override table (``[pins.NAME.cu13]``)
  opens with its version or range, or repeats the three;
- a table that sets a git pin's ``track``: ``kind = "git"`` (an override table may leave it to the
  pin's), ``repo``, ``commit``, ``track``;
- a base: ``base = { repository = "...", tag = "...", digest = "..." }`` on one line.

A pin written otherwise would be one that Renovate silently never moves; the lint says where,
in a repository that has the Renovate config (``twinbuild lint`` of the project).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields

from twinbuild.manifest.model import Pin, PinManifest, Values

CODE = "TB013"
CONFIG = ".github/renovate.json"
WHY = "so Renovate's managers (.github/renovate.json) find it"
_BASE = re.compile(
    r'\s*base = \{ repository = "[^"]+", tag = "[^"]+", digest = "[^"]*"'
    r'(?:, floating = "[^"]*")? \}\s*(#.*)?$'
)

Add = Callable[[int, str], None]


def check(manifest: PinManifest, add: Add) -> None:
    """Report each table that Renovate's managers would not read (``add(line, message)``)."""
    lines = manifest.text.splitlines()
    for variant in manifest.variants:
        line = manifest.line_of("variants", variant, "base")
        if 0 < line <= len(lines) and not _BASE.match(lines[line - 1]):
            add(line, f"variants.{variant}.base: write it as base = {{ repository = \"...\", "
                f"tag = \"...\", digest = \"sha256:...\" }} on one line, {WHY}")  # fmt: skip
    for pin in manifest.pins.values():
        tables: list[tuple[tuple[str, ...], Values]] = [(("pins", pin.name), pin.common)]
        tables += [(("pins", pin.name, p), v) for p, v in pin.overrides.items()]
        for key, values in tables:
            _table(manifest, pin, key, values, add)


def _opens_with_kind(manifest: PinManifest, pin: Pin) -> bool:
    """Whether ``[pins.NAME]`` opens with its ``kind`` (and dist): its override tables then need
    only their version."""
    header = manifest.line_of("pins", pin.name)
    kind = manifest.line_of("pins", pin.name, "kind")
    return kind == header + 1 and header > 0


def _set(values: Values) -> set[str]:
    return {f.name for f in fields(values) if getattr(values, f.name) is not None}


def _table(manifest: PinManifest, pin: Pin, key: tuple[str, ...], values: Values, add: Add) -> None:
    keys = _set(values)
    kinds = {
        r.kind
        for image in manifest.images(pin.variants)
        if len(key) == 2 or key[-1] in manifest.selectors(image)
        for r in manifest.resolve(image)
        if r.name == pin.name
    }
    header = manifest.line_of(*key)
    label = ".".join(key)

    def line(name: str) -> int:
        return manifest.line_of(*key, name) if name in keys else -1

    def follows(order: list[str]) -> bool:
        expected = header
        for name in order:
            expected += 1
            if line(name) != expected:
                return False
        return True

    value: list[str] = [v for v in ("version", "range") if v in keys]
    platform_table = len(key) > 2  # an override: a group, variant or architecture table
    if kinds == {"pypi"} and (value or "kind" in keys):
        order = ["kind", *(["dist"] if "dist" in keys else []), *value]
        parent = pin.common.kind == "pypi" and _opens_with_kind(manifest, pin)
        if not (follows(order) or (platform_table and parent and follows(value))):
            add(header, f"{label}: open the table with {', '.join(order)}, in that order, {WHY}")
    if "track" in keys:
        order = [*(["kind"] if "kind" in keys else []), "repo", "commit", "track"]
        if not keys >= {"repo", "commit"} or not follows(order):
            add(header, f"{label}: open the table with {', '.join(order)}, in that order, with "
                f"track beside the repo and commit it names, {WHY}")  # fmt: skip
