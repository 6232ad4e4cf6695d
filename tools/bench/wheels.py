"""The first run's wheel stage: every wheel pin of both platforms fetched into an empty cache, in
parallel pip calls (the build's way) beside one pin at a time (the way it replaced)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tools.bench.child import Sample
from tools.bench.session import Session, measured
from tools.bench.stats import ratio

TARGET_S = 10.0
BENCH = "8 wheel stage, first run (both platforms)"


@contextmanager
def _empty_caches(work: Path) -> Iterator[Path]:
    """A fresh wheel cache, and a fresh pip HTTP cache for the pip processes: a first run has
    neither (pip answers from its own cache otherwise, and the figure would flatter us)."""
    folder = Path(tempfile.mkdtemp(prefix="wheels-", dir=work))
    before = os.environ.get("PIP_CACHE_DIR")
    os.environ["PIP_CACHE_DIR"] = str(folder / "pip")
    try:
        yield folder / "cache"
    finally:
        if before is None:
            os.environ.pop("PIP_CACHE_DIR", None)
        else:
            os.environ["PIP_CACHE_DIR"] = before
        shutil.rmtree(folder, ignore_errors=True)


def bench_wheels(s: Session) -> None:
    """Once each, parallel first (network noise hits both; the slow one takes half a minute)."""
    if s.quick:
        return
    from twinbuild.builder.wheelhouse import prefetch_wheels
    from twinbuild.manifest.loader import load
    from twinbuild.manifest.rendered import render

    root = Path(s.extra["repo_root"])
    manifest = load(root / "pins/manifest.toml")
    renders = [render(manifest, i, "local") for i in manifest.images(manifest.local_variants())]
    samples: dict[str, Sample] = {}
    pins = 0
    for name, jobs, per_call in (("parallel", None, None), ("one at a time", 1, 1)):
        with _empty_caches(s.work) as cache:
            start = time.perf_counter()
            pins = prefetch_wheels(renders, cache, lambda _: None, jobs=jobs, per_call=per_call)
            took = time.perf_counter() - start
        samples[name] = Sample(seconds=took, wall=took, rss_mib=0.0)
    slow, fast = samples["one at a time"], samples["parallel"]
    s.rows += [
        measured(
            BENCH,
            f"one pin per pip call, one at a time ({pins} pins)",
            [slow],
            ratio=1.0,
            target="baseline",
        ),
        measured(
            BENCH,
            "parallel pip calls (the build's prefetch)",
            [fast],
            ratio=ratio(fast.seconds, slow.seconds),
            target=f"<= {TARGET_S:.0f} s",
            met=fast.seconds <= TARGET_S,
            note="empty wheel cache and empty pip cache; PyPI over this machine's egress",
        ),
    ]
