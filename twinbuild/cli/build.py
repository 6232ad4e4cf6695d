"""``twinbuild build``, ``plan`` and ``bake``: build, say what a change affects, export bake."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from twinbuild.cli.common import (
    add_all_archs,
    add_common,
    add_format,
    add_variant,
    manifest_path,
    mirrors,
    repo_manifest,
    root,
    whole_number,
)
from twinbuild.manifest.model import PROFILES
from twinbuild.util import output

if TYPE_CHECKING:
    from twinbuild.builder import noop
    from twinbuild.builder.build_options import BuildRequest


def cmd_build(args: argparse.Namespace) -> int:
    from twinbuild.builder import noop
    from twinbuild.builder.build_options import BuildOptions, BuildRequest
    from twinbuild.builder.image import build_images

    request = BuildRequest(
        manifest=manifest_path(args),
        variant=args.variant,
        arch=args.arch,
        all_archs=args.all_archs,
        jobs=args.jobs,
        verbose=args.verbose,
        registry=args.registry,
        no_registry_cache=args.no_registry_cache,
        options=BuildOptions(
            root=root(args),
            profile=args.profile,
            force=args.force,
            mirrors=mirrors(args.mirrors),
        ),
    )
    pending = noop.PENDING[-1] if noop.PENDING else None
    if pending is not None:  # typed on the command line: remember a no-op for the next run
        _fingerprint(pending, request)
    results = build_images(request, say=output.say)
    shown = "".join(r.describe(verbose=request.verbose) + "\n" for r in results)
    output.report_all(results, args.format, text=shown)
    if pending is not None and args.format == "text" and all(r.up_to_date for r in results):
        from twinbuild.builder.build_record import record_path
        from twinbuild.engine.daemon import docker_host

        images = [(r.tag, r.image_id) for r in results]
        images += [(r.base.ref, r.base.id) for r in results if r.profile == "local"]
        top = request.options.root.resolve()
        records = [str(record_path(top, r.profile, r.image)) for r in results]
        pending.after(docker_host(), images, shown, root=str(top), outputs=records)
    return 0


def _fingerprint(pending: noop.Pending, request: BuildRequest) -> None:
    """What the no-op memo checks, taken before the decision: every file of the checkout, the
    manifest, what tells git what to ignore."""
    from twinbuild.util.repo_tree import WorkTree

    root = request.options.root.resolve()
    top = str(root)  # strings, not a Path per file: a third of the fingerprint's time was joins
    inside = [f"{top}{os.sep}{e.path}" for e in WorkTree(root).listing()]
    ignores = [str(root / ".git/info/exclude"), str(Path.home() / ".config/git/ignore")]
    pending.before(top, inside, [str(request.manifest.resolve()), *ignores])


def cmd_plan(args: argparse.Namespace) -> int:
    from twinbuild.builder.plan import PlanOptions, plan_change

    options = PlanOptions(
        manifest=repo_manifest(args),  # plan reads it with git: relative to the root
        root=root(args),
        base=args.base,
        github_output=args.github_output,
        format=args.format,
    )
    output.report(plan_change(options), args.format)
    return 0


def cmd_bake(args: argparse.Namespace) -> int:
    from twinbuild.builder.bake import BakeOptions, bake_images

    options = BakeOptions(
        manifest=manifest_path(args), root=root(args), out=Path(args.out), profile=args.profile,
        repository=args.repository, source=args.source, build=args.build,
    )  # fmt: skip
    output.report(bake_images(options, say=output.say), args.format)
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("build", "plan", "bake")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "build", help="build each variant's images (or --variant NAME); skip up-to-date ones"
    )
    add_common(p)
    add_variant(p, every="the [local] variants; every variant in production")
    add_all_archs(p)
    p.add_argument(
        "--profile", choices=PROFILES, default="local",
        help="local: the embedded Debian base; production: the registry bases (default: "
        "%(default)s)",
    )  # fmt: skip
    p.add_argument("--force", action="store_true", help="build even when up to date")
    p.add_argument(
        "-v", "--verbose", action="store_true",
        help="list each pin the profile leaves out (default: one line saying how many)",
    )  # fmt: skip
    p.add_argument("--jobs", type=whole_number(1, 64), default=1, help="images built concurrently")
    p.add_argument(
        "--mirror",
        dest="mirrors",
        action="append",
        default=[],
        metavar="PIN=PATH",
        help="local git mirror for a git pin (local profile)",
    )
    p.add_argument(
        "--registry",
        help="take the build cache (and the local base) from this registry, where `twinbuild push` "
        "put them (default: TWINBUILD_REGISTRY, else the private registry when it runs)",
    )
    p.add_argument(
        "--no-registry-cache", action="store_true", help="build without the registry cache"
    )
    add_format(p, what="each image built or up to date")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("plan", help="which images a change affects, and why")
    add_common(p)
    p.add_argument(
        "--base",
        metavar="REV",
        help="compare with REV (default: merge-base with origin/main, else HEAD~1)",
    )
    p.add_argument(
        "--github-output",
        action="store_true",
        help="append <image>=, <variant>=, any=, matrix= (the local images to build) and "
        "reasons to $GITHUB_OUTPUT",
    )
    add_format(p, what="the plan")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser(
        "bake", help="write a docker buildx bake file for the images (and build it with --build)"
    )
    add_common(p)
    p.add_argument("--out", default="docker-bake.json", help="bake file (default: %(default)s)")
    p.add_argument(
        "--profile", choices=PROFILES, default="production",
        help="production: the registry bases; local: the embedded base, needs an engine "
        "(default: %(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--repository", metavar="REGISTRY/NAME",
        help="tag the targets REPOSITORY:<image>-<arch> and use REPOSITORY:buildcache-... as the "
        "registry build cache (default: twinbuild build's tags, no registry cache)",
    )  # fmt: skip
    p.add_argument(
        "--source",
        help="org.opencontainers.image.source (default: the manifest's source, else the run's "
        "or the git remote's)",
    )
    p.add_argument(
        "--build", action="store_true",
        help="then build every target buildx resolves from the file, as twinbuild build does "
        "(buildx on the engine; installs Debian's docker-buildx where missing), and record them",
    )  # fmt: skip
    add_format(p, what="the file, its targets and what was built")
    p.set_defaults(func=cmd_bake)
