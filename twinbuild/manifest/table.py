"""The side-by-side pin table: the two images at a glance, for reviewers and CI step summaries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, PLATFORMS, Manifest, ResolvedPin


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
        return f"{pin.values.version or pin.values.url} (sha256 `{(pin.values.sha256 or '')[:12]}`)"
    if pin.kind == "apt":
        return f"apt {pin.values.package}={pin.values.version or pin.values.range or '*'}"
    return f"`{pin.expected()}`"


def markdown(manifest: Manifest) -> str:
    """One row per pin, CUDA and ROCm columns; divergences and floating refs marked."""
    per = {p: {r.name: r for r in manifest.resolve(p)} for p in PLATFORMS}
    lines = [
        "| pin | kind | cuda | rocm | status |",
        "| --- | --- | --- | --- | --- |",
    ]
    bases = {p: manifest.platforms[p].base for p in PLATFORMS}
    lines.append(
        "| base image | image | "
        + " | ".join(f"`{b.repository}:{b.tag}`" for b in bases.values())
        + " | per platform |"
    )
    for name, pin in manifest.pins.items():
        cuda, rocm = per["cuda"].get(name), per["rocm"].get(name)
        marks = []
        if pin.divergence is not None:
            marks.append(f"⚠ diverges: {pin.divergence}")
        if pin.asymmetry is not None:
            marks.append(f"only {'/'.join(pin.platforms)}: {pin.asymmetry}")
        if pin.floating is not None:
            marks.append(f"🔓 floating: {pin.floating}")
        status = "; ".join(marks) or "same"
        either = cuda or rocm
        kind = either.kind if either is not None else "?"
        row = [name, kind, _cell(cuda), _cell(rocm), status]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    counts = (
        f"{len(manifest.pins)} pins: "
        f"{sum(1 for p in manifest.pins.values() if p.divergence)} divergent, "
        f"{sum(1 for p in manifest.pins.values() if p.asymmetry)} one-platform, "
        f"{sum(1 for p in manifest.pins.values() if p.floating)} floating"
    )
    return "\n".join([f"### Pins ({counts})", "", *lines]) + "\n"
