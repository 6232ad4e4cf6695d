"""The side-by-side pin table: every variant at a glance, for reviewers and CI step summaries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest, ResolvedPin
from twinbuild.util import shown


@dataclass(frozen=True, slots=True, kw_only=True)
class TableOptions:
    """What ``twinbuild pins table`` was asked for."""

    manifest: Path = DEFAULT_PATH


@dataclass(frozen=True, slots=True, kw_only=True)
class PinTable:
    """``twinbuild pins table``: markdown for a CI summary (the default), text or JSON."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", _md(self.header), _md(("---",) * len(self.header))]
        return "\n".join([*lines, *(_md(row) for row in self.rows)]) + "\n"

    def text(self) -> str:
        cells = [
            self.header,
            *(tuple(shown.one_line(c.replace("`", "")) for c in r) for r in self.rows),
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.header) - 1)]
        lines = [
            "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]])
            for row in cells
        ]
        return "\n".join([self.title, *lines]) + "\n"

    def to_dict(self) -> dict[str, object]:
        return {
            "title": self.title,
            "rows": [dict(zip(self.header, r, strict=True)) for r in self.rows],
        }


def _md(cells: tuple[str, ...]) -> str:
    return shown.row(shown.cell(c) for c in cells)


def table(options: TableOptions) -> PinTable:
    """The table of the manifest ``options`` names."""
    return pin_table(load(options.manifest))


def _cell(pin: ResolvedPin | None) -> str:
    if pin is None:
        return "—"
    if pin.kind == "git":
        value = f"`{pin.values.commit[:12]}`" if pin.values.commit else f"`@{pin.values.ref}`"
        repo = (pin.values.repo or "").removeprefix("https://github.com/")
        return f"{repo} {value}"
    if pin.kind == "url":
        sha = (pin.values.sha256 or "")[:12] or "not pinned"
        return f"{pin.values.version or pin.values.url} (sha256 `{sha}`)"
    if pin.kind == "apt":
        return f"apt {pin.values.package}={pin.values.version or pin.values.range or '*'}"
    return f"`{pin.expected()}`"


def _variant_cell(
    manifest: PinManifest, variant: str, per: dict[ImageKey, dict[str, ResolvedPin]], name: str
) -> str:
    """The pin on ``variant``: its first architecture's value, the others' where they differ."""
    images = manifest.variant(variant).images()
    first = _cell(per[images[0]].get(name))
    rest = [
        f"{image.short}: {cell}"
        for image in images[1:]
        if (cell := _cell(per[image].get(name))) != first
    ]
    return first + (f" ({'; '.join(rest)})" if rest else "")


def markdown(manifest: PinManifest) -> str:
    """The markdown table (what CI puts in the step summary)."""
    return pin_table(manifest).markdown()


def pin_table(manifest: PinManifest) -> PinTable:
    """One row per pin, a column per variant; divergences and floating refs marked."""
    per = {i: {r.name: r for r in manifest.resolve(i)} for i in manifest.images()}
    names = list(manifest.variants)
    bases = []
    for name in names:
        base = manifest.variants[name].base
        bases.append(
            f"`{base.repository}:{base.tag}`" + (" (no digest yet)" if base.floating else "")
        )
    archs = [", ".join(i.short for i in manifest.variants[n].images()) for n in names]
    rows: list[tuple[str, ...]] = [
        ("base image", "image", *bases, "per variant"),
        ("architectures", "-", *archs, "per variant"),
    ]
    for name, pin in manifest.pins.items():
        marks = []
        if pin.divergence is not None:
            reasons = "; ".join(f"{k}: {v}" for k, v in pin.divergence.items())
            marks.append(f"⚠ diverges: {reasons}")
        if pin.asymmetry is not None:
            marks.append(f"only {', '.join(pin.listed or pin.variants)}: {pin.asymmetry}")
        if pin.floating is not None:
            marks.append(f"🔓 floating: {pin.floating}")
        status = "; ".join(marks) or "same"
        either = next((per[i][name] for i in per if name in per[i]), None)
        kind = either.kind if either is not None else "?"
        cells = [_variant_cell(manifest, v, per, name) if v in pin.variants else "—" for v in names]
        rows.append((name, kind, *cells, status))
    counts = (
        f"{len(manifest.pins)} pins, {len(names)} variants: "
        f"{sum(1 for p in manifest.pins.values() if p.divergence)} divergent, "
        f"{sum(1 for p in manifest.pins.values() if p.asymmetry)} not on every variant, "
        f"{sum(1 for p in manifest.pins.values() if p.floating)} floating"
    )
    return PinTable(
        title=f"Pins ({counts})", header=("pin", "kind", *names, "status"),
        rows=tuple(rows),
    )  # fmt: skip
