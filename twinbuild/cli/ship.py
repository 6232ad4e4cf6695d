"""``twinbuild registry``, ``push`` and ``release``: ship built images by digest."""

from __future__ import annotations

import argparse
from pathlib import Path

from twinbuild.cli.common import days, whole_number
from twinbuild.manifest.model import PLATFORMS, PROFILES
from twinbuild.util import environ


def cmd_registry(args: argparse.Namespace) -> int:
    from twinbuild.engine import registry

    options = registry.RegistryOptions(action=args.action, port=args.port)
    state = registry.run(options)
    if args.action == "env":
        if not state.running:
            print(state.describe())
            return 3
        print(f"{registry.ENV_VAR}={state.address}")
        return 0
    print(state.describe())
    if args.action == "up":
        print(state.export_line())
    return 0 if state.running or args.action == "down" else 3


def cmd_push(args: argparse.Namespace) -> int:
    from twinbuild.ship.push import PushOptions, push_images

    output = environ.text("GITHUB_OUTPUT")
    options = PushOptions(
        root=Path(args.root),
        platform=args.platform,
        profile=args.profile,
        registry=args.registry,
        github_output=Path(output) if output else None,
    )
    push_images(options)
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from twinbuild.ship.release import ReleaseRequest, release_image

    request = ReleaseRequest(
        platform=args.platform,
        image=args.image,
        tag=args.tag,
        evidence=Path(args.evidence) if args.evidence else None,
        evidence_ref=args.evidence_ref,
        keys=Path(args.keys),
        repository=args.repository,
        repository_id=args.repository_id,
        default_branch=args.default_branch,
        profile=args.profile,
        max_age_days=args.max_age_days,
        force=args.force,
    )
    print(release_image(request).describe())
    return 0


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
    p.set_defaults(func=cmd_registry)

    p = sub.add_parser("push", help="push the built images; print REPOSITORY@sha256:DIGEST")
    p.add_argument("--root", default=".", help="repository root holding build/ (default: .)")
    p.add_argument("--platform", choices=PLATFORMS, help="default: both")
    p.add_argument("--profile", choices=PROFILES, default="local")
    p.add_argument(
        "--registry", help="a real registry HOST[:PORT] (default: TWINBUILD_REGISTRY, else private)"
    )
    p.set_defaults(func=cmd_push)

    p = sub.add_parser(
        "release", help="tag a pushed digest, only with its signed GPU evidence stored beside it"
    )
    p.add_argument("--platform", choices=PLATFORMS, required=True)
    p.add_argument("--image", required=True, metavar="REPO@sha256:DIGEST")
    p.add_argument("--tag", required=True, help="the release tag to point at the digest")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--evidence", help="the DSSE envelope file (<platform>.dsse.json)")
    g.add_argument("--evidence-ref", help="git ref carrying evidence/<platform>.dsse.json")
    p.add_argument("--keys", default="evidence/keys", help="trusted public keys (default branch)")
    p.add_argument("--repository", help="OWNER/NAME whose runs count (default: GITHUB_REPOSITORY)")
    p.add_argument("--repository-id", help="its numeric id (default: GITHUB_REPOSITORY_ID)")
    p.add_argument("--default-branch", default="main")
    p.add_argument("--profile", choices=PROFILES, default="production")
    p.add_argument("--max-age-days", type=days, default=14.0)
    p.add_argument("--force", action="store_true", help="move a tag that names another digest")
    p.set_defaults(func=cmd_release)
