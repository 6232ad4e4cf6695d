"""The ``twinbuild`` command: build the parser from one module per command group, run, map errors.

Only :func:`main` catches; the work raises :class:`twinbuild.errors.TwinbuildError`, whose class
carries the exit code. Each command group's module registers its parsers and imports its library
code only when its handler runs, so ``twinbuild lint`` never loads docker or cryptography.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from twinbuild import __version__
from twinbuild.cli import (
    build,
    ci,
    engine,
    evidence,
    importer,
    lint,
    manifest,
    pins,
    ship,
    smoke,
)
from twinbuild.cli.common import Handler, locate
from twinbuild.errors import TwinbuildError

#: Command groups in the order ``twinbuild --help`` lists them.
GROUPS = (lint, manifest, engine, build, smoke, ship, importer, ci, evidence, pins)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="twinbuild",
        description="One pin manifest, two GPU images: lint, build, smoke-test and prove them.",
    )
    parser.add_argument("--version", action="version", version=f"twinbuild {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Handler = args.func

    def run() -> int:
        locate(args)
        return func(args)

    return exit_code(run)


def exit_code(run: Callable[[], int]) -> int:
    """``run()``'s exit code; a TwinbuildError becomes its lines on stderr and its own code."""
    try:
        return run()
    except TwinbuildError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            # A line about a file under twinbuild/ starts with "twinbuild" too: only an already
            # prefixed line is printed as it is.
            shown = line if line.startswith("twinbuild: ") else f"twinbuild: {line}"
            print(shown, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("twinbuild: interrupted", file=sys.stderr)
        return 130
