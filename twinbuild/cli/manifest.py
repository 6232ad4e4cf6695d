"""``twinbuild render``: exactly what a build of a platform receives."""

from __future__ import annotations

import argparse
import sys

from twinbuild.cli.common import add_common, manifest_path, mirrors
from twinbuild.manifest.model import PLATFORMS, PROFILES


def cmd_render(args: argparse.Namespace) -> int:
    from twinbuild.builder.render import RenderOptions, render_manifest

    options = RenderOptions(
        manifest=manifest_path(args), platform=args.platform, profile=args.profile,
        mirrors=mirrors(args.mirrors),
    )  # fmt: skip
    sys.stdout.write(render_manifest(options).text())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", help="print exactly what a build of PLATFORM receives")
    add_common(p, root=False)  # a render reads the manifest alone
    p.add_argument("platform", choices=PLATFORMS)
    # The same default as `twinbuild build`, so both describe the same build.
    p.add_argument("--profile", choices=PROFILES, default="local", help="default: local")
    p.add_argument(
        "--mirror", dest="mirrors", action="append", default=[], metavar="PIN=PATH",
        help="local git mirror for a git pin, as given to build (local profile)",
    )  # fmt: skip
    p.set_defaults(func=cmd_render)
