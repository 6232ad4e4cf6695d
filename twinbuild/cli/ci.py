"""``twinbuild workflows check`` and ``twinbuild rerun-decision``: the GitHub side of CI."""

from __future__ import annotations

import argparse
from pathlib import Path

from twinbuild.cli.common import add_format, root, whole_number
from twinbuild.errors import FindingsError
from twinbuild.util import output


def cmd_workflows_check(args: argparse.Namespace) -> int:
    from twinbuild.ci.workflows import CheckOptions, check_workflows

    options = CheckOptions(root=root(args), paths=tuple(Path(p) for p in args.paths))
    report = check_workflows(options)
    if options.paths:  # explicit files or folders: the trust check alone (fixtures, one file)
        clean = (
            [] if report.findings else [f"workflows: trust check clean ({', '.join(args.paths)})"]
        )
        lines = [str(f) for f in report.findings] + clean
        output.report(report, args.format, text="".join(f"{line}\n" for line in lines))
        if report.findings:
            raise FindingsError(f"workflows: {len(report.findings)} trust findings")
        return 0
    output.report(report, args.format, text="".join(f"{line}\n" for line in report.lines()))
    report.raise_if_bad()
    return 0


def _optional_path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def cmd_rerun_report(args: argparse.Namespace) -> int:
    from twinbuild.ci.rerun import ReportOptions, report

    options = ReportOptions(
        attempt=args.attempt, current=Path(args.current),
        previous=_optional_path(args.previous), summary=_optional_path(args.summary),
        github_output=args.github_output,
    )  # fmt: skip
    decision = report(options)  # written to the summary and outputs asked for
    output.report(decision, args.format, text=decision.line())
    decision.raise_if_bad()
    return 0


def cmd_rerun_guard(args: argparse.Namespace) -> int:
    from twinbuild.ci.rerun import GuardOptions, check_guard

    options = GuardOptions(
        run=Path(args.run), workflow=args.workflow, summary=_optional_path(args.summary)
    )
    decision = check_guard(options)  # written to the summary asked for
    output.report(decision, args.format, text=decision.line())
    decision.raise_if_bad()
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("workflows", "rerun-decision")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    wf = sub.add_parser("workflows", help="check the GitHub workflows").add_subparsers(
        dest="workflows_command", required=True, metavar="WORKFLOWS_COMMAND"
    )
    p = wf.add_parser(
        "check", help="trust check, zizmor and actionlint (or the trust check on PATHS)"
    )
    p.add_argument("--root", help="repository root holding .github/ (default: found from here)")
    p.add_argument(
        "paths", nargs="*", metavar="PATH",
        help="workflow files or folders: the trust check alone (default: the whole lint of "
        "<root>/.github/workflows)",
    )  # fmt: skip
    add_format(p, what="the findings and each tool's verdict")
    p.set_defaults(func=cmd_workflows_check)

    rr = sub.add_parser(
        "rerun-decision", help="the nightly's rerun policy (used by nightly.yml)"
    ).add_subparsers(dest="rerun_command", required=True, metavar="RERUN_COMMAND")
    p = rr.add_parser("report", help="verdict after an attempt: passed|rerun|flaky|failed|refuse")
    p.add_argument(
        "--attempt", type=whole_number(1, 10_000), required=True, help="github.run_attempt"
    )
    p.add_argument("--current", required=True, help="jobs API answer for this attempt (JSON)")
    p.add_argument("--previous", help="jobs API answer for the previous attempt (attempt > 1)")
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    p.add_argument("--github-output", action="store_true", help="write verdict= and jobs=")
    add_format(p, "markdown", what="the verdict")
    p.set_defaults(func=cmd_rerun_report)
    p = rr.add_parser("guard", help="may this finished run be re-run once? (nightly-rerun.yml)")
    p.add_argument("--run", required=True, help="runs API answer for the run (JSON)")
    p.add_argument(
        "--workflow", default=".github/workflows/nightly.yml",
        help="the workflow whose runs may be re-run (default: %(default)s)",
    )  # fmt: skip
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    add_format(p, "markdown", what="the verdict")
    p.set_defaults(func=cmd_rerun_guard)
