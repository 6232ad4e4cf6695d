"""What one benchmark run carries (the project copy, the images it made, the rows so far), and the
helpers every benchmark measures with: interleaved variants and the row of a measured variant."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.bench.child import Sample, child, spawn
from tools.bench.stats import Row
from twinbuild.util.activity import Say


@dataclass(slots=True, kw_only=True)
class Session:
    root: Path  # the mini copy
    work: Path
    env: dict[str, str]
    say: Say
    quick: bool
    variants: tuple[str, ...] = ("cuda", "rocm")  # the copy's local variants, built on amd64
    created: list[str] = field(default_factory=list)  # image ids, oldest first
    bases: list[str] = field(default_factory=list)  # inputs hashes of bases this run built
    rows: list[Row] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def build(self, platforms: Sequence[str], **job: Any) -> Sample:
        """Build ``platforms`` (variants) of the mini copy; ``root=``, ``arch=`` for another copy
        or architecture."""
        sample = child(
            {"kind": "build", "root": str(self.root), "platforms": list(platforms), **job}, self.env
        )
        base = sample.data.get("base")
        if base and base["built"]:
            self.created.append(base["image_id"])  # before its children: removed after them
            self.bases.append(base["inputs"])
        for r in sample.data.get("results", []):
            if not r["up_to_date"]:
                self.created.append(r["image_id"])
        return sample

    def docker(self, *args: str) -> Sample:
        return spawn(["docker", *args], env=self.env)

    def fresh(self, root: Path | None = None) -> None:
        """Make every layer after FROM new (no engine cache hit), so the next build of this copy
        (or of the project copy ``root``) is cold."""
        recipe = (root or self.root) / "images/local/Dockerfile"
        lines = [
            ln
            for ln in recipe.read_text().splitlines(keepends=True)
            if not ln.startswith("ENV TWINBUILD_BENCH_RUN=")
        ]
        at = next(i for i, ln in enumerate(lines) if ln.startswith("FROM ${BASE_IMAGE}")) + 1
        lines.insert(at, f"ENV TWINBUILD_BENCH_RUN={uuid.uuid4().hex}\n")
        recipe.write_text("".join(lines))


def interleave(runs: int, *variants: Callable[[], Sample]) -> list[list[Sample]]:
    """``runs`` samples of each variant, taken A B A B ... so that noise hits them all."""
    got: list[list[Sample]] = [[] for _ in variants]
    for _ in range(runs):
        for i, variant in enumerate(variants):
            got[i].append(variant())
    return got


def peak_rss(samples: Sequence[Sample]) -> float:
    return max(x.rss_mib for x in samples)


def measured(
    benchmark: str,
    variant: str,
    samples: Sequence[Sample],
    *,
    target: str,
    ratio: float | None = None,
    met: bool | None = None,
    note: str = "",
    wall: bool = False,
) -> Row:
    """The row of a measured variant: its samples' seconds (whole-process ones with ``wall``) and
    their peak RSS."""
    return Row(
        benchmark=benchmark,
        variant=variant,
        seconds=tuple(x.wall if wall else x.seconds for x in samples),
        rss_mib=peak_rss(samples),
        ratio=ratio,
        target=target,
        met=met,
        note=note,
    )
