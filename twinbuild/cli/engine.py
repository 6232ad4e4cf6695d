"""``twinbuild engine`` and ``twinbuild base``: the private Docker engine and the embedded base."""

from __future__ import annotations

import argparse

from twinbuild.cli.common import add_common, manifest_path


def cmd_engine(args: argparse.Namespace) -> int:
    from twinbuild.engine.daemon import EngineOptions, control

    options = EngineOptions(action=args.action, print_host=args.print_host)
    state = control(options)
    if options.print_host:
        print(state.docker_host)
    else:
        print(state.describe())
        if options.action == "up":
            print(state.export_line())
    return 0 if state.running or options.action == "down" else 3


def cmd_base(args: argparse.Namespace) -> int:
    from twinbuild.engine.base import BaseOptions, base_for

    print(base_for(BaseOptions(manifest=manifest_path(args))).describe())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("engine", help="start, stop or show the private Docker engine")
    p.add_argument("action", choices=("up", "down", "status"), nargs="?", default="status")
    p.add_argument("--print-host", action="store_true", help="print only the DOCKER_HOST to use")
    p.set_defaults(func=cmd_engine)

    p = sub.add_parser("base", help="build (or reuse) the embedded Debian base image")
    add_common(p, root=False)  # the base needs the manifest's [local] table alone
    p.set_defaults(func=cmd_base)
