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
        cells = [self.header, *(tuple(c.replace("`", "") for c in r) for r in self.rows)]
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


def _md(row: tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"


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
        return f"{pin.values.version or pin.values.url} (sha256 `{(pin.values.sha256 or '')[:12]}`)"
    if pin.kind == "apt":
        return f"apt {pin.values.package}={pin.values.version or pin.values.range or '*'}"
    return f"`{pin.expected()}`"


def markdown(manifest: Manifest) -> str:
    """The markdown table (what CI puts in the step summary)."""
    return pin_table(manifest).markdown()


def pin_table(manifest: Manifest) -> PinTable:
    """One row per pin, CUDA and ROCm columns; divergences and floating refs marked."""
    per = {p: {r.name: r for r in manifest.resolve(p)} for p in PLATFORMS}
    bases = {p: manifest.platforms[p].base for p in PLATFORMS}
    rows: list[tuple[str, ...]] = [
        ("base image", "image", *(f"`{b.repository}:{b.tag}`" for b in bases.values()),
         "per platform")
    ]  # fmt: skip
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
        rows.append((name, kind, _cell(cuda), _cell(rocm), status))
    counts = (
        f"{len(manifest.pins)} pins: "
        f"{sum(1 for p in manifest.pins.values() if p.divergence)} divergent, "
        f"{sum(1 for p in manifest.pins.values() if p.asymmetry)} one-platform, "
        f"{sum(1 for p in manifest.pins.values() if p.floating)} floating"
    )
    return PinTable(
        title=f"Pins ({counts})", header=("pin", "kind", "cuda", "rocm", "status"),
        rows=tuple(rows),
    )  # fmt: skip
