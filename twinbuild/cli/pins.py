"""``twinbuild pins table|bump|diff``: look at and move pins."""

from __future__ import annotations

import argparse
from pathlib import Path

from twinbuild.cli.common import (
    add_common,
    add_format,
    manifest_path,
    registry_host,
    repo_manifest,
    root,
    whole_number,
)
from twinbuild.util import output

#: What `pins outdated` may ask (twinbuild.pins.outdated.SOURCES, without importing it here).
SOURCES = ("pypi", "git", "registry")


def cmd_pins_table(args: argparse.Namespace) -> int:
    from twinbuild.pins.locked_table import LockedTableOptions, locked_table

    options = LockedTableOptions(manifest=manifest_path(args), closure=args.closure)
    output.report(locked_table(options), args.format)
    return 0


def cmd_pins_bump(args: argparse.Namespace) -> int:
    from twinbuild.pins.bump import BumpOptions, BumpRequest, bump_pin

    request = BumpRequest(
        name=args.name,
        commit=args.commit,
        version=args.version,
        fetch=args.fetch,
        why=args.why,
        variant=args.variant,
        diverge=args.diverge,
        reason=args.reason,
        url=args.url,
        sha256=args.sha256,
    )
    options = BumpOptions(
        manifest=manifest_path(args), upstream=args.upstream, dry_run=args.dry_run, request=request
    )
    result = bump_pin(options)
    output.report(result, args.format, text=result.report())
    return 0


def cmd_pins_adopt_release(args: argparse.Namespace) -> int:
    from twinbuild.pins.adopt_release import AdoptOptions, adopt_release

    options = AdoptOptions(
        manifest=manifest_path(args), lock=Path(args.lock), why=args.why,
        miles_commit=args.miles_commit, dry_run=args.dry_run,
    )  # fmt: skip
    output.report(adopt_release(options), args.format)
    return 0


def cmd_pins_diff(args: argparse.Namespace) -> int:
    from twinbuild.pins.diff import DiffOptions, diff_pins

    options = DiffOptions(  # the manifest as git names it: relative to the root
        manifest=repo_manifest(args), root=root(args), rev_a=args.rev_a, rev_b=args.rev_b,
        format=args.format,
    )  # fmt: skip
    output.report(diff_pins(options), options.format)
    return 0


def cmd_pins_outdated(args: argparse.Namespace) -> int:
    from twinbuild.pins.outdated import OutdatedOptions, outdated_pins

    options = OutdatedOptions(
        manifest=manifest_path(args), sources=tuple(args.sources or SOURCES),  # type: ignore[arg-type]
        index_url=args.index_url, base_registry=args.base_registry, jobs=args.jobs,
    )  # fmt: skip
    found = outdated_pins(options)
    for line in found.unreachable:  # partial: one line per source, the rows say unknown
        output.say(f"twinbuild: unreachable: {line}")
    output.report(found, args.format)
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("pins",)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pins = sub.add_parser("pins", help="look at and move pins").add_subparsers(
        dest="pins_command", required=True, metavar="PINS_COMMAND"
    )
    p = pins.add_parser("table", help="markdown table of every variant's pins, side by side")
    add_common(p, root=False)  # the table reads the manifest and the locks beside it
    p.add_argument(
        "--closure", metavar="IMAGE",
        help="list one image's whole closure from its lock instead (e.g. cu13-amd64): every "
        "distribution with its version, origin and what brought it, git pins, apt packages",
    )  # fmt: skip
    add_format(p, "markdown", default="markdown", what="the table")
    p.set_defaults(func=cmd_pins_table)

    p = pins.add_parser("bump", help="move one pin on every variant that carries it")
    add_common(p, root=False)  # a bump edits the manifest alone
    p.add_argument("name", help="pin name, e.g. torch_memory_saver")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--commit", help="full 40-hex commit (git pins)")
    what.add_argument("--version", help="exact version (pypi, url, apt pins)")
    what.add_argument(
        "--fetch", action="store_true",
        help="url pins: download what each url names and pin its sha256 (needs the network)",
    )  # fmt: skip
    p.add_argument("--why", required=True, help="the new pin's provenance (PR, release, merge)")
    p.add_argument("--variant", metavar="NAME", help="move only this variant or group")
    p.add_argument(
        "--diverge",
        action="store_true",
        help="allow --variant to split a symmetric pin (needs --reason)",
    )
    p.add_argument(
        "--reason", help="why the variant differs (written as divergence = { NAME = ... })"
    )
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
    add_format(p, what="what moved and what rebuilds")
    p.set_defaults(func=cmd_pins_bump)

    p = pins.add_parser(
        "adopt-release",
        help="pin the SGLang, Megatron-LM (and miles) commits of upstream's release-lock.json "
        "on every variant",
    )
    add_common(p, root=False)
    p.add_argument("lock", metavar="RELEASE_LOCK", help="upstream's release-lock.json")
    p.add_argument("--why", required=True, help="the release the lock is of")
    p.add_argument("--miles-commit", help="the miles commit the release tags (not in the lock)")
    p.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    add_format(p, what="what moved and what rebuilds")
    p.set_defaults(func=cmd_pins_adopt_release)

    p = pins.add_parser(
        "diff",
        help="pins that changed, like git diff: HEAD against the working tree, REV_A against "
        "it, or REV_A against REV_B",
    )
    add_common(p)
    p.add_argument("rev_a", metavar="REV_A", nargs="?", help="default: HEAD")
    p.add_argument("rev_b", metavar="REV_B", nargs="?", help="default: the working tree")
    add_format(p, "markdown", what="the changes")
    p.set_defaults(func=cmd_pins_diff)

    p = pins.add_parser(
        "outdated",
        help="pins with a newer release (PyPI), branch head (git track) or base tag (registry)",
    )
    add_common(p, root=False)  # the manifest alone, and the sources
    p.add_argument(
        "--source", dest="sources", action="append", choices=SOURCES, metavar="SOURCE",
        help=f"ask only this source ({', '.join(SOURCES)}; repeat for more; default: all)",
    )  # fmt: skip
    p.add_argument(
        "--index-url", metavar="URL",
        help="the package index every PyPI pin is asked (default: the pin's own index, else "
        "the one pip uses: PIP_INDEX_URL, else pip's default)",
    )  # fmt: skip
    p.add_argument(
        "--base-registry", metavar="HOST[:PORT]", type=registry_host,
        help="ask this registry (a mirror) for the bases' tags instead of the one each base's "
        "repository names",
    )  # fmt: skip
    p.add_argument(
        "--jobs", type=whole_number(1, 64), default=8,
        help="requests in flight (default: %(default)s)",
    )  # fmt: skip
    add_format(p, "markdown", what="one row per pin")
    p.set_defaults(func=cmd_pins_outdated)
