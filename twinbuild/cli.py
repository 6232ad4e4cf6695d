"""The ``twinbuild`` command: parse arguments, call the library, map errors to exit codes.

Only :func:`main` catches; the work raises :class:`twinbuild.errors.TwinbuildError`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from twinbuild import __version__
from twinbuild.errors import ConfigError, FindingsError, TwinbuildError
from twinbuild.manifest import DEFAULT_PATH, PLATFORMS, PROFILES, Manifest, Platform, load

if TYPE_CHECKING:
    from twinbuild.engine import Engine

Handler = Callable[[argparse.Namespace], int]


def _manifest(args: argparse.Namespace) -> Manifest:
    return load(Path(args.manifest))


def _root(args: argparse.Namespace) -> Path:
    return Path(args.root)


# -- commands ------------------------------------------------------------------------------------


def cmd_lint(args: argparse.Namespace) -> int:
    from twinbuild.lint import format_findings, lint

    manifest = _manifest(args)
    report = lint(manifest, _root(args), strict=args.strict)
    if args.format == "json":
        print(report.to_json())
    else:
        github = os.environ.get("GITHUB_ACTIONS") == "true"
        for line in format_findings(report.findings, github=github):
            print(line)
        if not args.strict and report.floating:
            print(f"note: {len(report.floating)} declared floating refs (--strict fails them)")
    if report.findings:
        if args.format == "json":
            raise SystemExit(FindingsError.exit_code)
        raise FindingsError(f"lint: {len(report.findings)} findings")
    if args.format != "json":
        print(f"lint: clean ({len(manifest.pins)} pins, {manifest.path})")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from twinbuild.render import render

    rendered = render(_manifest(args), args.platform, args.profile)
    sys.stdout.write(rendered.text())
    return 0


def cmd_pins_table(args: argparse.Namespace) -> int:
    from twinbuild.table import markdown

    sys.stdout.write(markdown(_manifest(args)))
    return 0


def cmd_engine(args: argparse.Namespace) -> int:
    from twinbuild import dockerd

    action = {"up": dockerd.up, "down": dockerd.down, "status": dockerd.status}[args.action]
    state = action()
    if args.print_host:
        print(state.docker_host)
    else:
        print(state.describe())
        if args.action == "up":
            print(state.export_line())
    return 0 if state.running or args.action == "down" else 3


def _connect() -> Engine:
    from twinbuild.engine import connect

    return connect()


def cmd_base(args: argparse.Namespace) -> int:
    from twinbuild.base import ensure_base

    local = _manifest(args).local
    with _connect() as engine:
        result = ensure_base(
            engine, suite=local.suite, mirror=local.mirror, packages=local.packages
        )
    print(result.describe())
    return 0


def _platforms(args: argparse.Namespace) -> list[Platform]:
    return [args.platform] if args.platform else list(PLATFORMS)


def _mirrors(items: Sequence[str]) -> dict[str, str]:
    mirrors: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(
                f"--mirror {item!r}: expected PIN=PATH, e.g. --mirror tms=/srv/tms.git"
            )
        mirrors[name] = path
    return mirrors


def cmd_build(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from twinbuild.build import BuildOptions, build_image

    manifest = _manifest(args)
    options = BuildOptions(
        root=_root(args),
        profile=args.profile,
        force=args.force,
        mirrors=_mirrors(args.mirror),
        revision=os.environ.get("GITHUB_SHA"),
    )
    with _connect() as engine:
        platforms = _platforms(args)
        if args.jobs > 1 and len(platforms) > 1:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = list(
                    pool.map(lambda p: build_image(manifest, engine, p, options), platforms)
                )
        else:
            results = [build_image(manifest, engine, p, options) for p in platforms]
    for result in results:
        print(result.describe())
    return 0


# -- parser --------------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest", default=str(DEFAULT_PATH), help="pin manifest (default: %(default)s)"
    )
    parser.add_argument("--root", default=".", help="repository root holding images/ (default: .)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="twinbuild",
        description="One pin manifest, two GPU images: lint, build, smoke-test and prove them.",
    )
    parser.add_argument("--version", action="version", version=f"twinbuild {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("lint", help="check pin symmetry, SHAs, versions and recipe drift")
    _common(p)
    p.add_argument("--strict", action="store_true", help="declared floating refs fail too")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("render", help="print exactly what a build of PLATFORM receives")
    _common(p)
    p.add_argument("platform", choices=PLATFORMS)
    p.add_argument("--profile", choices=PROFILES, default="production")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("engine", help="start, stop or show the private Docker engine")
    p.add_argument("action", choices=("up", "down", "status"), nargs="?", default="status")
    p.add_argument("--print-host", action="store_true", help="print only the DOCKER_HOST to use")
    p.set_defaults(func=cmd_engine)

    p = sub.add_parser("base", help="build (or reuse) the embedded Debian base image")
    _common(p)
    p.set_defaults(func=cmd_base)

    p = sub.add_parser("build", help="build both images (or --platform P); skip up-to-date ones")
    _common(p)
    p.add_argument("--platform", choices=PLATFORMS)
    p.add_argument("--profile", choices=PROFILES, default="local")
    p.add_argument("--force", action="store_true", help="build even when up to date")
    p.add_argument("--jobs", type=int, default=1, help="build platforms concurrently")
    p.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="PIN=PATH",
        help="local git mirror for a git pin (local profile)",
    )
    p.set_defaults(func=cmd_build)

    pins = sub.add_parser("pins", help="look at and move pins").add_subparsers(
        dest="pins_command", required=True, metavar="PINS_COMMAND"
    )
    p = pins.add_parser("table", help="side-by-side markdown table of both images' pins")
    _common(p)
    p.set_defaults(func=cmd_pins_table)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Handler = args.func
    try:
        return func(args)
    except TwinbuildError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(
                f"twinbuild: {line}" if not line.startswith("twinbuild") else line, file=sys.stderr
            )
        return exc.exit_code
    except KeyboardInterrupt:
        print("twinbuild: interrupted", file=sys.stderr)
        return 130
