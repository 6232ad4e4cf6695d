"""``twinbuild render``: exactly what a build of a platform receives."""

from __future__ import annotations

import argparse

from twinbuild.cli.common import add_common, add_format, manifest_path, mirrors
from twinbuild.manifest.model import PLATFORMS, PROFILES
from twinbuild.util import output


def cmd_render(args: argparse.Namespace) -> int:
    from twinbuild.builder.render import RenderOptions, render_manifest

    options = RenderOptions(
        manifest=manifest_path(args), platform=args.platform, profile=args.profile,
        mirrors=mirrors(args.mirrors),
    )  # fmt: skip
    output.report(render_manifest(options), args.format)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", help="print exactly what a build of PLATFORM receives")
    add_common(p, root=False)  # a render reads the manifest alone
    p.add_argument("platform", choices=PLATFORMS, help="the image to render")
    # The same default as `twinbuild build`, so both describe the same build.
    p.add_argument("--profile", choices=PROFILES, default="local", help="default: local")
    p.add_argument(
        "--mirror", dest="mirrors", action="append", default=[], metavar="PIN=PATH",
        help="local git mirror for a git pin, as given to build (local profile)",
    )  # fmt: skip
    add_format(p, what="what the build receives")
    p.set_defaults(func=cmd_render)
