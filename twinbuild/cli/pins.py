"""``twinbuild pins table|bump|diff``: look at and move pins."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twinbuild.cli.common import add_common, manifest, repo_manifest, root
from twinbuild.manifest.model import PLATFORMS


def cmd_pins_table(args: argparse.Namespace) -> int:
    from twinbuild.manifest.table import markdown

    sys.stdout.write(markdown(manifest(args)))
    return 0


def cmd_pins_bump(args: argparse.Namespace) -> int:
    from twinbuild.pins.bump import BumpRequest, bump

    request = BumpRequest(
        name=args.name,
        commit=args.commit,
        version=args.version,
        why=args.why,
        platform=args.platform,
        diverge=args.diverge,
        reason=args.reason,
    )
    result = bump(Path(args.manifest), request, upstream=args.upstream, write=not args.dry_run)
    sys.stdout.write(result.report())
    return 0


def cmd_pins_diff(args: argparse.Namespace) -> int:
    from twinbuild.pins.diff import diff_revs

    result = diff_revs(args.rev_a, args.rev_b, manifest=repo_manifest(args), repo=root(args))
    sys.stdout.write(result.markdown() if args.format == "markdown" else result.text())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pins = sub.add_parser("pins", help="look at and move pins").add_subparsers(
        dest="pins_command", required=True, metavar="PINS_COMMAND"
    )
    p = pins.add_parser("table", help="side-by-side markdown table of both images' pins")
    add_common(p)
    p.set_defaults(func=cmd_pins_table)

    p = pins.add_parser("bump", help="move one pin on every platform that carries it")
    add_common(p)
    p.add_argument("name", help="pin name, e.g. torch_memory_saver")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--commit", help="full 40-hex commit (git pins)")
    what.add_argument("--version", help="exact version (pypi, url, apt pins)")
    p.add_argument("--why", required=True, help="the new pin's provenance (PR, release, merge)")
    p.add_argument("--platform", choices=PLATFORMS, help="move only this platform")
    p.add_argument(
        "--diverge",
        action="store_true",
        help="allow --platform to split a symmetric pin (needs --reason)",
    )
    p.add_argument("--reason", help="why the platforms differ (written as divergence)")
    p.add_argument(
        "--upstream",
        metavar="PATH_OR_URL",
        help="local clone or mirror (path or file://) to check the commit against",
    )
    p.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    p.set_defaults(func=cmd_pins_bump)

    p = pins.add_parser(
        "diff",
        help="pins that changed, like git diff: HEAD against the working tree, REV_A against "
        "it, or REV_A against REV_B",
    )
    add_common(p)
    p.add_argument("rev_a", metavar="REV_A", nargs="?", help="default: HEAD")
    p.add_argument("rev_b", metavar="REV_B", nargs="?", help="default: the working tree")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.set_defaults(func=cmd_pins_diff)
