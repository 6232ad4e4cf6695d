"""``twinbuild lint``: pin symmetry, SHAs, versions and recipe drift."""

from __future__ import annotations

import argparse

from twinbuild.cli.common import add_common, add_format, manifest_path, root
from twinbuild.errors import FindingsError
from twinbuild.util import output


def cmd_lint(args: argparse.Namespace) -> int:
    from twinbuild.lint.checks import LintOptions, format_findings, lint_project
    from twinbuild.util import github

    options = LintOptions(
        manifest=manifest_path(args), root=root(args), strict=args.strict, format=args.format
    )
    loaded, report = lint_project(options)
    if options.format == "json":
        print(report.to_json())
    else:
        for line in format_findings(report.findings, github=github.in_actions()):
            print(line)
        if not options.strict and report.floating:
            refs = sum(1 for f in report.floating if f.code == "TB010")
            locks = len(report.floating) - refs
            what = f"{refs} declared floating refs" + (
                f", {locks} lock entries not resolvable here (TB205/TB206)" if locks else ""
            )
            output.say(f"note: {what} (--strict fails them)")
    if report.findings:
        if options.format == "json":
            raise SystemExit(FindingsError.exit_code)
        raise FindingsError(f"lint: {len(report.findings)} findings")
    if options.format != "json":
        print(f"lint: clean ({len(loaded.pins)} pins, {loaded.path})")
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("lint",)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lint", help="check pin symmetry, SHAs, versions and recipe drift")
    add_common(p)
    p.add_argument("--strict", action="store_true", help="declared floating refs fail too")
    add_format(p, what="the findings")
    p.set_defaults(func=cmd_lint)
