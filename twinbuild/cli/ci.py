"""``twinbuild workflows check`` and ``twinbuild rerun-decision``: the GitHub side of CI."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from twinbuild.cli.common import root
from twinbuild.errors import ConfigError, FindingsError


def cmd_workflows_check(args: argparse.Namespace) -> int:
    from twinbuild.ci import workflows

    if args.paths:  # explicit files or folders: the trust check alone (fixtures, one file)
        findings = workflows.check([Path(p) for p in args.paths])
        for finding in findings:
            print(finding)
        if findings:
            raise FindingsError(f"workflows: {len(findings)} trust findings")
        print(f"workflows: trust check clean ({', '.join(args.paths)})")
        return 0
    report = workflows.lint(root(args) / ".github" / "workflows")
    for line in report.lines():
        print(line)
    report.raise_if_bad()
    return 0


def cmd_rerun_report(args: argparse.Namespace) -> int:
    from twinbuild.ci import rerun

    current = rerun.outcomes(rerun.load_json(Path(args.current)), source=args.current)
    previous = (
        None
        if args.previous is None
        else rerun.outcomes(rerun.load_json(Path(args.previous)), source=args.previous)
    )
    decision = rerun.decide(attempt=args.attempt, current=current, previous=previous)
    _publish(decision.line(), decision.markdown(), decision.github_output(), args)
    decision.raise_if_bad()
    return 0


def cmd_rerun_guard(args: argparse.Namespace) -> int:
    from twinbuild.ci import rerun

    run = rerun.load_json(Path(args.run))
    if not isinstance(run, dict):
        raise ConfigError(f"{args.run}: expected a GitHub workflow run object")
    decision = rerun.guard(run, workflow=args.workflow)
    _publish(decision.line(), decision.markdown(), decision.github_output(), args)
    decision.raise_if_bad()
    return 0


def _publish(line: str, markdown: str, output: str, args: argparse.Namespace) -> None:
    """Print the verdict; append it to the step summary and $GITHUB_OUTPUT when asked."""
    print(line)
    if args.summary:
        with Path(args.summary).open("a", encoding="utf-8") as fh:
            fh.write(markdown)
    if getattr(args, "github_output", False):
        target = os.environ.get("GITHUB_OUTPUT")
        if not target:
            raise ConfigError("rerun-decision: --github-output needs $GITHUB_OUTPUT to be set")
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(output)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    wf = sub.add_parser("workflows", help="check the GitHub workflows").add_subparsers(
        dest="workflows_command", required=True, metavar="WORKFLOWS_COMMAND"
    )
    p = wf.add_parser(
        "check", help="trust check, zizmor and actionlint (or the trust check on PATHS)"
    )
    p.add_argument("--root", help="repository root holding .github/ (default: found from here)")
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.set_defaults(func=cmd_workflows_check)

    rr = sub.add_parser(
        "rerun-decision", help="the nightly's rerun policy (used by nightly.yml)"
    ).add_subparsers(dest="rerun_command", required=True, metavar="RERUN_COMMAND")
    p = rr.add_parser("report", help="verdict after an attempt: passed|rerun|flaky|failed|refuse")
    p.add_argument("--attempt", type=int, required=True, help="github.run_attempt")
    p.add_argument("--current", required=True, help="jobs API answer for this attempt (JSON)")
    p.add_argument("--previous", help="jobs API answer for the previous attempt (attempt > 1)")
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    p.add_argument("--github-output", action="store_true", help="write verdict= and jobs=")
    p.set_defaults(func=cmd_rerun_report)
    p = rr.add_parser("guard", help="may this finished run be re-run once? (nightly-rerun.yml)")
    p.add_argument("--run", required=True, help="runs API answer for the run (JSON)")
    p.add_argument("--workflow", default=".github/workflows/nightly.yml")
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    p.set_defaults(func=cmd_rerun_guard)
