"""The recipe-size benchmark: `twinbuild import` and the lint on recipes of 12,500 to 100,000
lines, and how their time grows (the fitted exponent of t ~ n^k; 1 is linear).

The recipes are real ones grown to size: the miles CUDA/ROCm pair of tests/fixtures/real repeated
until it has n lines, so the mix of instructions, continuations, comments and pins is a real
recipe's. Import reads the pair (two recipes of n lines each: 2n lines) and drafts, and at
100,000 lines also a 100,000-line CUDA recipe with the real ROCm one (the target's case: one
recipe of that length); the lint reads a project whose CUDA recipe has n lines (its literal pins
are findings: the time is the point).
"""

from __future__ import annotations

import io
import itertools
import shutil
from pathlib import Path

from tools.bench.child import Sample, child
from tools.bench.generate import write_project
from tools.bench.session import Session, measured
from tools.bench.stats import Row, fit_exponent, median

PAIR = Path("tests/fixtures/real/miles")
TARGET_LINES = 100_000
TARGET_SECONDS = 5.0
LINEAR = 1.15  # a fitted exponent above this is not linear growth (noise stays well below)


def grow(source: str, lines: int) -> str:
    """``source`` repeated until it has exactly ``lines`` lines, never cut inside an instruction.

    The last copy stops where an instruction of ``source`` starts, as dockerfile-parse (the
    recipe scanner's parser) finds them: a cut inside a continued ``RUN`` left an open quote, and
    the 100,000-line import then failed to parse. The lines left over are comments.
    """
    have = source.splitlines()
    if not have:
        raise ValueError("grow: empty source recipe")
    whole, rest = divmod(lines, len(have))
    cut = max(b for b in _instruction_starts(source, len(have)) if b <= rest)
    out = have * whole + have[:cut] + ["# grown"] * (rest - cut)
    return "\n".join(out) + "\n"


def _instruction_starts(source: str, length: int) -> set[int]:
    """Where ``source`` may be cut: the index of each instruction's first line, 0 and the end."""
    from dockerfile_parse import DockerfileParser

    structure = DockerfileParser(fileobj=io.BytesIO(source.encode())).structure
    return {0, length} | {int(item["startline"]) for item in structure}


def bench_recipes(s: Session) -> None:
    root = Path(s.extra.get("repo_root", "."))
    cuda_src = (root / PAIR / "Dockerfile").read_text()
    rocm_src = (root / PAIR / "Dockerfile.rocm").read_text()
    sizes = [6_250, 12_500, 25_000] if s.quick else [12_500, 25_000, 50_000, TARGET_LINES]
    medians: dict[str, dict[int, float]] = {"import": {}, "lint": {}}
    cpus: dict[str, dict[int, float]] = {"import": {}, "lint": {}}
    for n in sizes:
        work = s.work / f"recipes-{n}"
        work.mkdir(parents=True, exist_ok=True)
        (work / "cuda.Dockerfile").write_text(grow(cuda_src, n))
        (work / "rocm.Dockerfile").write_text(grow(rocm_src, n))
        project = work / "proj"
        write_project(project, 10)
        shutil.copy(work / "cuda.Dockerfile", project / "images/cuda/Dockerfile")
        runs = 1 if n >= 50_000 else 3
        job = {"kind": "import", "cuda": str(work / "cuda.Dockerfile"),
               "rocm": str(work / "rocm.Dockerfile"), "out": str(work / "draft.toml")}  # fmt: skip
        got_import = [child(job, s.env) for _ in range(runs)]
        got_lint = [child({"kind": "lint", "root": str(project)}, s.env) for _ in range(runs)]
        for what, got in (("import", got_import), ("lint", got_lint)):
            medians[what][n] = median([x.seconds for x in got])
            cpus[what][n] = _cpu(got)
            s.rows.append(_row(what, n, got))
        if n == TARGET_LINES:  # the target's case: one recipe of n lines, the other as written
            (work / "rocm-real.Dockerfile").write_text(rocm_src)
            one = {**job, "rocm": str(work / "rocm-real.Dockerfile")}
            got = [child(one, s.env) for _ in range(3)]
            seconds = median([x.seconds for x in got])
            cpu = _cpu(got)
            s.rows.append(
                measured(
                    f"6 import, {n:,}-line recipe",
                    "twinbuild import (CUDA of n lines + the real ROCm recipe)",
                    got,
                    target=f"<= {TARGET_SECONDS:.0f} s",
                    met=seconds <= TARGET_SECONDS,
                    note=f"cpu {cpu:.2f}s",
                )
            )
        shutil.rmtree(work, ignore_errors=True)
    growth: dict[str, object] = {}
    for what, by_n in medians.items():
        ns = sorted(by_n)
        k = fit_exponent(ns, [by_n[n] for n in ns])
        # The verdict is on CPU time: on a shared machine wall time also grows with others' load.
        k_cpu = fit_exponent(ns, [max(cpus[what][n], 1e-6) for n in ns])
        growth[what] = {"medians": by_n, "cpu": cpus[what], "exponent": k, "exponent_cpu": k_cpu}
        s.rows.append(
            Row(
                benchmark=f"6 {what} growth",
                variant=f"fitted exponent {k_cpu:.2f} on cpu time ({k:.2f} on wall time) "
                f"over {ns[0]:,}..{ns[-1]:,} lines",
                seconds=(),
                target=f"linear (exponent <= {LINEAR})",
                met=k_cpu <= LINEAR,
                note="; ".join(
                    f"t({b})/t({a})={by_n[b] / by_n[a]:.1f}" for a, b in itertools.pairwise(ns)
                ),
            )
        )
    s.extra["recipe_growth"] = growth


def _cpu(got: list[Sample]) -> float:
    """The median CPU seconds of ``got`` (each child's own ``process_time``)."""
    return median([float(x.data.get("cpu_s", 0.0)) for x in got])


def _row(what: str, n: int, got: list[Sample]) -> Row:
    pair = " (CUDA + ROCm, n lines each)" if what == "import" else " (CUDA recipe of n lines)"
    cpu = _cpu(got)
    at_target = n == TARGET_LINES and what == "lint"  # import's target row is the one above
    return measured(
        f"6 {what}, {n:,}-line recipe",
        f"twinbuild {what}{pair}",
        got,
        target=f"<= {TARGET_SECONDS:.0f} s" if at_target else "reported",
        met=median([x.seconds for x in got]) <= TARGET_SECONDS if at_target else None,
        note=f"cpu {cpu:.2f}s",
    )
