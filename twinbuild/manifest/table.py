"""The side-by-side pin table: every variant at a glance, for reviewers and CI step summaries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, Manifest, ResolvedPin


@dataclass(frozen=True, slots=True, kw_only=True)
class TableOptions:
    """What ``twinbuild pins table`` was asked for."""

    manifest: Path = DEFAULT_PATH


def table(options: TableOptions) -> str:
    """The markdown table of the manifest ``options`` names."""
    return markdown(load(options.manifest))


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
    manifest: Manifest, variant: str, per: dict[ImageKey, dict[str, ResolvedPin]], name: str
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


def markdown(manifest: Manifest) -> str:
    """One row per pin, a column per variant; divergences and floating refs marked."""
    per = {i: {r.name: r for r in manifest.resolve(i)} for i in manifest.images()}
    names = list(manifest.variants)
    lines = [
        "| pin | kind | " + " | ".join(names) + " | status |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |",
    ]
    bases = []
    for name in names:
        base = manifest.variants[name].base
        bases.append(
            f"`{base.repository}:{base.tag}`" + (" (no digest yet)" if base.floating else "")
        )
    lines.append("| base image | image | " + " | ".join(bases) + " | per variant |")
    archs = [", ".join(i.short for i in manifest.variants[n].images()) for n in names]
    lines.append("| architectures | - | " + " | ".join(archs) + " | per variant |")
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
        row = [name, kind, *cells, status]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    counts = (
        f"{len(manifest.pins)} pins, {len(names)} variants: "
        f"{sum(1 for p in manifest.pins.values() if p.divergence)} divergent, "
        f"{sum(1 for p in manifest.pins.values() if p.asymmetry)} not on every variant, "
        f"{sum(1 for p in manifest.pins.values() if p.floating)} floating"
    )
    return "\n".join([f"### Pins ({counts})", "", *lines]) + "\n"
