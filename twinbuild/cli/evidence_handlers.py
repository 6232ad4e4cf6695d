"""``twinbuild evidence ...``: what record, sign, verify, gate and keygen do with their options.

The gate reads everything about the PR head as git data (``git show``/``git archive`` of objects
fetched by the workflow); it never checks out or runs PR code.
"""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from twinbuild import evidence
from twinbuild.build.image import builder_settings
from twinbuild.build.inputs import inputs_hash
from twinbuild.ci import github
from twinbuild.errors import ConfigError
from twinbuild.evidence import Blob, Policy
from twinbuild.evidence.options import (
    GateOptions,
    KeygenOptions,
    RecordOptions,
    SignOptions,
    VerifyOptions,
)
from twinbuild.manifest.model import PLATFORMS, Platform, loads
from twinbuild.manifest.render import render
from twinbuild.util.git import run_git

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


def _git(*argv: str) -> bytes | None:
    """git's raw output in the current directory (the gate's checkout), None when git fails."""
    proc = run_git(Path(), *argv, binary=True)
    return proc.stdout if proc.returncode == 0 else None


def head_inputs(head: str, manifest_path: Path) -> tuple[dict[Platform, str], str]:
    """Production inputs hash per platform and the manifest digest at ``head``, from git objects."""
    text = _git("show", f"{head}:{manifest_path.as_posix()}")
    if text is None:
        raise ConfigError(f"{head}: no {manifest_path} at that commit; fetch the PR head first")
    manifest = loads(text.decode("utf-8"), manifest_path)
    archive = _git("archive", "--format=tar", head, "images")
    if archive is None:
        raise ConfigError(f"{head}: cannot read images/ at that commit")
    hashes: dict[Platform, str] = {}
    with tempfile.TemporaryDirectory(prefix="twinbuild-head-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")  # data only: nothing of it is executed
        for platform in PLATFORMS:
            rendered = render(manifest, platform, "production")
            hashes[platform] = inputs_hash(
                Path(tmp), rendered, base_id=manifest.platforms[platform].base.digest,
                builder=builder_settings(rendered),
            )  # fmt: skip
    return hashes, manifest.digest()


def gate(options: GateOptions) -> int:
    event = github.event()
    pull = _table(event, "pull_request")
    repository = _table(event, "repository")
    repo_id = os.environ.get("GITHUB_REPOSITORY_ID") or str(repository.get("id", ""))
    if not repo_id.isdigit():
        raise ConfigError("evidence gate: GITHUB_REPOSITORY_ID is unset; run it in GitHub Actions")
    blobs: list[Path | Blob] = list(options.evidence)
    if options.evidence_ref:
        for platform in PLATFORMS:
            name = f"evidence/{platform}.dsse.json"
            data = _git("show", f"{options.evidence_ref}:{name}")
            if data is not None:
                blobs.append(Blob(name=f"{options.evidence_ref}:{name}", data=data))
    inputs, digest = head_inputs(options.head, options.manifest)
    policy = Policy(
        base_repository=os.environ.get("GITHUB_REPOSITORY", ""),
        base_repository_id=int(repo_id),
        head_commit=options.head,
        pr=number if isinstance(number := pull.get("number"), int) else options.pr,
        default_branch=str(repository.get("default_branch") or options.default_branch),
        head_inputs=None if options.same_commit else inputs,
        manifest_digest=digest,
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
