"""The growth benchmark: three paths that were superlinear (issue 41), each measured at n, 2n and
4n side by side, the CPU seconds of a child process (the least of its runs: a busy machine only
adds); the ratio of each step shows the growth (linear: 2; quadratic: 4).

- load + manifest lint of n variants (750: 1.5 s, 3,000: 12.3 s before: each image asked every
  group and pin whether it held the variant);
- ``twinbuild import`` of two recipes of n stages each (20,000: 16.8 s before: each stage's
  chain was scanned for each stage);
- ``twinbuild import`` of two recipes of n pins each, most of its time the draft (20,000:
  13.5 s before, tomlkit's cost per item).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from tools.bench.child import Sample, child
from tools.bench.generate import pinned_recipes, staged_recipes, variants_manifest
from tools.bench.session import Session, measured
from tools.bench.stats import Row

#: Worst step ratio accepted as linear: 2 is linear, 4 quadratic; the rest is noise and the
#: constant part of small sizes.
LINEAR = 2.6


def bench_growth(s: Session) -> None:
    scale = 1 if s.quick else 4
    runs = 2 if s.quick else 3
    _growth(s, "14 growth: variants", "load + lint_manifest",
            [187 * scale * 2**k for k in range(3)], lambda n: _variants(s, n), runs)  # fmt: skip
    _growth(s, "14 growth: import stages", "import, n stages a recipe",
            [1250 * scale * 2**k for k in range(3)], lambda n: _import(s, n, staged_recipes, "st"),
            runs)  # fmt: skip
    _growth(s, "14 growth: draft pins", "import, n pins a recipe",
            [1250 * scale * 2**k for k in range(3)], lambda n: _import(s, n, pinned_recipes, "pn"),
            runs)  # fmt: skip


def _growth(
    s: Session,
    benchmark: str,
    variant: str,
    sizes: list[int],
    run: Callable[[int], Sample],
    runs: int,
) -> None:
    cpu: dict[int, float] = {}
    for n in sizes:
        got = [run(n) for _ in range(runs)]
        cpu[n] = min(x.data["cpu_s"] for x in got)  # the least disturbed by a busy machine
        row = measured(f"{benchmark}, n={n}", variant, got, target="reported",
                       note=f"CPU {cpu[n]:.2f}s, the least of {runs}")  # fmt: skip
        s.rows.append(row)
    steps = {f"t({b})/t({a})": cpu[b] / cpu[a] for a, b in itertools.pairwise(sizes)}
    s.extra.setdefault("growth", {})[benchmark] = {"cpu_s": cpu, "ratios": steps}
    s.rows.append(
        Row(
            benchmark=f"{benchmark} growth",
            variant="CPU seconds, each size twice the last",
            seconds=(),
            target=f"each step <= {LINEAR} (linear: 2)",
            met=max(steps.values()) <= LINEAR,
            note="; ".join(f"{k}={v:.2f}" for k, v in steps.items()),
        )
    )


def _variants(s: Session, n: int) -> Sample:
    path = s.work / f"growth-variants-{n}" / "pins" / "manifest.toml"
    if not path.exists():
        path.parent.mkdir(parents=True)
        path.write_text(variants_manifest(n))
    got = child({"kind": "manifest", "path": str(path)}, s.env)
    if got.data["count"]:
        raise RuntimeError(f"{n} generated variants do not lint clean: {got.data['findings']}")
    return got


def _import(s: Session, n: int, make: Callable[[int], dict[str, str]], tag: str) -> Sample:
    folder = s.work / f"growth-{tag}-{n}"
    if not folder.exists():
        folder.mkdir()
        for platform, text in make(n).items():
            (folder / f"{platform}.Dockerfile").write_text(text)
    job = {"kind": "import", "cuda": str(folder / "cuda.Dockerfile"),
           "rocm": str(folder / "rocm.Dockerfile"), "out": str(folder / "draft.toml")}  # fmt: skip
    return child(job, s.env)
