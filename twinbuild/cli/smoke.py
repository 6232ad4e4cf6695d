"""``twinbuild smoke``: check built images against the manifest with pytest-testinfra."""

from __future__ import annotations

import argparse
from pathlib import Path

from twinbuild.cli.common import (
    add_all_archs,
    add_common,
    add_format,
    add_variant,
    manifest_path,
    root,
    whole_number,
)
from twinbuild.errors import FindingsError
from twinbuild.manifest.model import PROFILES
from twinbuild.util import output


def cmd_smoke(args: argparse.Namespace) -> int:
    from twinbuild.smoke.runner import SmokeOptions, smoke_images

    options = SmokeOptions(
        manifest=manifest_path(args), root=root(args), variant=args.variant, arch=args.arch,
        all_archs=args.all_archs, profile=args.profile, image=args.image, host=args.host,
        gpu=args.gpu, python=args.python, rerun_failed_once=args.rerun_failed_once,
        verbose=args.verbose,
        report_dir=Path(args.report_dir) if args.report_dir else root(args) / "build/smoke",
    )  # fmt: skip
    outcomes = smoke_images(options)
    shown = "".join(
        f"smoke {o.summary.image_key.name} ({o.summary.profile}): {o.summary.counts.describe()} "
        f"in {o.seconds:.1f}s -> {o.paths['json']}\n"
        for o in outcomes
    )
    output.report_all(outcomes, args.format, text=shown)
    return 0


def cmd_gpu_proof(args: argparse.Namespace) -> int:
    from twinbuild.smoke.proof import ProofOptions, prove, summary

    options = ProofOptions(
        manifest=manifest_path(args), variant=args.variant, python=args.python,
        sources=Path(args.sources) if args.sources else None, out=Path(args.out),
        work=Path(args.work) if args.work else None, budget_s=args.budget_s,
        dry_run=args.dry_run, rehearse=args.rehearse,
    )  # fmt: skip
    if args.format == "text":
        prove(options, echo=output.data, say=output.say)  # the table is the data
        return 0
    try:
        proof = prove(options, echo=output.say, say=output.say)
    except FindingsError:
        report = options.out / "report.jsonl"
        if report.is_file():  # written before the refusal: the data still goes out
            output.data(report.read_text(encoding="utf-8"))
        raise
    output.report(summary(proof, options), "json")
    return 0


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("gpu-proof", "smoke")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _register_proof(sub)
    p = sub.add_parser(
        "smoke", help="check built images (by id, network none) against the manifest"
    )
    add_common(p)
    add_variant(p, every="the [local] variants' built images (every variant in production)")
    add_all_archs(p)
    p.add_argument(
        "--profile", choices=PROFILES,
        help="the built images of this profile (default: local; an --image says its own)",
    )  # fmt: skip
    p.add_argument("--image", metavar="REF", help="check any image (resolved to its id first)")
    p.add_argument(
        "--host", action="store_true",
        help="check this machine (testinfra local); with --gpu: a bare GPU host, GPU checks only",
    )  # fmt: skip
    p.add_argument(
        "--python", metavar="PATH",
        help="with --host: the interpreter holding torch and torch_memory_saver (default python3)",
    )  # fmt: skip
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gpu", dest="gpu", action="store_true", default=None, help="require a GPU")
    g.add_argument("--no-gpu", dest="gpu", action="store_false", help="skip the GPU checks")
    p.add_argument(
        "--rerun-failed-once", action="store_true",
        help="rerun a failed GPU test once; a pass on the rerun is reported as flaky",
    )  # fmt: skip
    p.add_argument("--report-dir", help="where the reports go (default: <root>/build/smoke)")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="list every skipped check with its reason"
    )
    add_format(p, what="each image's counts and report")
    p.set_defaults(func=cmd_smoke)


def _register_proof(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "gpu-proof",
        help="every GPU check on this bare GPU host, healthy and on the broken case it must "
        "fail on, inside one time budget (scripts/gpu-proof.sh runs it)",
    )
    add_common(p, root=False)
    p.add_argument(
        "--variant",
        default="cu13",
        metavar="NAME",
        help="whose vendor, toolkit, GPU targets and floors (default: cu13)",
    )
    p.add_argument("--python", default="python3", help="the interpreter holding torch")
    p.add_argument(
        "--sources", metavar="DIR",
        help="the carried sources: torch_memory_saver, torch_memory_saver-prefix and nccl-tests, "
        "each a checkout or a git archive .tar (the rehearsal makes stand-ins without it)",
    )  # fmt: skip
    p.add_argument(
        "--out", default="build/gpu-proof", metavar="DIR",
        help="report.jsonl, table.md and logs.tar.gz, written after every check; nothing else",
    )  # fmt: skip
    p.add_argument(
        "--work", metavar="DIR",
        help="builds and logs (default: the cache's gpu-proof folder)",
    )  # fmt: skip
    p.add_argument(
        "--budget",
        dest="budget_s",
        type=whole_number(1, 86_400),
        default=480,
        metavar="SECONDS",
        help="the whole proof's time, spent in priority order (default 480)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--dry-run", action="store_true",
        help="list each check and its broken case; run nothing (no GPU needed)",
    )  # fmt: skip
    g.add_argument(
        "--rehearse", action="store_true",
        help="the whole flow on this CPU host with a fake GPU layer (one H200, modelled seconds)",
    )  # fmt: skip
    add_format(p, what="the table of checks (json: the whole proof)")
    p.set_defaults(func=cmd_gpu_proof)
