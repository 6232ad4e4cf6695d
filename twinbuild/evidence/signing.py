"""`evidence sign` and `evidence verify` on files: a statement in, a DSSE envelope out, and back.

The signer trusts nothing the statement says about what it is for: it signs only a statement whose
commit, ref, PR, inputs hash and manifest digest are those its own (default-branch) code computed
for the commit being validated (:class:`~twinbuild.evidence.statement.Validated`), and only the
run it is part of; it writes envelopes only into a plain folder (no link leads out of it).
``sign_all`` signs one statement per image, each from a file named for its image, and only
once all of them passed: the GPU jobs run an image the PR built, so one image's runner must not
be able to stand in for the other's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinbuild.errors import EvidenceRefused
from twinbuild.evidence import dsse
from twinbuild.evidence.statement import Statement, Validated
from twinbuild.util import strictjson
from twinbuild.util.atomic import plain_folder, write_atomic


@dataclass(frozen=True, slots=True, kw_only=True)
class Blob:
    """Evidence not read from a file, e.g. ``git show REF:evidence/cuda.dsse.json``.

    ``name`` is what messages call it.
    """

    name: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Signed:
    path: Path
    keyid: str
    statement: Statement


@dataclass(frozen=True, slots=True, kw_only=True)
class Verified:
    path: str  # the file, or the Blob's name
    keyids: tuple[str, ...]
    statement: Statement


def sign(
    statement_path: Path,
    out: Path,
    *,
    key: Ed25519PrivateKey,
    validated: Validated,
    env: Mapping[str, str] | None = None,
) -> Signed:
    """Check the statement's structure and what it is about, sign its canonical bytes, write the
    envelope atomically into ``out``'s folder.

    Signing a malformed statement would only produce evidence the gate refuses later, so it is
    refused here with the same message. A statement about another commit, PR or inputs than
    ``validated`` is refused (exit 7). Inside GitHub Actions pass ``env`` (os.environ): the
    statement was written by the smoke job, so its run must be this very run.
    """
    return _write(_checked(statement_path, validated, env), out, key=key)


def sign_all(
    paths: Sequence[Path],
    out: Path,
    *,
    key: Ed25519PrivateKey,
    validated: Validated,
    env: Mapping[str, str] | None = None,
) -> list[Signed]:
    """Sign each ``<variant>-<arch>.statement.json`` of ``paths`` into
    ``out/<variant>-<arch>.dsse.json``, once every one passed :func:`sign`'s checks, names its own
    image and is its only one."""
    found: dict[str, tuple[Path, Statement]] = {}
    for path in paths:
        statement = _checked(path, validated, env)
        image = statement.predicate.image
        if path.name != f"{image.name}.statement.json":
            named = path.name.removesuffix(".statement.json")
            raise EvidenceRefused(
                f"{path}: predicate.image: {image}, but the file is named for {named}; "
                "sign only what each image's GPU job recorded: re-run the validation"
            )
        if image.name in found:
            raise EvidenceRefused(
                f"{path}: a second {image} statement (the first is {found[image.name][0]}); "
                "each image's GPU job records one, so sign none of them: re-run the validation"
            )
        found[image.name] = (path, statement)
    return [_write(st, out / f"{p}.dsse.json", key=key) for p, (_, st) in found.items()]


def _checked(path: Path, validated: Validated, env: Mapping[str, str] | None) -> Statement:
    source = str(path)
    statement = Statement.from_dict(strictjson.load(path), source=source)
    _about(statement, validated, source)
    if env is not None:
        _same_run(statement, env, source)
    return statement


def _write(statement: Statement, out: Path, *, key: Ed25519PrivateKey) -> Signed:
    payload = strictjson.canonical(statement.to_dict())
    envelope = dsse.sign(payload, key)
    folder = plain_folder(out.parent)
    write_atomic(out, strictjson.dumps(envelope.to_dict()).encode("utf-8"), within=folder)
    return Signed(path=out, keyid=envelope.signatures[0].keyid, statement=statement)


def verify(evidence: Path | Blob, *, trusted: Mapping[str, Ed25519PublicKey]) -> Verified:
    """Every signature verifies with a trusted key, then the payload parses as our statement."""
    if isinstance(evidence, Blob):
        source, data = evidence.name, evidence.data
    else:
        source, data = str(evidence), strictjson.read_bytes(evidence)
    envelope = dsse.Envelope.from_dict(strictjson.loads(data, source=source), source=source)
    keyids = dsse.verify(envelope, trusted, source=source)
    payload = strictjson.loads(envelope.payload, source=f"{source}: payload")
    statement = Statement.from_dict(payload, source=source)
    return Verified(path=source, keyids=keyids, statement=statement)


def _about(statement: Statement, validated: Validated, source: str) -> None:
    """The statement is about the commit being validated, as this code computed it."""
    p = statement.predicate
    pairs: list[tuple[str, object, object, str]] = [
        ("source.commit", p.source.commit, validated.commit, "the commit this run validated"),
        ("source.ref", p.source.ref, validated.ref, "the branch it validated"),
        ("source.pr", p.source.pr, validated.pr, "the PR of that branch"),
        ("source.head_repository_id", p.source.head_repository_id, p.source.repository_id,
         "this repository's id (a validation branch is in this repository)"),
        ("build.inputs_hash", p.build.inputs_hash, validated.inputs.get(p.image),
         f"the {p.image} inputs hash of {validated.commit[:12]}, computed here from its git "
         "objects"),
        ("vendor", p.vendor, validated.vendors.get(p.variant),
         f"the vendor commit {validated.commit[:12]} gives {p.variant}"),
        ("build.manifest_digest", p.build.manifest_digest, validated.manifest_digest,
         f"the manifest digest of {validated.commit[:12]}, computed here from its git objects"),
        ("build.lock_digest", p.build.lock_digest, validated.locks.get(p.image),
         f"the digest of {p.image.name}'s lock at {validated.commit[:12]}, computed here from "
         "its git objects"),
    ]  # fmt: skip
    for key, recorded, wanted, what in pairs:
        if recorded != wanted:
            raise EvidenceRefused(
                f"{source}: predicate.{key}: {recorded!r} is not {what} ({wanted!r}); sign only "
                f"what the validation of {validated.commit[:12]} recorded"
            )


def _same_run(statement: Statement, env: Mapping[str, str], source: str) -> None:
    p = statement.predicate
    pairs = [
        ("GITHUB_REPOSITORY_ID", "source.repository_id", str(p.source.repository_id)),
        ("GITHUB_EVENT_NAME", "run.event", p.run.event),
        ("GITHUB_WORKFLOW_REF", "run.workflow_ref", p.run.workflow_ref),
        ("GITHUB_RUN_ID", "run.run_id", str(p.run.run_id)),
        ("GITHUB_RUN_ATTEMPT", "run.run_attempt", str(p.run.run_attempt)),
    ]
    for name, key, recorded in pairs:
        if env.get(name) != recorded:
            raise EvidenceRefused(
                f"{source}: predicate.{key}: {recorded!r} is not this run's ${name} "
                f"({env.get(name)!r}); sign only the statement this run recorded"
            )
