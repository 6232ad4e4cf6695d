"""``python -m tools.bench``: the benchmarks of ``nox -s bench``, side by side with plain docker.

They live beside the package, not in it: an installed twinbuild carries no benchmark, and the
benchmarks use twinbuild only through its public names. Errors end as twinbuild's do: one line
and the error's exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from twinbuild.cli.common import locate
from twinbuild.cli.main import exit_code


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.bench", description="benchmarks, side by side with plain docker build"
    )
    p.add_argument("--root", help="repository root (default: found from here)")
    p.add_argument("--out", default="build/bench", help="folder for bench.md and bench.json")
    p.add_argument("--quick", action="store_true", help="fewer runs, no base-included build")
    p.add_argument(
        "--only", action="append", default=[], metavar="NAME",
        help="run this benchmark alone (repeatable), e.g. --only emulation",
    )  # fmt: skip
    return p


def cmd_bench(args: argparse.Namespace) -> int:
    from tools.bench.runner import BenchOptions, bench

    options = BenchOptions(
        root=Path(args.root), out=Path(args.out), quick=args.quick, only=tuple(args.only)
    )
    bench(options, say=print)
    out = options.out
    print((out / "bench.md").read_text(), end="")
    print(f"wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run() -> int:
        locate(args)
        return cmd_bench(args)

    return exit_code(run)


if __name__ == "__main__":
    sys.exit(main())
