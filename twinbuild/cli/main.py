"""The ``twinbuild`` command: build the parser from one module per command group, run, map errors.

Only :func:`main` catches; the work raises :class:`twinbuild.errors.TwinbuildError`, whose class
carries the exit code. Each command group's module registers its parsers and imports its library
code only when its handler runs, so ``twinbuild lint`` never loads docker or cryptography.
"""

from __future__ import annotations

import argparse
import functools
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
    lock,
    manifest,
    pins,
    ship,
    smoke,
)
from twinbuild.cli.common import (
    Handler,
    add_output_options,
    check_arguments,
    locate,
    write_roots,
)
from twinbuild.errors import ConfigError, DiskFull, StdoutClosed, TwinbuildError
from twinbuild.util import output, shown
from twinbuild.util.atomic import links_within
from twinbuild.util.signals import said, stopping

#: The optional dependencies (pyproject's extras) and which extra brings each.
EXTRAS = {"docker": "docker", "filelock": "docker", "pytest": "smoke", "testinfra": "smoke"}
#: Command groups in the order ``twinbuild --help`` lists them.
GROUPS = (lint, lock, manifest, engine, build, smoke, ship, importer, ci, evidence, pins)


@functools.cache
def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line, built once per process and command; parsing never changes it, so every
    ``main`` call in one process, as the noxfile's or a test's, shares it.

    ``command`` (a top-level command, ``lint``): only its group's parsers, as that command reads
    them. Building all of them costs 13-20 ms (about 600 arguments, each through argparse's
    formatter and gettext), most of a short command's start; ``None``: all of them, for the
    top-level help, a usage error and the tests that walk every command.
    """
    parser = argparse.ArgumentParser(
        prog="twinbuild",
        description=(
            "One pin manifest, every CUDA and ROCm image variant: lint, build, smoke-test and "
            "prove them."
        ),
    )
    parser.add_argument("--version", action="version", version=f"twinbuild {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        if command is None or command in group.COMMANDS:
            group.register(sub)
    for leaf in _leaves(parser):
        add_output_options(leaf)
    return parser


def parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser ``argv`` needs: its command's alone when the first word names one and nothing
    before it is an option (``--help``, ``--version``, a typo); otherwise the whole one, whose
    help and usage errors list every command."""
    first = argv[0] if argv else ""
    if any(first in group.COMMANDS for group in GROUPS):
        return build_parser(first)
    return build_parser()


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser that runs a command (not a group of subcommands)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [parser]
    return [leaf for action in subs for child in action.choices.values() for leaf in _leaves(child)]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, run, map errors to exit codes: every command under the output contract
    (``twinbuild.util.output``): data on stdout, messages on stderr, a failing stdout one line."""
    with output.guarded():
        return exit_code(lambda: _run(argv))


def _run(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = parser_for(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # --help, --version, a usage error: written, now make sure it got out
        output.flush()
        raise
    output.configure(quiet=getattr(args, "quiet", False), verbose=getattr(args, "verbose", False))
    func: Handler = args.func
    check_arguments(parser, args)
    locate(args)
    with links_within(*write_roots(args)):
        code = func(args)
    output.flush()
    return code


def exit_code(run: Callable[[], int]) -> int:
    """``run()``'s exit code; a TwinbuildError becomes its lines on stderr and its own code.

    SIGINT and SIGTERM stop the run the same way (exit 130), after it has unwound.
    """
    try:
        with stopping():
            return run()
    except StdoutClosed as exc:  # the reader went away: nothing to say, and no one to say it to
        output.after_failure()
        return exc.exit_code
    except TwinbuildError as exc:
        if exc.__class__ in (DiskFull, ConfigError) and str(exc).startswith("stdout:"):
            output.after_failure()
        for line in message_lines(str(exc)) or [type(exc).__name__]:
            # A line about a file under twinbuild/ starts with "twinbuild" too: only an already
            # prefixed line is printed as it is.
            shown = line if line.startswith("twinbuild: ") else f"twinbuild: {line}"
            print(shown, file=sys.stderr)
        _flush_after_error()
        return exc.exit_code
    except KeyboardInterrupt as exc:
        print(said(exc), file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:  # an extra this install lacks: one line, what to install
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        print(
            f"twinbuild: {exc.name} is not installed here; this command needs twinbuild's "
            f"{extra!r} extra: pip install 'twinbuild[{extra}]' (CI: locks/image.txt)",
            file=sys.stderr,
        )
        return ConfigError.exit_code


def _flush_after_error() -> None:
    """What the command wrote before it failed still goes out; a stdout failing now too is
    silenced (the error already said what went wrong)."""
    try:
        output.flush()
    except TwinbuildError:
        output.after_failure()


def message_lines(message: str) -> list[str]:
    """An error's lines: split at LF only (a value's U+2028 or form feed is no new line), any
    other control character shown escaped."""
    return [shown.one_line(line) for line in message.split("\n") if line]
