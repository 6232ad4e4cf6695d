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
from twinbuild.cli.common import Handler, check_arguments, locate
from twinbuild.errors import TwinbuildError
from twinbuild.util.signals import stopped_by, stopping

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
        check_arguments(parser, args)
        locate(args)
        return func(args)

    return exit_code(run)


def exit_code(run: Callable[[], int]) -> int:
    """``run()``'s exit code; a TwinbuildError becomes its lines on stderr and its own code.

    SIGINT and SIGTERM stop the run the same way (exit 130), after it has unwound.
    """
    try:
        with stopping():
            return run()
    except TwinbuildError as exc:
        for line in message_lines(str(exc)) or [type(exc).__name__]:
            # A line about a file under twinbuild/ starts with "twinbuild" too: only an already
            # prefixed line is printed as it is.
            shown = line if line.startswith("twinbuild: ") else f"twinbuild: {line}"
            print(shown, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(
            f"twinbuild: stopped by {stopped_by(exc)}; nothing half-done was kept", file=sys.stderr
        )
        return 130


def message_lines(message: str) -> list[str]:
    """An error's lines: split at LF only (a value's U+2028 or form feed is no new line), any
    other control character shown escaped."""
    return [_escaped(line) for line in message.split("\n") if line]


def _escaped(line: str) -> str:
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in line)
