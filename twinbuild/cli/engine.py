"""``twinbuild engine`` and ``twinbuild base``: the private Docker engine and the embedded base."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from twinbuild.cli.common import add_common, manifest

if TYPE_CHECKING:
    from twinbuild.engine.client import Engine


def cmd_engine(args: argparse.Namespace) -> int:
    """``engine up|down|status|env``: stdout carries only what a shell may eval or capture.

    ``up`` and ``env`` print ``export DOCKER_HOST=...`` on stdout, so ``eval "$(twinbuild engine
    up)"`` works; the status line a person reads goes to stderr.
    """
    from twinbuild.engine import daemon

    action = {
        "up": daemon.up, "down": daemon.down, "status": daemon.status, "env": daemon.status,
    }[args.action]  # fmt: skip
    state = action()
    if args.print_host:
        print(state.docker_host)
    elif args.action in ("up", "env"):
        if args.action == "up" or not state.running:
            print(state.describe(), file=sys.stderr)
        if state.running:
            print(state.export_line())
    else:
        print(state.describe())
    return 0 if state.running or args.action == "down" else 3


def connect() -> Engine:
    from twinbuild.engine.client import connect

    return connect()


def cmd_base(args: argparse.Namespace) -> int:
    from twinbuild.engine.base import ensure_base

    local = manifest(args).local
    with connect() as engine:
        result = ensure_base(
            engine, suite=local.suite, mirror=local.mirror, packages=local.packages
        )
    print(result.describe())
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from twinbuild.engine.prune import prune

    with connect() as engine:
        result = prune(engine, keep=args.keep)
    print(result.describe())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "engine",
        help="start, stop or show the private Docker engine; "
        '`eval "$(twinbuild engine env)"` points docker at it',
    )
    p.add_argument("action", choices=("up", "down", "status", "env"), nargs="?", default="status")
    p.add_argument("--print-host", action="store_true", help="print only the DOCKER_HOST to use")
    p.set_defaults(func=cmd_engine)

    p = sub.add_parser(
        "prune", help="remove untagged twinbuild images beyond the newest N per platform"
    )
    p.add_argument(
        "--keep", type=int, default=1, metavar="N",
        help="untagged images to keep per platform and profile, newest first: a rebuild leaves "
        "the previous one untagged, ready to re-tag for a fast revert (default: %(default)s)",
    )  # fmt: skip
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("base", help="build (or reuse) the embedded Debian base image")
    add_common(p)
    p.set_defaults(func=cmd_base)
