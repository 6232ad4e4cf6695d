"""The lock against a package index on 127.0.0.1 (#38): ``twinbuild lock`` of the mini project's
images, every pin on the index the tests serve (``tests/pyindex.py``: wheels it builds, a real
HTTP server), from an empty resolver cache (every page asked of the index), from a warm one,
and the no-op. No other network: the figures are twinbuild's and uv's own cost, with no
index's latency in them (``lock``'s rows are the real project's six images against PyPI)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tests.pyindex import PyIndex
from tools.bench.child import Sample, spawn
from tools.bench.session import Session, measured
from tools.bench.stats import median

#: A floating pin with a dependency on both images, and an exact pin: each a PyPI-like release.
PINS = """
[pins.bench-float]
kind = "pypi"
range = ""
floating = "bench: no version; the lock decides"
why = "a floating pin with a dependency"

[pins.bench-steady]
kind = "pypi"
version = "1.0"
layer = "late"
why = "an exact pin"
"""


def _project(s: Session, where: Path) -> Path:
    """The mini copy's variants and [local] table, with the pins above."""
    shutil.copytree(s.root, where, ignore=shutil.ignore_patterns("build", ".twinbuild"))
    manifest = where / "pins/manifest.toml"
    text = manifest.read_text()
    manifest.write_text(text[: text.index("[pins.")] + PINS)
    return where


def bench_lock_index(s: Session) -> None:
    work = s.work / "lock-index"
    root = _project(s, work / "proj")
    runs = 1 if s.quick else 3
    with PyIndex(work / "index") as index:
        index.publish("bench-dep", "1.0")
        for version in ("1.0", "1.1"):
            index.publish("bench-float", version, ("bench-dep>=1",))
        index.publish("bench-steady", "1.0")

        def lock(cache: Path) -> Sample:
            argv = [sys.executable, "-m", "twinbuild", "lock", "-q", "--root", str(root),
                    "--index-url", index.url]  # fmt: skip
            return spawn(argv, env={**s.env, "TWINBUILD_CACHE": str(cache)})

        cold: list[Sample] = []
        for n in range(runs):
            shutil.rmtree(root / "pins/lock", ignore_errors=True)
            cold.append(lock(work / f"cache-cold-{n}"))
        asked = len(index.served)
        warm: list[Sample] = []
        for _ in range(runs):
            shutil.rmtree(root / "pins/lock", ignore_errors=True)
            warm.append(lock(work / "cache-cold-0"))
        noop = [lock(work / "cache-cold-0") for _ in range(runs)]
    images = len(list((root / "pins/lock").glob("**/*.toml")))
    what = f"twinbuild lock, {images} lock files, index on 127.0.0.1"
    s.rows.append(measured(
        "local index lock", f"{what}, empty resolver cache", cold, target="reported",
        note=f"{asked // max(runs, 1)} index requests a run", wall=True,
    ))  # fmt: skip
    s.rows.append(measured(
        "local index lock", f"{what}, warm resolver cache", warm, target="reported",
        wall=True,
    ))  # fmt: skip
    s.rows.append(measured(
        "local index lock", f"{what}, no-op", noop, target="<= 2 s",
        met=median([x.wall for x in noop]) <= 2, wall=True,
    ))  # fmt: skip
