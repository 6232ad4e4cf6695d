"""``twinbuild render`` (exactly what a build of one image receives) and ``twinbuild variants``
(the manifest's variants, and the workflows' matrices)."""

from __future__ import annotations

import argparse
from pathlib import Path

from twinbuild.cli.common import add_common, add_format, manifest_path, mirrors, root
from twinbuild.manifest.model import ARCHS, PROFILES
from twinbuild.util import output


def cmd_render(args: argparse.Namespace) -> int:
    from twinbuild.builder.render_command import RenderOptions, render_manifest

    options = RenderOptions(
        manifest=manifest_path(args), root=root(args), variant=args.variant, arch=args.arch,
        profile=args.profile, mirrors=mirrors(args.mirrors),
    )  # fmt: skip
    output.report(render_manifest(options), args.format)
    return 0


def cmd_variants(args: argparse.Namespace) -> int:
    from twinbuild.ci.matrix import MatrixOptions, VariantsRequest, run_variants
    from twinbuild.manifest.listing import VariantsOptions

    request = VariantsRequest(
        listing=VariantsOptions(manifest=manifest_path(args), format=args.format),
        matrix=MatrixOptions(
            manifest=manifest_path(args), job=args.matrix, scope=args.scope,
            required_by=Path(args.required_by) if args.required_by else None,
            github_output=args.github_output,
        ),
    )  # fmt: skip
    output.data(run_variants(request))
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("variants", "render")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "variants", help="list the manifest's variants (--format json); --matrix for workflows"
    )
    add_common(p, root=False)
    add_format(p, what="the variants (or, with --matrix, the matrix as one JSON line)")
    p.add_argument(
        "--matrix", choices=("build", "gpu"),
        help="print (and with --github-output write) the job matrix of the images a run builds "
        "or GPU-tests, each with its runner labels",
    )  # fmt: skip
    p.add_argument(
        "--for", dest="scope", choices=("pr", "nightly"), default="pr",
        help="pr: the variants the gate requires; nightly: every one that can build",
    )  # fmt: skip
    p.add_argument(
        "--required-by", metavar="MANIFEST",
        help="also the variants this manifest (the default branch's) gates",
    )  # fmt: skip
    p.add_argument("--github-output", action="store_true", help="write matrix= and any=")
    p.set_defaults(func=cmd_variants)

    p = sub.add_parser("render", help="print exactly what a build of one image of VARIANT receives")
    add_common(p)  # the manifest, and (production) the image's lock under the root
    p.add_argument("variant", metavar="VARIANT", help="a variant (`twinbuild variants`)")
    p.add_argument("--arch", choices=ARCHS, help="default: the variant's first architecture")
    # The same default as `twinbuild build`, so both describe the same build.
    p.add_argument("--profile", choices=PROFILES, default="local", help="default: local")
    p.add_argument(
        "--mirror", dest="mirrors", action="append", default=[], metavar="PIN=PATH",
        help="local git mirror for a git pin, as given to build (local profile)",
    )  # fmt: skip
    add_format(p, what="what the build receives")
    p.set_defaults(func=cmd_render)
