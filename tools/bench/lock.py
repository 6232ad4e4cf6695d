"""The lock benchmark (#38): ``twinbuild lock`` of this repository's images from a warm resolver
cache (every index page younger than the window; target <= 20 s) and from one whose pages are
all past it (``TWINBUILD_LOCK_FRESH=0``: every page asked again, reported), the no-op lock as a
person types it (the whole process; target <= 2 s), and what a no-op build's decision pays for
the lock being an input: the inputs hash of every image with and without ``pins/lock/`` (the
no-op build computes exactly that hash, then finds the image up to date)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tools.bench.child import Sample, child, spawn
from tools.bench.session import Session, measured
from tools.bench.stats import median


def bench_lock(s: Session) -> None:
    source = Path(s.extra["repo_root"])
    root = s.work / "lock"
    for part in ("pins", "images", "twinbuild"):  # twinbuild/: files the recipes bind-mount
        shutil.copytree(source / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    locks = root / "pins/lock"
    kept = s.work / "lock-kept"
    shutil.copytree(locks, kept)
    runs = 1 if s.quick else 3
    # warm the resolver's cache once (the figures are of a warm cache, as the target says)
    _drop(locks)
    child({"kind": "lock", "root": str(root)}, s.env)
    warm = []
    for _ in range(runs):
        _drop(locks)
        warm.append(child({"kind": "lock", "root": str(root)}, s.env))
    images = len(warm[0].data["states"])  # however many images the manifest has
    s.rows.append(measured(
        f"lock, all {images} images, warm", "twinbuild lock, no lock yet, pages in the window",
        warm, target="<= 20 s", met=median([x.seconds for x in warm]) <= 20, note=_cpu(warm),
    ))  # fmt: skip
    expired = []
    for _ in range(runs):
        _drop(locks)
        expired.append(child({"kind": "lock", "root": str(root)},
                             {**s.env, "TWINBUILD_LOCK_FRESH": "0"}))  # fmt: skip
    s.rows.append(measured(
        f"lock, all {images} images, pages past the window",
        "TWINBUILD_LOCK_FRESH=0: every index page asked again", expired, target="reported",
        note=_cpu(expired),
    ))  # fmt: skip
    argv = [sys.executable, "-m", "twinbuild", "lock", "--root", str(root),
            "--manifest", str(root / "pins/manifest.toml")]  # fmt: skip
    noop = [spawn(argv, env=s.env) for _ in range(runs)]
    s.rows.append(measured(
        "lock, no-op", "`twinbuild lock`, every lock up to date (the whole process)", noop,
        target="<= 2 s", met=median([x.wall for x in noop]) <= 2, wall=True,
    ))  # fmt: skip
    with_locks = [child({"kind": "inputs", "root": str(root)}, s.env) for _ in range(runs)]
    shutil.rmtree(locks)
    without = [child({"kind": "inputs", "root": str(root)}, s.env) for _ in range(runs)]
    shutil.copytree(kept, locks)
    ratio = median([x.seconds for x in with_locks]) / median([x.seconds for x in without])
    s.rows.append(measured(
        "no-op build decision, inputs hash", "six images, with pins/lock/", with_locks,
        target="no slower than without", ratio=ratio, met=ratio <= 1.1,
    ))  # fmt: skip
    s.rows.append(measured(
        "no-op build decision, inputs hash", "six images, without pins/lock/ (before #38)",
        without, target="reported",
    ))  # fmt: skip


def _cpu(samples: list[Sample]) -> str:
    cpu = median([float(x.data["cpu_s"]) for x in samples])
    uv_cpu = median([float(x.data["uv_cpu_s"]) for x in samples])
    return f"CPU: twinbuild {cpu:.1f}s + uv {uv_cpu:.1f}s (wall on a loaded machine is more)"


def _drop(locks: Path) -> None:
    """Every image's lock, not the base captures beside them (``base/``)."""
    for path in locks.glob("*.toml"):
        path.unlink()
