"""The lint benchmark: load + lint of 10 to 10,000 generated pins, how its time grows against
n log n, and one manifest whose ``why`` and comment are long (the key-line index was quadratic in
a line's length: 60 kB took over 20 s)."""

from __future__ import annotations

import itertools

from tools.bench.child import child
from tools.bench.generate import write_project
from tools.bench.session import Session, measured
from tools.bench.stats import Row, fit_exponent, median, nlogn_ratio


def bench_lint(s: Session) -> None:
    sizes = [10, 100, 1000] if s.quick else [10, 100, 1000, 10000]
    medians: dict[int, float] = {}
    for n in sizes:
        if n == 10000 and medians.get(1000, 0) * 100 > 240:  # would run past the budget if n^2
            s.rows.append(
                Row(
                    benchmark="5 lint, 10000 pins",
                    variant="not run",
                    seconds=(),
                    note=f"t(1000)={medians[1000]:.1f}s; quadratic would exceed 4 min",
                )
            )
            continue
        root = s.work / f"lint-{n}"
        write_project(root, n)
        runs = 1 if n >= 10000 or (s.quick and n >= 1000) else 3
        got = [child({"kind": "lint", "root": str(root)}, s.env) for _ in range(runs)]
        if got[0].data["count"]:
            raise RuntimeError(
                f"lint of {n} generated pins is not clean: {got[0].data['findings']}"
            )
        medians[n] = median([x.seconds for x in got])
        split = (
            f"load {median([x.data['load_s'] for x in got]):.3f}s + "
            f"lint {median([x.data['lint_s'] for x in got]):.3f}s"
        )
        s.rows.append(
            measured(
                f"5 lint, {n} pins",
                "load + lint(manifest, root)",
                got,
                target="<= 1 s" if n == 1000 else "reported",
                met=medians[n] <= 1.0 if n == 1000 else None,
                note=split,
            )
        )
    ns = sorted(medians)
    steps = {f"t({b})/t({a})": medians[b] / medians[a] for a, b in itertools.pairwise(ns)}
    nlogn = {f"t({b})/t({a})": nlogn_ratio(a) for a, b in itertools.pairwise(ns)}
    k = fit_exponent(ns, [medians[n] for n in ns])
    big = [n for n in ns if n >= 100]
    k_big = fit_exponent(big, [medians[n] for n in big]) if len(big) >= 2 else k
    worst = max((steps[key] / nlogn[key] for key in steps if key != "t(100)/t(10)"), default=0.0)
    s.extra["lint_growth"] = {
        "medians": medians,
        "ratios": steps,
        "nlogn_ratios": nlogn,
        "exponent": k,
        "exponent_from_100": k_big,
    }
    s.rows.append(
        Row(
            benchmark="5 lint growth",
            variant=f"fitted exponent {k:.2f} ({k_big:.2f} from n=100)",
            seconds=(),
            target="no worse than n log n",
            met=worst <= 1.25,
            note="; ".join(
                f"{key}={v:.1f} vs n log n {nlogn[key]:.1f}" for key, v in steps.items()
            ),
        )
    )
    bench_long_line(s)


LONG_LINE = 60_000
"""Characters of the long ``why`` and of the comment after it (issue 29's case)."""


def bench_long_line(s: Session) -> None:
    root = s.work / "lint-long-line"
    manifest = write_project(root, 100)
    text = manifest.read_text()
    long = "x" * LONG_LINE
    first = 'why = "bench pin 0"'
    if first not in text:
        raise RuntimeError(f"the generated manifest has no {first!r} to lengthen")
    manifest.write_text(text.replace(first, f'why = "{long}"  # {long}', 1))
    got = [child({"kind": "lint", "root": str(root)}, s.env) for _ in range(1 if s.quick else 3)]
    s.rows.append(
        measured(
            "5 lint, a 60 kB why and comment",
            "load + lint(manifest, root), 100 pins",
            got,
            target="<= 1 s",
            met=median([x.seconds for x in got]) <= 1.0,
            note="linear key-line index (manifest/tomlpos.py)",
        )
    )
