"""``twinbuild bench``: the benchmarks of ``nox -s bench``, side by side with plain docker."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_bench(args: argparse.Namespace) -> int:
    from twinbuild.bench.runner import BenchOptions, bench

    options = BenchOptions(root=Path(args.root), out=Path(args.out), quick=args.quick)
    bench(options, say=print)
    out = options.out
    print((out / "bench.md").read_text(), end="")
    print(f"wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="benchmarks, side by side with plain docker build")
    p.add_argument("--root", help="repository root (default: found from here)")
    p.add_argument("--out", default="build/bench", help="folder for bench.md and bench.json")
    p.add_argument("--quick", action="store_true", help="fewer runs, no base-included build")
    p.set_defaults(func=cmd_bench)
