"""``twinbuild evidence ...``: what record, sign, verify, gate and keygen do with their options.

The gate reads everything about the PR head as git objects fetched by the workflow (see
``twinbuild.evidence.head``); it never checks out or runs PR code.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinbuild import evidence
from twinbuild.errors import ConfigError, EvidenceRefused, TrustRootRefused
from twinbuild.evidence.command_options import (
    GateOptions,
    InputsOptions,
    KeygenOptions,
    RecordOptions,
    SignOptions,
    TriggerOptions,
    VerifyOptions,
)
from twinbuild.evidence.head import inputs_report, validated
from twinbuild.evidence.run_env import run_env
from twinbuild.manifest.model import ImageKey
from twinbuild.util import environ, github, output
from twinbuild.util.atomic import plain_folder
from twinbuild.util.output import Format

REPORT = "report.json"


def record(options: RecordOptions, fmt: Format = "text") -> int:
    env = run_env(environ.checked(), env_file=options.env_file, repository_id=options.repository_id)
    about = validated(options.commit, options.pr, repo=options.repo, manifest=options.manifest)
    folder = options.report_dir
    image = ImageKey(variant=options.variant, arch=options.arch)
    found = sorted(folder.glob(f"smoke-{image.name}-*.json"))
    report = found[0] if len(found) == 1 else folder / REPORT
    now = datetime.now(UTC)
    statement = evidence.record(report, env=env, now=now, validated=about)
    if statement.predicate.image != image:
        raise ConfigError(f"{report}: the report is for {statement.predicate.image}, not {image}")
    out = plain_folder(options.out) / f"{image.name}.statement.json"
    evidence.save(statement, out)
    verdict = statement.predicate.results.verdict
    done = {
        "variant": image.variant, "arch": image.arch, "verdict": verdict, "statement": str(out)
    }  # fmt: skip
    output.report(done, fmt, text=f"{image}: verdict {verdict} -> {out}")
    return 0


def sign(options: SignOptions, fmt: Format = "text") -> int:
    about = validated(options.commit, options.pr, repo=options.repo, manifest=options.manifest)
    key = evidence.load_private(env=environ.checked(), path=options.key)
    in_actions = github.in_actions()
    found = sorted(options.statements.rglob("*.statement.json"))
    if not found:
        raise ConfigError(
            f"{options.statements}: no *.statement.json to sign; run `evidence record` first"
        )
    signed = evidence.sign_all(
        found, options.out, key=key, validated=about, env=environ.checked() if in_actions else None
    )
    done = [
        {"image": one.path.name.removesuffix(".dsse.json"), "envelope": str(one.path),
         "keyid": one.keyid}
        for one in signed
    ]  # fmt: skip
    lines = "".join(f"{d['envelope']}: signed by {d['keyid'][:16]}\n" for d in done)
    output.report(done, fmt, text=lines)
    return 0


def verify(options: VerifyOptions, fmt: Format = "text") -> int:
    trusted = evidence.load_trusted(options.keys)
    if options.image is not None:
        return _verify_image(options.image, trusted, options.paths, fmt)
    paths: list[Path] = []
    for path in options.paths:
        paths += sorted(path.glob("*.dsse.json")) if path.is_dir() else [path]
    if not paths:
        shown = ", ".join(str(p) for p in options.paths)
        raise ConfigError(f"{shown}: no *.dsse.json evidence found")
    done: list[dict[str, str]] = []
    for path in paths:
        checked = evidence.verify(path, trusted=trusted)
        predicate = checked.statement.predicate
        done.append({
            "envelope": str(checked.path), "variant": predicate.image.variant,
            "arch": predicate.image.arch, "keyid": checked.keyids[0],
            "verdict": predicate.results.verdict,
        })  # fmt: skip
    lines = "".join(
        f"{d['envelope']}: {d['variant']} ({d['arch']}) signed by {d['keyid'][:16]}, verdict "
        f"{d['verdict']}\n"
        for d in done
    )
    output.report(done, fmt, text=lines)
    return 0


def _verify_image(
    image: str, trusted: Mapping[str, Ed25519PublicKey], paths: Sequence[Path], fmt: Format
) -> int:
    from twinbuild.ship.oci import ImageRef
    from twinbuild.ship.release import verify_attached

    if paths:
        raise ConfigError("evidence verify: pass evidence files or --image, not both")
    ref = ImageRef.parse(image)
    done: list[dict[str, object]] = []
    lines = ""
    for checked in verify_attached(ref, keys=trusted):
        p = checked.statement.predicate
        done.append({
            "image": str(ref), "variant": p.image.variant, "arch": p.image.arch,
            "keyid": checked.keyids[0],
            "verdict": p.results.verdict, "passed": p.results.counts.passed,
            "gpu": p.gpu.model if p.gpu else None, "commit": p.source.commit, "ref": p.source.ref,
        })  # fmt: skip
        lines += (
            f"{ref}: {p.image} evidence signed by {checked.keyids[0][:16]}, verdict "
            f"{p.results.verdict}, {p.results.counts.passed} passed on "
            f"{p.gpu.model if p.gpu else 'no GPU'}, commit {p.source.commit[:12]} "
            f"({p.source.ref})\n"
        )
    output.report(done, fmt, text=lines)
    return 0


def inputs(options: InputsOptions) -> int:
    sys.stdout.write(inputs_report(options))
    return 0


def gate(options: GateOptions, fmt: Format = "text") -> int:
    from twinbuild.evidence.merge_gate import judge, refusals_of

    env = run_env(environ.checked(), env_file=options.env_file, repository_id=options.repository_id)
    try:
        verdict = judge(options, env=env, event=github.event(env), now=datetime.now(UTC))
    except (EvidenceRefused, TrustRootRefused) as refused:
        lines = [f"- {r}" for r in refusals_of(refused)]
        _summary(options.summary, ["## Evidence gate: refused", *lines])
        raise
    lines = [*verdict.lines, *[f"warning: flaky pass: {t}" for t in verdict.flaky]]
    done = {"verdict": "accepted", "lines": list(verdict.lines), "flaky": list(verdict.flaky)}
    output.report(done, fmt, text="".join(f"{line}\n" for line in lines))
    _summary(options.summary, ["## Evidence gate: accepted", *[f"- {line}" for line in lines]])
    return 0


def _summary(path: Path | None, lines: Sequence[str]) -> None:
    github.append_summary(path, "\n".join(lines))


def trigger(options: TriggerOptions, fmt: Format = "text") -> int:
    from twinbuild.evidence.trigger import check, read_tips

    tips = read_tips(options.branch_tips) if options.branch_tips is not None else None
    found = check(github.event(), env=environ.checked(), workflow=options.workflow, tips=tips)
    output.report(found, fmt, text=found.line())
    if options.github_output:
        github.write_outputs(found.outputs(), who="evidence trigger")
    return 0


def keygen(options: KeygenOptions, fmt: Format = "text") -> int:
    pair = evidence.keygen(options.private, options.public)
    done = {"keyid": pair.keyid, "private": str(pair.private_path), "public": str(pair.public_path)}
    if pair.finished:
        output.say(
            f"twinbuild: {pair.private_path}: a keygen killed half-way left this pair; finished it"
        )
    output.report(done, fmt, text=(
        f"keyid {pair.keyid}; store {pair.private_path} as the secret TWINBUILD_EVIDENCE_KEY, "
        f"commit {pair.public_path} by a reviewed PR, then delete the private file"
    ))  # fmt: skip
    return 0
