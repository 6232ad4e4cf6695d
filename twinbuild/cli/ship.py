"""``twinbuild registry``, ``push`` and ``release``: ship built images by digest."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from twinbuild.cli.common import add_common, platforms, root
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import PLATFORMS, PROFILES


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
    from twinbuild.engine import registry
    from twinbuild.engine.client import connect
    from twinbuild.ship.push import PushOptions, push

    output = os.environ.get("GITHUB_OUTPUT")
    options = PushOptions(
        root=root(args),
        registry=registry.resolve(args.registry),
        platforms=tuple(platforms(args)),
        profile=args.profile,
        github_output=Path(output) if output else None,
    )
    with connect() as engine:
        push(engine, options)
    return 0


def _repository_id(value: str | None) -> int:
    text = value or os.environ.get("GITHUB_REPOSITORY_ID", "")
    if not text.isdigit():
        raise ConfigError(
            "release: the repository id whose runs count is unknown; pass --repository-id "
            "(GitHub Actions sets GITHUB_REPOSITORY_ID)"
        )
    return int(text)


def cmd_release(args: argparse.Namespace) -> int:
    from twinbuild.evidence.keys import load_trusted
    from twinbuild.evidence.signing import Blob
    from twinbuild.ship.oci import ImageRef
    from twinbuild.ship.release import ReleaseOptions, Trust, release

    repository = args.repository or os.environ.get("GITHUB_REPOSITORY", "")
    if not repository:
        raise ConfigError(
            "release: the repository whose runs count is unknown; pass --repository OWNER/NAME "
            "(GitHub Actions sets GITHUB_REPOSITORY)"
        )
    evidence: Path | Blob
    if args.evidence:
        evidence = Path(args.evidence)
    else:
        from twinbuild.util.git import run_git

        name = f"{args.evidence_ref}:evidence/{args.platform}.dsse.json"
        shown = run_git(Path(), "show", name)
        if shown.returncode != 0:
            raise ConfigError(f"{name}: not in git ({shown.stderr.strip()}); fetch that ref first")
        evidence = Blob(name=name, data=shown.stdout.encode("utf-8"))
    options = ReleaseOptions(
        platform=args.platform,
        image=ImageRef.parse(args.image),
        tag=args.tag,
        evidence=evidence,
        trust=Trust(
            keys=load_trusted(Path(args.keys)),
            repository=repository,
            repository_id=_repository_id(args.repository_id),
            default_branch=args.default_branch,
            profile=args.profile,
            max_age=timedelta(days=args.max_age_days),
        ),
        now=datetime.now(UTC),
        force=args.force,
    )
    print(release(options).describe())
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("registry", help="start, stop or show the private OCI registry")
    p.add_argument(
        "action", choices=("up", "down", "status", "env"), nargs="?", default="status",
        help="env prints TWINBUILD_REGISTRY=HOST:PORT for $GITHUB_ENV or a shell",
    )  # fmt: skip
    p.add_argument(
        "--port",
        type=int,
        help="port on 127.0.0.1 for `up` (default 5000; TWINBUILD_REGISTRY_PORT)",
    )
    p.set_defaults(func=cmd_registry)

    p = sub.add_parser("push", help="push the built images; print REPOSITORY@sha256:DIGEST")
    add_common(p)
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
    p.add_argument("--max-age-days", type=float, default=14.0)
    p.add_argument("--force", action="store_true", help="move a tag that names another digest")
    p.set_defaults(func=cmd_release)
