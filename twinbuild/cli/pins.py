"""``twinbuild pins table|bump|diff``: look at and move pins."""

from __future__ import annotations

import argparse
import sys

from twinbuild.cli.common import add_common, manifest_path, repo_manifest, root
from twinbuild.manifest.model import PLATFORMS


def cmd_pins_table(args: argparse.Namespace) -> int:
    from twinbuild.manifest.table import TableOptions, table

    sys.stdout.write(table(TableOptions(manifest=manifest_path(args))))
    return 0


def cmd_pins_bump(args: argparse.Namespace) -> int:
    from twinbuild.pins.bump import BumpOptions, BumpRequest, bump_pin

    request = BumpRequest(
        name=args.name,
        commit=args.commit,
        version=args.version,
        why=args.why,
        platform=args.platform,
        diverge=args.diverge,
        reason=args.reason,
        url=args.url,
        sha256=args.sha256,
    )
    options = BumpOptions(
        manifest=manifest_path(args), upstream=args.upstream, dry_run=args.dry_run, request=request
    )
    sys.stdout.write(bump_pin(options).report())
    return 0


def cmd_pins_diff(args: argparse.Namespace) -> int:
    from twinbuild.pins.diff import DiffOptions, diff_pins

    options = DiffOptions(  # the manifest as git names it: relative to the root
        manifest=repo_manifest(args), root=root(args), rev_a=args.rev_a, rev_b=args.rev_b,
        format=args.format,
    )  # fmt: skip
    result = diff_pins(options)
    sys.stdout.write(result.markdown() if options.format == "markdown" else result.text())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pins = sub.add_parser("pins", help="look at and move pins").add_subparsers(
        dest="pins_command", required=True, metavar="PINS_COMMAND"
    )
    p = pins.add_parser("table", help="side-by-side markdown table of both images' pins")
    add_common(p, root=False)  # the table reads the manifest alone
    p.set_defaults(func=cmd_pins_table)

    p = pins.add_parser("bump", help="move one pin on every platform that carries it")
    add_common(p, root=False)  # a bump edits the manifest alone
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
        "--url", help="a url pin's new download (default: its url with the version moved)"
    )
    p.add_argument(
        "--sha256", metavar="HEX",
        help="the new download's sha256 (default: fetched and hashed where the network allows)",
    )  # fmt: skip
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
