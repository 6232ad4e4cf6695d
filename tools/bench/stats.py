"""The pure pieces of the report: a table row, the statistics over runs, and the markdown table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One line of the table: a variant's runs, and how it stands against its target."""

    benchmark: str
    variant: str
    seconds: tuple[float, ...]
    rss_mib: float | None = None
    ratio: float | None = None  # this variant's median / the baseline's median, same run
    target: str = ""
    met: bool | None = None
    note: str = ""

    @property
    def median(self) -> float | None:
        return median(self.seconds) if self.seconds else None


def median(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("median of no values")
    return float(statistics.median(values))


def ratio(value: float | None, baseline: float | None) -> float | None:
    """``value / baseline``; None when either is missing or the baseline is zero."""
    if value is None or baseline is None or baseline <= 0:
        return None
    return value / baseline


def fit_exponent(ns: Sequence[int], seconds: Sequence[float]) -> float:
    """The k of t ~ c * n^k, least squares over log-log points."""
    xs = [math.log(n) for n in ns]
    ys = [math.log(max(t, 1e-9)) for t in seconds]
    if len(xs) < 2:
        raise ValueError("need two points to fit an exponent")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den


def nlogn_ratio(n: int) -> float:
    """t(10n)/t(n) for a cost of n log n."""
    return 10 * math.log(10 * n) / math.log(n)


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def table(rows: Sequence[Row], header: str) -> str:
    """The markdown report: the machine line, then one row per variant."""
    lines = [
        header,
        "",
        "| benchmark | variant | median s | runs | ratio vs baseline | peak RSS MiB | target "
        "| met? |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "NO")
        variant = f"{r.variant} ({r.note})" if r.note else r.variant
        cells = [
            r.benchmark,
            variant,
            _cell(r.median, ".3f"),
            str(len(r.seconds)),
            _cell(r.ratio, ".2f") + ("x" if r.ratio is not None else ""),
            _cell(r.rss_mib, ".0f"),
            r.target or "-",
            met,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
