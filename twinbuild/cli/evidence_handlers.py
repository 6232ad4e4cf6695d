"""``twinbuild evidence ...``: argument handling around record, sign, verify, gate and keygen.

The gate reads everything about the PR head as git data (``git show``/``git archive`` of objects
fetched by the workflow); it never checks out or runs PR code.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinbuild import evidence
from twinbuild.build.image import builder_settings
from twinbuild.build.inputs import inputs_hash
from twinbuild.errors import ConfigError
from twinbuild.evidence import Blob, Policy
from twinbuild.manifest.model import PLATFORMS, Platform, loads
from twinbuild.manifest.render import render

REPORT = "report.json"


def cmd_record(args: argparse.Namespace) -> int:
    folder = Path(args.report_dir)
    found = sorted(folder.glob(f"smoke-{args.platform}-*.json"))
    report = found[0] if len(found) == 1 else folder / REPORT
    statement = evidence.record(report, env=os.environ, now=datetime.now(UTC), pr=args.pr)
    if statement.predicate.platform != args.platform:
        raise ConfigError(
            f"{report}: the report is for {statement.predicate.platform}, not {args.platform}"
        )
    out = Path(args.out) / f"{args.platform}.statement.json"
    evidence.save(statement, out)
    print(f"{args.platform}: verdict {statement.predicate.results.verdict} -> {out}")
    return 0


def cmd_sign(args: argparse.Namespace) -> int:
    key = evidence.load_private(env=os.environ, path=Path(args.key) if args.key else None)
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    found = sorted(Path(args.in_).rglob("*.statement.json"))
    if not found:
        raise ConfigError(f"{args.in_}: no *.statement.json to sign; run `evidence record` first")
    for path in found:
        platform = path.name.removesuffix(".statement.json")
        signed = evidence.sign(
            path, Path(args.out) / f"{platform}.dsse.json", key=key,
            env=os.environ if in_actions else None,
        )  # fmt: skip
        print(f"{signed.path}: signed by {signed.keyid[:16]}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    trusted = evidence.load_trusted(Path(args.keys))
    if args.image:
        return _verify_image(args.image, trusted, args.paths)
    paths: list[Path] = []
    for item in args.paths:
        path = Path(item)
        paths += sorted(path.glob("*.dsse.json")) if path.is_dir() else [path]
    if not paths:
        raise ConfigError(f"{', '.join(args.paths)}: no *.dsse.json evidence found")
    for path in paths:
        checked = evidence.verify(path, trusted=trusted)
        predicate = checked.statement.predicate
        print(
            f"{checked.path}: {predicate.platform} signed by {checked.keyids[0][:16]}, "
            f"verdict {predicate.results.verdict}"
        )
    return 0


def _verify_image(image: str, trusted: Mapping[str, Ed25519PublicKey], paths: Sequence[str]) -> int:
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


def _git(*argv: str) -> bytes | None:
    proc = subprocess.run(["git", *argv], capture_output=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


def _event() -> dict[str, object]:
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the GitHub event: {exc}") from None
    return data if isinstance(data, dict) else {}


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


def cmd_gate(args: argparse.Namespace) -> int:
    event = _event()
    pull = _table(event, "pull_request")
    repository = _table(event, "repository")
    repo_id = os.environ.get("GITHUB_REPOSITORY_ID") or str(repository.get("id", ""))
    if not repo_id.isdigit():
        raise ConfigError("evidence gate: GITHUB_REPOSITORY_ID is unset; run it in GitHub Actions")
    blobs: list[Path | Blob] = [Path(p) for p in args.evidence]
    if args.evidence_ref:
        for platform in PLATFORMS:
            name = f"evidence/{platform}.dsse.json"
            data = _git("show", f"{args.evidence_ref}:{name}")
            if data is not None:
                blobs.append(Blob(name=f"{args.evidence_ref}:{name}", data=data))
    inputs, digest = head_inputs(args.head, Path(args.manifest))
    policy = Policy(
        base_repository=os.environ.get("GITHUB_REPOSITORY", ""),
        base_repository_id=int(repo_id),
        head_commit=args.head,
        pr=number if isinstance(number := pull.get("number"), int) else args.pr,
        default_branch=str(repository.get("default_branch") or args.default_branch),
        head_inputs=None if args.same_commit else inputs,
        manifest_digest=digest,
        max_age=timedelta(days=args.max_age_days),
    )
    try:
        result = evidence.gate(
            blobs, policy=policy, trusted=evidence.load_trusted(Path(args.keys)),
            now=datetime.now(UTC),
        )  # fmt: skip
    except evidence.GateRefused as refused:
        _summary(args.summary, ["## Evidence gate: refused", *[f"- {r}" for r in refused.refusals]])
        raise
    lines = [*result.lines(), *[f"warning: flaky pass: {t}" for t in result.flaky]]
    for line in lines:
        print(line)
    _summary(args.summary, ["## Evidence gate: accepted", *[f"- {line}" for line in lines]])
    return 0


def _table(event: dict[str, object], key: str) -> dict[str, object]:
    value = event.get(key)
    return value if isinstance(value, dict) else {}


def _summary(path: str | None, lines: Sequence[str]) -> None:
    if path:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


def cmd_keygen(args: argparse.Namespace) -> int:
    pair = evidence.keygen(Path(args.private), Path(args.public))
    print(
        f"keyid {pair.keyid}; store {pair.private_path} as the secret TWINBUILD_EVIDENCE_KEY, "
        f"commit {pair.public_path} by a reviewed PR, then delete the private file"
    )
    return 0
