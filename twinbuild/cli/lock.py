"""``twinbuild lock``: every image's closure resolved into pins/lock/ (twinbuild.closure)."""

from __future__ import annotations

import argparse

from twinbuild.cli.common import add_common, add_format, manifest_path, root
from twinbuild.util import output


def cmd_lock(args: argparse.Namespace) -> int:
    from twinbuild.closure.lock_command import LockOptions, lock_all

    options = LockOptions(
        manifest=manifest_path(args), root=root(args),
        upgrade=None if args.upgrade is None else tuple(args.upgrade),
        variant=tuple(args.variant or ()), index_url=args.index_url, dry_run=args.dry_run,
    )  # fmt: skip
    report = lock_all(options)
    output.report(report, args.format, text=report.text())
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("lock",)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lock",
        help="resolve every image's closure into pins/lock/ (what is missing or stale only)",
    )
    add_common(p)
    p.add_argument(
        "--upgrade", nargs="*", metavar="NAME",
        help="re-resolve for the newest releases the manifest allows: every pin, or only the "
        "pins (or locked distributions) named",
    )  # fmt: skip
    p.add_argument(
        "--variant", action="append", metavar="NAME", help="lock only this variant (repeatable)"
    )
    p.add_argument(
        "--index-url", metavar="URL",
        help="the package index to resolve against (default: the resolver's, or a mirror of it)",
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="say what would move, write nothing")
    add_format(p, what="what moved per image and what rebuilds")
    p.set_defaults(func=cmd_lock)
