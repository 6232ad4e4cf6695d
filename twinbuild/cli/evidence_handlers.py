"""``twinbuild evidence ...``: what record, sign, verify, gate and keygen do with their options.

The gate reads everything about the PR head as git objects fetched by the workflow (see
``twinbuild.evidence.head``); it never checks out or runs PR code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinbuild import evidence
from twinbuild.errors import ConfigError
from twinbuild.evidence import Blob, Policy
from twinbuild.evidence.head import commit_inputs, evidence_blobs, inputs_report
from twinbuild.evidence.options import (
    GateOptions,
    InputsOptions,
    KeygenOptions,
    RecordOptions,
    SignOptions,
    VerifyOptions,
)
from twinbuild.util import github

REPORT = "report.json"


def record(options: RecordOptions) -> int:
    folder = options.report_dir
    found = sorted(folder.glob(f"smoke-{options.platform}-*.json"))
    report = found[0] if len(found) == 1 else folder / REPORT
    statement = evidence.record(report, env=os.environ, now=datetime.now(UTC), pr=options.pr)
    if statement.predicate.platform != options.platform:
        raise ConfigError(
            f"{report}: the report is for {statement.predicate.platform}, not {options.platform}"
        )
    out = options.out / f"{options.platform}.statement.json"
    evidence.save(statement, out)
    print(f"{options.platform}: verdict {statement.predicate.results.verdict} -> {out}")
    return 0


def sign(options: SignOptions) -> int:
    key = evidence.load_private(env=os.environ, path=options.key)
    in_actions = github.in_actions()
    found = sorted(options.statements.rglob("*.statement.json"))
    if not found:
        raise ConfigError(
            f"{options.statements}: no *.statement.json to sign; run `evidence record` first"
        )
    for path in found:
        platform = path.name.removesuffix(".statement.json")
        signed = evidence.sign(
            path, options.out / f"{platform}.dsse.json", key=key,
            env=os.environ if in_actions else None,
        )  # fmt: skip
        print(f"{signed.path}: signed by {signed.keyid[:16]}")
    return 0


def verify(options: VerifyOptions) -> int:
    trusted = evidence.load_trusted(options.keys)
    if options.image is not None:
        return _verify_image(options.image, trusted, options.paths)
    paths: list[Path] = []
    for path in options.paths:
        paths += sorted(path.glob("*.dsse.json")) if path.is_dir() else [path]
    if not paths:
        shown = ", ".join(str(p) for p in options.paths)
        raise ConfigError(f"{shown}: no *.dsse.json evidence found")
    for path in paths:
        checked = evidence.verify(path, trusted=trusted)
        predicate = checked.statement.predicate
        print(
            f"{checked.path}: {predicate.platform} signed by {checked.keyids[0][:16]}, "
            f"verdict {predicate.results.verdict}"
        )
    return 0


def _verify_image(
    image: str, trusted: Mapping[str, Ed25519PublicKey], paths: Sequence[Path]
) -> int:
    from twinbuild.ship.oci import ImageRef
    from twinbuild.ship.release import verify_attached

    if paths:
        raise ConfigError("evidence verify: pass evidence files or --image, not both")
    ref = ImageRef.parse(image)
    for checked in verify_attached(ref, keys=trusted):
        p = checked.statement.predicate
        print(
            f"{ref}: {p.platform} evidence signed by {checked.keyids[0][:16]}, verdict "
            f"{p.results.verdict}, {p.results.counts.passed} passed on "
            f"{p.gpu.model if p.gpu else 'no GPU'}, commit {p.source.commit[:12]} ({p.source.ref})"
        )
    return 0


def inputs(options: InputsOptions) -> int:
    sys.stdout.write(inputs_report(options))
    return 0


def gate(options: GateOptions) -> int:
    event = github.event()
    pull = _table(event, "pull_request")
    repository = _table(event, "repository")
    repo_id = os.environ.get("GITHUB_REPOSITORY_ID") or str(repository.get("id", ""))
    if not repo_id.isdigit() or len(repo_id) > 19:
        raise ConfigError("evidence gate: GITHUB_REPOSITORY_ID is unset; run it in GitHub Actions")
    blobs: list[Path | Blob] = list(options.evidence)
    if options.evidence_ref:
        blobs += evidence_blobs(options.evidence_ref, repo=options.repo)
    head = commit_inputs(options.head, repo=options.repo, manifest=options.manifest)
    base = (
        commit_inputs(options.base, repo=options.repo, manifest=options.manifest)
        if options.base
        else None
    )
    policy = Policy(
        base_repository=os.environ.get("GITHUB_REPOSITORY", ""),
        base_repository_id=int(repo_id),
        head_commit=options.head,
        pr=number if isinstance(number := pull.get("number"), int) else options.pr,
        default_branch=str(repository.get("default_branch") or options.default_branch),
        head_inputs=head.inputs,
        match_inputs=not options.same_commit,
        base_commit=options.base,
        base_inputs=base.inputs if base is not None else None,
        manifest_digest=head.manifest_digest,
        max_age=timedelta(days=options.max_age_days),
    )
    try:
        result = evidence.gate(
            blobs, policy=policy, trusted=evidence.load_trusted(options.keys),
            now=datetime.now(UTC),
        )  # fmt: skip
    except evidence.GateRefused as refused:
        refusals = [f"- {r}" for r in refused.refusals]
        _summary(options.summary, ["## Evidence gate: refused", *refusals])
        raise
    lines = [*result.lines(), *[f"warning: flaky pass: {t}" for t in result.flaky]]
    for line in lines:
        print(line)
    _summary(options.summary, ["## Evidence gate: accepted", *[f"- {line}" for line in lines]])
    return 0


def _table(event: dict[str, object], key: str) -> dict[str, object]:
    value = event.get(key)
    return value if isinstance(value, dict) else {}


def _summary(path: Path | None, lines: Sequence[str]) -> None:
    github.append_summary(path, "\n".join(lines))


def keygen(options: KeygenOptions) -> int:
    pair = evidence.keygen(options.private, options.public)
    print(
        f"keyid {pair.keyid}; store {pair.private_path} as the secret TWINBUILD_EVIDENCE_KEY, "
        f"commit {pair.public_path} by a reviewed PR, then delete the private file"
    )
    return 0
