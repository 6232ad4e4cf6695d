"""The ``twinbuild`` command: parse arguments, call the library, map errors to exit codes.

Only :func:`main` catches; the work raises :class:`twinbuild.errors.TwinbuildError`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from twinbuild import __version__
from twinbuild.errors import ConfigError, FindingsError, TwinbuildError
from twinbuild.manifest import DEFAULT_PATH, PLATFORMS, PROFILES, Manifest, Platform, load

if TYPE_CHECKING:
    from twinbuild.engine import Engine

Handler = Callable[[argparse.Namespace], int]


def _manifest(args: argparse.Namespace) -> Manifest:
    return load(Path(args.manifest))


def _root(args: argparse.Namespace) -> Path:
    return Path(args.root)


# -- commands ------------------------------------------------------------------------------------


def cmd_lint(args: argparse.Namespace) -> int:
    from twinbuild.lint import format_findings, lint

    manifest = _manifest(args)
    report = lint(manifest, _root(args), strict=args.strict)
    if args.format == "json":
        print(report.to_json())
    else:
        github = os.environ.get("GITHUB_ACTIONS") == "true"
        for line in format_findings(report.findings, github=github):
            print(line)
        if not args.strict and report.floating:
            print(f"note: {len(report.floating)} declared floating refs (--strict fails them)")
    if report.findings:
        if args.format == "json":
            raise SystemExit(FindingsError.exit_code)
        raise FindingsError(f"lint: {len(report.findings)} findings")
    if args.format != "json":
        print(f"lint: clean ({len(manifest.pins)} pins, {manifest.path})")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from twinbuild.render import render

    rendered = render(_manifest(args), args.platform, args.profile)
    sys.stdout.write(rendered.text())
    return 0


def cmd_pins_table(args: argparse.Namespace) -> int:
    from twinbuild.table import markdown

    sys.stdout.write(markdown(_manifest(args)))
    return 0


def cmd_engine(args: argparse.Namespace) -> int:
    from twinbuild import dockerd

    action = {"up": dockerd.up, "down": dockerd.down, "status": dockerd.status}[args.action]
    state = action()
    if args.print_host:
        print(state.docker_host)
    else:
        print(state.describe())
        if args.action == "up":
            print(state.export_line())
    return 0 if state.running or args.action == "down" else 3


def _connect() -> Engine:
    from twinbuild.engine import connect

    return connect()


def cmd_base(args: argparse.Namespace) -> int:
    from twinbuild.base import ensure_base

    local = _manifest(args).local
    with _connect() as engine:
        result = ensure_base(
            engine, suite=local.suite, mirror=local.mirror, packages=local.packages
        )
    print(result.describe())
    return 0


def _platforms(args: argparse.Namespace) -> list[Platform]:
    return [args.platform] if args.platform else list(PLATFORMS)


def _mirrors(items: Sequence[str]) -> dict[str, str]:
    mirrors: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(
                f"--mirror {item!r}: expected PIN=PATH, e.g. --mirror tms=/srv/tms.git"
            )
        mirrors[name] = path
    return mirrors


def cmd_build(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from twinbuild.build import BuildOptions, build_image

    manifest = _manifest(args)
    options = BuildOptions(
        root=_root(args),
        profile=args.profile,
        force=args.force,
        mirrors=_mirrors(args.mirror),
        revision=os.environ.get("GITHUB_SHA"),
    )
    with _connect() as engine:
        platforms = _platforms(args)
        if args.jobs > 1 and len(platforms) > 1:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = list(
                    pool.map(lambda p: build_image(manifest, engine, p, options), platforms)
                )
        else:
            results = [build_image(manifest, engine, p, options) for p in platforms]
    for result in results:
        print(result.describe())
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from twinbuild.adopt import run

    return run(
        args.cuda_dockerfile, args.rocm_dockerfile, out=args.out, fmt=args.format,
        force=args.force, allow_unrecognised=args.allow_unrecognised, stream=sys.stdout,
    )  # fmt: skip


def cmd_workflows_check(args: argparse.Namespace) -> int:
    from twinbuild import workflows

    if args.paths:  # explicit files or folders: the trust check alone (fixtures, one file)
        findings = workflows.check([Path(p) for p in args.paths])
        for finding in findings:
            print(finding)
        if findings:
            raise FindingsError(f"workflows: {len(findings)} trust findings")
        print(f"workflows: trust check clean ({', '.join(args.paths)})")
        return 0
    report = workflows.lint(_root(args) / ".github" / "workflows")
    for line in report.lines():
        print(line)
    report.raise_if_bad()
    return 0


def cmd_rerun_report(args: argparse.Namespace) -> int:
    from twinbuild import rerun

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
    from twinbuild import rerun

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


def cmd_pins_bump(args: argparse.Namespace) -> int:
    from twinbuild.bump import BumpRequest, bump

    request = BumpRequest(
        name=args.name,
        commit=args.commit,
        version=args.version,
        why=args.why,
        platform=args.platform,
        diverge=args.diverge,
        reason=args.reason,
    )
    result = bump(Path(args.manifest), request, upstream=args.upstream, write=not args.dry_run)
    sys.stdout.write(result.report())
    return 0


def cmd_pins_diff(args: argparse.Namespace) -> int:
    from twinbuild.diff import diff_revs

    result = diff_revs(args.rev_a, args.rev_b, manifest=Path(args.manifest), repo=_root(args))
    sys.stdout.write(result.markdown() if args.format == "markdown" else result.text())
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from twinbuild.plan import plan, write_github_output

    result = plan(_root(args), args.base, manifest=Path(args.manifest))
    sys.stdout.write(result.text())
    if args.github_output:
        write_github_output(result)
    return 0


def cmd_bake(args: argparse.Namespace) -> int:
    from twinbuild.bake import bake

    result = bake(
        _manifest(args),
        _root(args),
        out=Path(args.out),
        repository=args.repository,
        source=args.source,
    )
    sys.stdout.write(result.report())
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from twinbuild.bench import run

    out = Path(args.out)
    run(_root(args), out, quick=args.quick, say=print)
    print((out / "bench.md").read_text(), end="")
    print(f"wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from twinbuild.smoke.runner import smoke

    outcomes = smoke(
        _manifest(args), root=_root(args), platform=args.platform, profile=args.profile,
        image=args.image, host=args.host, gpu=args.gpu, rerun_failed_once=args.rerun_failed_once,
        report_dir=Path(args.report_dir),
    )  # fmt: skip
    for o in outcomes:
        c = o.summary["counts"]
        print(
            f"smoke {o.summary['platform']} ({o.summary['profile']}): {c['passed']} passed, "
            f"{c['failed']} failed, {c['skipped']} skipped, {c['flaky']} flaky in "
            f"{o.seconds:.1f}s -> {o.paths['json']}"
        )
    return 0


# -- parser --------------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest", default=str(DEFAULT_PATH), help="pin manifest (default: %(default)s)"
    )
    parser.add_argument("--root", default=".", help="repository root holding images/ (default: .)")


def _evidence(name: str) -> Handler:
    """A handler of twinbuild.evidence.commands, imported when it runs."""

    def handler(args: argparse.Namespace) -> int:
        from twinbuild.evidence import commands

        func: Handler = getattr(commands, name)
        return func(args)

    return handler


def _add_evidence(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`twinbuild evidence ...`; the handlers (and cryptography) load only when one runs."""
    group = sub.add_parser("evidence", help="record, sign, verify and gate on GPU evidence")
    ev = group.add_subparsers(dest="evidence_command", required=True, metavar="EVIDENCE_COMMAND")
    p = ev.add_parser("record", help="build the in-toto statement from a smoke report")
    p.add_argument("--platform", choices=PLATFORMS, required=True)
    p.add_argument(
        "--report-dir",
        required=True,
        help="folder holding the smoke report smoke-<platform>-<profile>.json",
    )
    p.add_argument("--out", required=True, help="folder for <platform>.statement.json")
    p.add_argument("--pr", type=int, help="the pull request this validates")
    p.set_defaults(func=_evidence("cmd_record"))
    p = ev.add_parser("sign", help="sign statements into DSSE envelopes (ed25519)")
    p.add_argument("--in", dest="in_", required=True, help="folder searched for *.statement.json")
    p.add_argument("--out", required=True, help="folder for <platform>.dsse.json")
    p.add_argument("--key", help="private key file outside the work tree (default: env secret)")
    p.set_defaults(func=_evidence("cmd_sign"))
    p = ev.add_parser("verify", help="check signatures and structure")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--keys", default="evidence/keys", help="trusted public keys folder")
    p.set_defaults(func=_evidence("cmd_verify"))
    p = ev.add_parser("gate", help="does the evidence count for this PR head?")
    p.add_argument("--head", required=True, help="the PR head commit (40 hex)")
    p.add_argument("--base", help="the PR base commit (informational)")
    p.add_argument("--evidence-ref", help="git ref carrying evidence/<platform>.dsse.json")
    p.add_argument("--evidence", action="append", default=[], help="an evidence file")
    p.add_argument("--keys", default="evidence/keys")
    p.add_argument("--manifest", default=str(DEFAULT_PATH))
    p.add_argument("--max-age-days", type=float, default=14.0)
    p.add_argument("--same-commit", action="store_true", help="accept the head commit only")
    p.add_argument("--default-branch", default="main")
    p.add_argument("--pr", type=int)
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    p.set_defaults(func=_evidence("cmd_gate"))
    p = ev.add_parser("keygen", help="make an ed25519 key pair for signing evidence")
    p.add_argument("--private", required=True)
    p.add_argument("--public", required=True)
    p.set_defaults(func=_evidence("cmd_keygen"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="twinbuild",
        description="One pin manifest, two GPU images: lint, build, smoke-test and prove them.",
    )
    parser.add_argument("--version", action="version", version=f"twinbuild {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("lint", help="check pin symmetry, SHAs, versions and recipe drift")
    _common(p)
    p.add_argument("--strict", action="store_true", help="declared floating refs fail too")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("render", help="print exactly what a build of PLATFORM receives")
    _common(p)
    p.add_argument("platform", choices=PLATFORMS)
    p.add_argument("--profile", choices=PROFILES, default="production")
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("engine", help="start, stop or show the private Docker engine")
    p.add_argument("action", choices=("up", "down", "status"), nargs="?", default="status")
    p.add_argument("--print-host", action="store_true", help="print only the DOCKER_HOST to use")
    p.set_defaults(func=cmd_engine)

    p = sub.add_parser("base", help="build (or reuse) the embedded Debian base image")
    _common(p)
    p.set_defaults(func=cmd_base)

    p = sub.add_parser("build", help="build both images (or --platform P); skip up-to-date ones")
    _common(p)
    p.add_argument("--platform", choices=PLATFORMS)
    p.add_argument("--profile", choices=PROFILES, default="local")
    p.add_argument("--force", action="store_true", help="build even when up to date")
    p.add_argument("--jobs", type=int, default=1, help="build platforms concurrently")
    p.add_argument(
        "--builder", choices=("auto", "buildkit", "classic"), default="auto",
        help="BuildKit where the engine has it, else the classic builder (default: auto)",
    )  # fmt: skip
    p.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="PIN=PATH",
        help="local git mirror for a git pin (local profile)",
    )
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("bench", help="benchmarks, side by side with plain docker build")
    p.add_argument("--root", default=".", help="repository root (default: .)")
    p.add_argument("--out", default="build/bench", help="folder for bench.md and bench.json")
    p.add_argument("--quick", action="store_true", help="fewer runs, no base-included build")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "smoke", help="check built images (by id, network none) against the manifest"
    )
    _common(p)
    p.add_argument("--platform", choices=PLATFORMS, help="default: both")
    p.add_argument("--profile", choices=PROFILES, help="default: local for built images")
    p.add_argument("--image", metavar="REF", help="check any image (resolved to its id first)")
    p.add_argument("--host", action="store_true", help="check this machine (testinfra local)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gpu", dest="gpu", action="store_true", default=None, help="require a GPU")
    g.add_argument("--no-gpu", dest="gpu", action="store_false", help="skip the GPU checks")
    p.add_argument(
        "--rerun-failed-once", action="store_true",
        help="rerun a failed GPU test once; a pass on the rerun is reported as flaky",
    )  # fmt: skip
    p.add_argument("--report-dir", default="build/smoke")
    p.set_defaults(func=cmd_smoke)

    p = sub.add_parser(
        "import", help="draft pins/manifest.toml from two recipes that hard-code their pins"
    )
    p.add_argument("cuda_dockerfile", type=Path, metavar="CUDA_DOCKERFILE")
    p.add_argument("rocm_dockerfile", type=Path, metavar="ROCM_DOCKERFILE")
    p.add_argument(
        "--out", type=Path, default=DEFAULT_PATH, help="draft path (default: %(default)s)"
    )
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument(
        "--allow-unrecognised", action="store_true",
        help="exit 0 even when some pin-like text could not be classified",
    )  # fmt: skip
    p.set_defaults(func=cmd_import)

    wf = sub.add_parser("workflows", help="check the GitHub workflows").add_subparsers(
        dest="workflows_command", required=True, metavar="WORKFLOWS_COMMAND"
    )
    p = wf.add_parser(
        "check", help="trust check, zizmor and actionlint (or the trust check on PATHS)"
    )
    p.add_argument("--root", default=".", help="repository root holding .github/ (default: .)")
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

    _add_evidence(sub)

    pins = sub.add_parser("pins", help="look at and move pins").add_subparsers(
        dest="pins_command", required=True, metavar="PINS_COMMAND"
    )
    p = pins.add_parser("table", help="side-by-side markdown table of both images' pins")
    _common(p)
    p.set_defaults(func=cmd_pins_table)

    p = pins.add_parser("bump", help="move one pin on every platform that carries it")
    _common(p)
    p.add_argument("name", help="pin name, e.g. torch_memory_saver")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--commit", help="full 40-hex commit (git pins)")
    what.add_argument("--version", help="exact version (pypi, url, apt pins)")
    p.add_argument("--why", required=True, help="the new pin's provenance (PR, release, merge)")
    p.add_argument("--platform", choices=PLATFORMS, help="move only this platform")
    p.add_argument(
        "--diverge",
        action="store_true",
        help="allow --platform to split a symmetric pin (needs --reason)",
    )
    p.add_argument("--reason", help="why the platforms differ (written as divergence)")
    p.add_argument(
        "--upstream",
        metavar="PATH_OR_URL",
        help="local clone or mirror (path or file://) to check the commit against",
    )
    p.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    p.set_defaults(func=cmd_pins_bump)

    p = pins.add_parser("diff", help="pins that changed between two git revisions")
    _common(p)
    p.add_argument("rev_a", metavar="REV_A")
    p.add_argument("rev_b", metavar="REV_B")
    p.add_argument("--format", choices=("text", "markdown"), default="text")
    p.set_defaults(func=cmd_pins_diff)

    p = sub.add_parser("plan", help="which images a change affects, and why")
    _common(p)
    p.add_argument(
        "--base",
        metavar="REV",
        help="compare with REV (default: merge-base with origin/main, else HEAD~1)",
    )
    p.add_argument(
        "--github-output",
        action="store_true",
        help="append cuda=, rocm=, any= and reasons to $GITHUB_OUTPUT",
    )
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("bake", help="write a docker buildx bake file for the production images")
    _common(p)
    p.add_argument("--out", default="docker-bake.json", help="bake file (default: %(default)s)")
    p.add_argument(
        "--repository",
        default="ghcr.io/OWNER/twinbuild",
        help="image repository for tags and the registry cache (default: %(default)s)",
    )
    p.add_argument(
        "--source",
        help="org.opencontainers.image.source (default: from a ghcr.io "
        "repository, https://github.com/OWNER/NAME)",
    )
    p.set_defaults(func=cmd_bake)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Handler = args.func
    try:
        return func(args)
    except TwinbuildError as exc:
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(
                f"twinbuild: {line}" if not line.startswith("twinbuild") else line, file=sys.stderr
            )
        return exc.exit_code
    except KeyboardInterrupt:
        print("twinbuild: interrupted", file=sys.stderr)
        return 130
