"""``twinbuild engine``, ``base`` and ``prune``: the private engine, the base, old builds."""

from __future__ import annotations

import argparse
import sys

from twinbuild.cli.common import add_common, add_format, manifest_path, root, whole_number
from twinbuild.manifest.model import ARCHS
from twinbuild.util import output


def cmd_engine(args: argparse.Namespace) -> int:
    """``engine up|down|status|env``: stdout carries only what a shell may eval or capture.

    ``up`` and ``env`` print ``export DOCKER_HOST=...`` on stdout, so ``eval "$(twinbuild engine
    up)"`` works; the status line a person reads goes to stderr.
    """
    from twinbuild.engine.daemon import EngineOptions, control

    options = EngineOptions(action=args.action, print_host=args.print_host)
    state = control(options)
    ok = state.running or options.action == "down"
    if args.format == "json":
        output.report(state, "json")
    elif options.print_host:
        output.data(state.docker_host)
    elif not ok:  # an error: stderr, and nothing on stdout a shell could eval or append
        print(f"twinbuild: {state.describe()}", file=sys.stderr)
    elif options.action in ("up", "env"):
        if options.action == "up":
            output.say(state.describe())
        output.data(state.export_line())
    elif options.action == "down":
        output.say(state.describe())
    else:
        output.data(state.describe())
    return 0 if ok else 3


def cmd_base(args: argparse.Namespace) -> int:
    """``base``: make or find the embedded base; ``base capture``: a base's installed set."""
    from twinbuild.engine.base import BaseOptions, base_for
    from twinbuild.engine.base_capture import CaptureResult

    options = BaseOptions(
        manifest=manifest_path(args), arch=args.arch, action=args.action,
        root=root(args), image=args.image, variant=args.variant, output=args.output,
    )  # fmt: skip
    result = base_for(options)
    output.report(
        result, args.format, text=result.text() if isinstance(result, CaptureResult) else None
    )
    return 0


def cmd_binfmt(args: argparse.Namespace) -> int:
    from twinbuild.engine.binfmt import BinfmtOptions, binfmt

    output.report(binfmt(BinfmtOptions(arch=args.arch)), args.format)
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from twinbuild.engine.prune import PruneOptions, prune_images

    output.report(prune_images(PruneOptions(keep=args.keep)), args.format)
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("engine", "binfmt", "prune", "base")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "engine",
        help="start, stop or show the private Docker engine; "
        '`eval "$(twinbuild engine env)"` points docker at it',
    )
    p.add_argument(
        "action", choices=("up", "down", "status", "env"), nargs="?", default="status",
        help="up starts it, down stops it, status says, env prints export DOCKER_HOST=... "
        "(default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--print-host", action="store_true", help="print only the DOCKER_HOST to use")
    add_format(p, what="the engine's state")
    p.set_defaults(func=cmd_engine)

    p = sub.add_parser(
        "binfmt",
        help="register QEMU for an architecture this host runs only emulated (root): installs "
        "qemu-user-static and binfmt-support, mounts binfmt_misc, update-binfmts --enable",
    )
    p.add_argument("--arch", choices=ARCHS, default="linux/arm64", help="default: linux/arm64")
    add_format(p, what="what was registered")
    p.set_defaults(func=cmd_binfmt)

    p = sub.add_parser(
        "prune", help="remove untagged twinbuild images beyond the newest N per image"
    )
    p.add_argument(
        "--keep", type=whole_number(0, 10_000), default=1, metavar="N",
        help="untagged images to keep per image and profile, newest first: a rebuild leaves "
        "the previous one untagged, ready to re-tag for a fast revert (default: %(default)s)",
    )  # fmt: skip
    add_format(p, what="what was removed and kept")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser(
        "base",
        help="build (or reuse) the embedded Debian base image; `base capture`: capture a base "
        "image's installed set (Python distributions, dpkg packages)",
    )
    add_common(p)
    p.add_argument(
        "action", nargs="?", choices=("capture",),
        help="capture: a variant's production base (--variant, --arch) into "
        "pins/lock/base/<image>.toml, or any --image (printed, or --output FILE)",
    )  # fmt: skip
    p.add_argument(
        "--arch", choices=ARCHS,
        help="the base's architecture (default: this host's); another one is made under QEMU",
    )  # fmt: skip
    p.add_argument("--variant", metavar="NAME", help="capture: the variant whose base to capture")
    p.add_argument(
        "--image", metavar="REF", help="capture: any image of the engine, by id, digest or tag"
    )
    p.add_argument("--output", metavar="FILE", help="capture --image: write the capture here")
    add_format(p, what="the base image, or the capture")
    p.set_defaults(func=cmd_base)
