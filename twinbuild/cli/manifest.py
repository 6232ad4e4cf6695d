"""``twinbuild render``: exactly what a build of a platform receives."""

from __future__ import annotations

import argparse
import sys

from twinbuild.cli.common import add_common, manifest, mirrors
from twinbuild.manifest.model import PLATFORMS, PROFILES


def cmd_render(args: argparse.Namespace) -> int:
    from twinbuild.manifest.render import render

    loaded = manifest(args)
    note = None
    base = None
    if args.profile == "local":
        from twinbuild.engine.base import base_tag
        from twinbuild.errors import TwinbuildError

        local = loaded.local
        try:  # the same derivation `twinbuild build` tags the base with
            base = base_tag(suite=local.suite, mirror=local.mirror, packages=local.packages)
        except TwinbuildError as exc:
            note = f"# BASE_IMAGE: unknown until debootstrap is installed ({exc})"
    rendered = render(
        loaded, args.platform, args.profile, mirrors=mirrors(args.mirror),
        **({"local_base": base} if base else {}),
    )  # fmt: skip
    text = rendered.text()
    if note:
        text = text.replace("build args:\n", f"build args:\n{note}\n", 1)
    sys.stdout.write(text)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", help="print exactly what a build of PLATFORM receives")
    add_common(p)
    p.add_argument("platform", choices=PLATFORMS)
    # The same default as `twinbuild build`, so both describe the same build.
    p.add_argument("--profile", choices=PROFILES, default="local", help="default: local")
    p.add_argument(
        "--mirror", action="append", default=[], metavar="PIN=PATH",
        help="local git mirror for a git pin, as given to build (local profile)",
    )  # fmt: skip
    p.set_defaults(func=cmd_render)
