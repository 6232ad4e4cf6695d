"""``twinbuild evidence ...``: the parser; handlers (and cryptography) load only when one runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from twinbuild.cli.common import add_format, add_max_age, whole_number
from twinbuild.manifest.model import ARCHS, DEFAULT_PATH

#: A pull request number, as GitHub hands them out (a positive 32-bit integer).
PR_NUMBER = whole_number(1, 2**31 - 1)

# Each handler types its arguments; twinbuild.cli.evidence_handlers (and cryptography) load only
# when one runs.


def cmd_record(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import record
    from twinbuild.evidence.command_options import RecordOptions

    return record(
        RecordOptions(
            variant=args.variant, arch=args.arch, report_dir=Path(args.report_dir),
            out=Path(args.out),
            commit=args.commit, pr=args.pr, repo=Path(args.repo), manifest=Path(args.manifest),
            env_file=_path(args.env_file), repository_id=args.repository_id,
        ),
        args.format,
    )  # fmt: skip


def cmd_sign(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import sign
    from twinbuild.evidence.command_options import SignOptions

    key = Path(args.key) if args.key else None
    return sign(
        SignOptions(
            statements=Path(args.statements), out=Path(args.out), key=key, commit=args.commit,
            pr=args.pr, repo=Path(args.repo), manifest=Path(args.manifest),
        ),
        args.format,
    )  # fmt: skip


def cmd_verify(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import verify
    from twinbuild.evidence.command_options import VerifyOptions

    return verify(
        VerifyOptions(
            paths=tuple(Path(p) for p in args.paths), keys=Path(args.keys), image=args.image
        ),
        args.format,
    )


def cmd_gate(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import gate
    from twinbuild.evidence.command_options import GateOptions

    options = GateOptions(
        head=args.head, base=args.base, repo=Path(args.repo), evidence_ref=args.evidence_ref,
        reviews=Path(args.reviews) if args.reviews else None,
        permissions=Path(args.permissions) if args.permissions else None,
        evidence=tuple(Path(p) for p in args.evidence), keys=Path(args.keys),
        manifest=Path(args.manifest), max_age_days=args.max_age_days,
        same_commit=args.same_commit, default_branch=args.default_branch, pr=args.pr,
        summary=Path(args.summary) if args.summary else None,
        env_file=_path(args.env_file), repository_id=args.repository_id,
    )  # fmt: skip
    return gate(options, args.format)


def cmd_inputs(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import inputs
    from twinbuild.evidence.command_options import InputsOptions

    return inputs(
        InputsOptions(
            head=args.head, format=args.format, manifest=Path(args.manifest), repo=Path(args.repo)
        )
    )


def cmd_check_push(args: argparse.Namespace) -> int:
    from twinbuild.evidence.command_options import CheckPushOptions
    from twinbuild.evidence.push_check import check_push
    from twinbuild.util import output

    check_push(
        CheckPushOptions(
            base=args.base, head=args.head, reviewed_workflows=tuple(args.reviewed_workflows),
            repo=Path(args.repo),
        ),
        say=output.say, show=lambda found: output.report(found, args.format),
    )  # fmt: skip
    return 0


def cmd_trigger(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import trigger
    from twinbuild.evidence.command_options import TriggerOptions

    return trigger(
        TriggerOptions(
            workflow=args.workflow, github_output=args.github_output,
            branch_tips=_path(args.branch_tips),
        ),
        args.format,
    )  # fmt: skip


def cmd_keygen(args: argparse.Namespace) -> int:
    from twinbuild.cli.evidence_handlers import keygen
    from twinbuild.evidence.command_options import KeygenOptions

    return keygen(KeygenOptions(private=Path(args.private), public=Path(args.public)), args.format)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _dry_run_arguments(p: argparse.ArgumentParser) -> None:
    """What a job's runner sets, for a dry run outside one (twinbuild.evidence.run_env)."""
    p.add_argument(
        "--repository-id", metavar="N",
        help="a dry run: the repository's numeric id (GITHUB_REPOSITORY_ID; in a job the "
        "runner's value counts, a different one is refused)",
    )  # fmt: skip
    p.add_argument(
        "--env-file", metavar="FILE",
        help="a dry run: GITHUB_*/RUNNER_* NAME=VALUE lines a job would have (never "
        "overriding a job's own)",
    )  # fmt: skip


def _validated_arguments(p: argparse.ArgumentParser) -> None:
    """What record and sign hold a run to: the commit and PR the trigger check established."""
    p.add_argument("--commit", required=True, help="the validated commit (40 hex)")
    p.add_argument("--pr", type=PR_NUMBER, required=True, help="the PR of validate/pr-<N>")
    p.add_argument("--repo", default=".", help="the git repository holding the commit")
    p.add_argument("--manifest", default=str(DEFAULT_PATH), help="the manifest's path in it")


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("evidence",)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser("evidence", help="record, sign, verify and gate on GPU evidence")
    ev = group.add_subparsers(dest="evidence_command", required=True, metavar="EVIDENCE_COMMAND")
    p = ev.add_parser("record", help="build the in-toto statement from a smoke report")
    p.add_argument("--variant", required=True, metavar="NAME", help="the image's variant")
    p.add_argument("--arch", choices=ARCHS, required=True, help="the image's architecture")
    p.add_argument(
        "--report-dir",
        required=True,
        help="folder holding the smoke report smoke-<variant>-<arch>-<profile>.json",
    )
    p.add_argument("--out", required=True, help="folder for <variant>-<arch>.statement.json")
    _validated_arguments(p)
    _dry_run_arguments(p)
    add_format(p, what="the statement written")
    p.set_defaults(func=cmd_record)
    p = ev.add_parser("sign", help="sign statements into DSSE envelopes (ed25519)")
    p.add_argument(
        "--in", dest="statements", required=True, help="folder searched for *.statement.json"
    )
    p.add_argument("--out", required=True, help="folder for <variant>-<arch>.dsse.json")
    p.add_argument("--key", help="private key file outside the work tree (default: env secret)")
    _validated_arguments(p)
    add_format(p, what="each envelope signed")
    p.set_defaults(func=cmd_sign)
    p = ev.add_parser("verify", help="check signatures and structure")
    p.add_argument("paths", nargs="*", metavar="PATH", help="envelopes, or folders of *.dsse.json")
    p.add_argument(
        "--image", metavar="REPO@sha256:DIGEST",
        help="fetch and verify the evidence `release` stored next to this image in its registry",
    )  # fmt: skip
    p.add_argument("--keys", default="evidence/keys", help="trusted public keys folder")
    add_format(p, what="each envelope checked")
    p.set_defaults(func=cmd_verify)
    p = ev.add_parser("inputs", help="the inputs hashes the gate computes at a commit")
    p.add_argument("--head", required=True, help="the commit (e.g. the PR head)")
    add_format(p, what="the inputs hashes")
    p.add_argument(
        "--manifest", default=str(DEFAULT_PATH),
        help="the manifest's path in the commit (default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--repo", default=".", help="the git repository holding it (default: .)")
    p.set_defaults(func=cmd_inputs)
    p = ev.add_parser("gate", help="does the evidence count for this PR head?")
    p.add_argument("--head", required=True, help="the PR head commit (40 hex)")
    p.add_argument(
        "--base", required=True,
        help="the current base commit: what the PR lands on; its CODEOWNERS judge trust roots",
    )  # fmt: skip
    p.add_argument("--repo", default=".", help="the git repository holding both (default: .)")
    p.add_argument(
        "--reviews", metavar="FILE",
        help="the PR's reviews as GitHub's list-reviews API answers (gh api --paginate --slurp)",
    )  # fmt: skip
    p.add_argument(
        "--permissions", metavar="FILE",
        help="a dry run: whether each reviewer can write (and team memberships), as GitHub's "
        "answers; in GitHub Actions the gate asks GitHub with $GITHUB_TOKEN instead",
    )  # fmt: skip
    p.add_argument("--evidence-ref", help="git ref carrying evidence/<variant>-<arch>.dsse.json")
    p.add_argument(
        "--evidence", action="append", default=[], metavar="FILE",
        help="an evidence file (repeat the option for each file)",
    )  # fmt: skip
    p.add_argument(
        "--keys", default="evidence/keys", help="trusted public keys folder (default: %(default)s)"
    )
    p.add_argument(
        "--manifest", default=str(DEFAULT_PATH),
        help="the manifest's path in the commits (default: %(default)s)",
    )  # fmt: skip
    add_max_age(p)
    p.add_argument("--same-commit", action="store_true", help="accept the head commit only")
    p.add_argument(
        "--default-branch", default="main",
        help="the default branch, where the event does not say (default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--pr", type=PR_NUMBER, help="the PR number, where the event does not say")
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    _dry_run_arguments(p)
    add_format(p, what="the verdict")
    p.set_defaults(func=cmd_gate)
    p = ev.add_parser(
        "check-push",
        help="before pushing a PR head to validate/pr-N: the workflows it adds or changes",
    )
    p.add_argument("--base", required=True, help="the PR's base, e.g. origin/main")
    p.add_argument("--head", required=True, help="the reviewed head, e.g. FETCH_HEAD")
    p.add_argument(
        "--reviewed-workflows", nargs="+", action="extend", default=[], metavar="PATH",
        help="exactly the .github/workflows/ and .github/actions/ paths the head adds or changes, "
        "each reviewed",
    )  # fmt: skip
    p.add_argument("--repo", default=".", help="the git repository holding both (default: .)")
    add_format(p, what="the workflow and action paths the head changes")
    p.set_defaults(func=cmd_check_push)
    p = ev.add_parser(
        "trigger", help="the validation workflow's first check: did the validation build start it?"
    )
    p.add_argument("--workflow", default=".github/workflows/validate.yml", help="the build file")
    p.add_argument(
        "--github-output", action="store_true", help="write commit=, pr=, branch=, run-id="
    )
    p.add_argument(
        "--branch-tips", metavar="FILE",
        help="`git ls-remote origin refs/heads/BRANCH` output: the run's branch must exist and "
        "point at its head (a tag of that name is no branch)",
    )  # fmt: skip
    add_format(p, what="the validated run")
    p.set_defaults(func=cmd_trigger)
    p = ev.add_parser("keygen", help="make an ed25519 key pair for signing evidence")
    p.add_argument(
        "--private", required=True, help="where the private key goes (outside the work tree)"
    )
    p.add_argument("--public", required=True, help="where the public key goes (evidence/keys/)")
    add_format(p, what="the new key's id and files")
    p.set_defaults(func=cmd_keygen)
