"""``twinbuild registry``, ``push`` and ``release``: ship built images by digest."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twinbuild.cli.common import (
    add_all_archs,
    add_format,
    add_max_age,
    add_variant,
    whole_number,
)
from twinbuild.manifest.model import DEFAULT_PATH, PROFILES
from twinbuild.util import environ, output


def cmd_registry(args: argparse.Namespace) -> int:
    from twinbuild.engine import registry

    options = registry.RegistryOptions(action=args.action, port=args.port)
    state = registry.run(options)
    ok = state.running or args.action == "down"
    if args.format == "json":
        output.report(state, "json")
    elif not ok:  # `registry env >> $GITHUB_ENV` must never append an error as a line
        print(f"twinbuild: {state.describe()}", file=sys.stderr)
    elif args.action == "env":
        output.data(f"{registry.ENV_VAR}={state.address}")
    elif args.action == "up":
        output.say(state.describe())
        output.data(state.export_line())
    elif args.action == "down":
        output.say(state.describe())
    else:
        output.data(state.describe())
    return 0 if ok else 3


def cmd_push(args: argparse.Namespace) -> int:
    from twinbuild.ship.push import PushOptions, push_images

    outputs = environ.text("GITHUB_OUTPUT")
    options = PushOptions(
        root=Path(args.root),
        manifest=Path(args.manifest) if args.manifest else Path(args.root) / DEFAULT_PATH,
        variant=args.variant,
        arch=args.arch,
        all_archs=args.all_archs,
        profile=args.profile,
        registry=args.registry,
        github_output=Path(outputs) if outputs else None,
        index=tuple(args.index),
    )
    output.report(push_images(options, say=output.say), args.format)
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from twinbuild.ship.release import ReleaseRequest, release_image

    request = ReleaseRequest(
        variant=args.variant,
        image=args.image,
        tag=args.tag,
        evidence=tuple(Path(e) for e in args.evidence),
        evidence_ref=args.evidence_ref,
        keys=Path(args.keys),
        repo=Path(args.repo),
        repository=args.repository,
        repository_id=args.repository_id,
        default_branch=args.default_branch,
        profile=args.profile,
        max_age_days=args.max_age_days,
        force=args.force,
    )
    output.report(release_image(request, say=output.say), args.format)
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("registry", "push", "release")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("registry", help="start, stop or show the private OCI registry")
    p.add_argument(
        "action", choices=("up", "down", "status", "env"), nargs="?", default="status",
        help="env prints TWINBUILD_REGISTRY=HOST:PORT for $GITHUB_ENV or a shell",
    )  # fmt: skip
    p.add_argument(
        "--port",
        type=whole_number(1, 65535),
        help="port on 127.0.0.1 for `up` (default 5000; TWINBUILD_REGISTRY_PORT)",
    )
    add_format(p, what="the registry's state")
    p.set_defaults(func=cmd_registry)

    p = sub.add_parser("push", help="push the built images; print REPOSITORY@sha256:DIGEST")
    p.add_argument("--root", default=".", help="repository root holding build/ (default: .)")
    p.add_argument("--manifest", help=f"pin manifest (default: <root>/{DEFAULT_PATH})")
    add_variant(p, every="the [local] variants; every variant in production")
    add_all_archs(p)
    p.add_argument(
        "--profile", choices=PROFILES, default="local",
        help="the built images of this profile (default: %(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--index", action="append", default=[], metavar="REPO@sha256:DIGEST",
        help="with --variant: make its image index of these pushed images, one per "
        "architecture (each built on a machine of its own), instead of pushing",
    )  # fmt: skip
    p.add_argument(
        "--registry", help="a real registry HOST[:PORT] (default: TWINBUILD_REGISTRY, else private)"
    )
    add_format(p, what="REPOSITORY@sha256:DIGEST per image")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser(
        "release", help="tag a pushed digest, only with its signed GPU evidence stored beside it"
    )
    p.add_argument(
        "--variant", metavar="NAME", help="default: the one whose repository --image is in"
    )
    p.add_argument(
        "--image", required=True, metavar="REPO@sha256:DIGEST",
        help="an image, or a variant's image index (every architecture it names needs evidence)",
    )  # fmt: skip
    p.add_argument("--tag", required=True, help="the release tag to point at the digest")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument(
        "--evidence", action="append", default=[],
        help="a DSSE envelope (<variant>-<arch>.dsse.json); one per architecture",
    )  # fmt: skip
    g.add_argument("--evidence-ref", help="git ref carrying evidence/<variant>-<arch>.dsse.json")
    p.add_argument("--keys", default="evidence/keys", help="trusted public keys (default branch)")
    p.add_argument(
        "--repo", default=".",
        help="the default branch's checkout: the evidence must be about its HEAD (default: .)",
    )  # fmt: skip
    p.add_argument("--repository", help="OWNER/NAME whose runs count (default: GITHUB_REPOSITORY)")
    p.add_argument("--repository-id", help="its numeric id (default: GITHUB_REPOSITORY_ID)")
    p.add_argument(
        "--default-branch", default="main",
        help="the branch whose validate-gpu.yml signs evidence (default: %(default)s)",
    )  # fmt: skip
    p.add_argument(
        "--profile", choices=PROFILES, default="production",
        help="the profile the evidence must be for (default: %(default)s)",
    )  # fmt: skip
    add_max_age(p)
    p.add_argument("--force", action="store_true", help="move a tag that names another digest")
    add_format(p, what="the release")
    p.set_defaults(func=cmd_release)
