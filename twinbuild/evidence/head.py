"""What the evidence gate computes at a commit, from git objects only.

The PR head is never checked out or run: its tree is listed with ``git ls-tree`` and its files are
read with ``git cat-file --batch`` (:class:`~twinbuild.util.repo_tree.CommitTree`), then hashed by
the same :func:`~twinbuild.builder.inputs.inputs_hash` that ``twinbuild build`` uses for its
up-to-date check. ``twinbuild evidence inputs --head SHA`` prints the result, so a maintainer can
see why evidence does or does not count.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from twinbuild.builder.inputs import builder_settings, inputs_hash
from twinbuild.errors import ConfigError
from twinbuild.evidence.command_options import InputsOptions
from twinbuild.evidence.signing import Blob
from twinbuild.evidence.statement import COMMIT_RE, Validated
from twinbuild.inputs_rule import LOCKS
from twinbuild.manifest.loader import MAX_BYTES, load_bytes
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest, Vendor
from twinbuild.manifest.rendered import render
from twinbuild.util import strictjson
from twinbuild.util.git import rev_arg, run_git
from twinbuild.util.repo_tree import KIND_NAMES, CommitTree

#: Envelopes the gate reads from one evidence ref: one per image, with room to spare.
MAX_EVIDENCE_FILES = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitInputs:
    """What the gate reads of one commit: the production inputs hash per image, the variants the
    gate requires (``validate = "pr"``) and each variant's vendor, and the manifest digest.

    ``claims`` is, per image, the digest of all the manifest says about it
    (:meth:`~twinbuild.manifest.model.PinManifest.claims_digest`): what the smoke run checks,
    including what no build arg carries. The gate needs evidence when either moves.
    """

    commit: str
    inputs: dict[ImageKey, str]
    manifest_digest: str
    claims: dict[ImageKey, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()  # variants with validate = "pr" at this commit
    vendors: dict[str, Vendor] = field(default_factory=dict)
    #: sha256 of each image's lock (pins/lock/<image>.toml) at this commit, where it has one.
    locks: dict[ImageKey, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        by: dict[str, dict[str, str]] = {}
        for image, digest in self.inputs.items():
            by.setdefault(image.variant, {})[image.arch] = digest
        return {
            "inputs": by,
            "required": list(self.required),
            "manifest_digest": self.manifest_digest,
        }

    def json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def text(self) -> str:
        lines = [f"inputs at {self.commit} (production profile):"]
        for image, digest in self.inputs.items():
            gated = " (the gate requires it)" if image.variant in self.required else ""
            lines.append(f"  {image.name}: {digest}{gated}")
        lines.append(f"  manifest: {self.manifest_digest}")
        return "\n".join(lines) + "\n"


def commit_inputs(
    commit: str, *, repo: Path = Path(), manifest: Path = DEFAULT_PATH
) -> CommitInputs:
    """Hash the production images' inputs at ``commit`` in ``repo``, reading only git objects."""
    tree = CommitTree(repo, commit)
    rel = manifest.as_posix()
    found = [e for e in tree.entries(rel) if e.path == rel]
    if not found:
        raise ConfigError(f"{commit}: no {rel} at that commit; is it the right commit?")
    if found[0].kind not in ("file", "executable"):
        raise ConfigError(
            f"{commit}:{rel}: {KIND_NAMES[found[0].kind]}; the manifest must be a regular file"
        )
    parsed = load_bytes(tree.read([rel], max_bytes=MAX_BYTES)[rel], Path(f"{commit}:{rel}"))
    hashes: dict[ImageKey, str] = {}
    claims = {image: parsed.claims_digest(image) for image in parsed.images()}
    for image in parsed.images():
        rendered = render(parsed, image, "production")
        hashes[image] = inputs_hash(
            tree, rendered, base_id=parsed.variant(image.variant).base.digest,
            builder=builder_settings(rendered), manifest=rel,
        )  # fmt: skip
    return CommitInputs(
        commit=commit, inputs=hashes, manifest_digest=parsed.digest(), claims=claims,
        required=parsed.required(), vendors=_vendors(parsed), locks=_locks(tree, parsed),
    )  # fmt: skip


def _locks(tree: CommitTree, manifest: PinManifest) -> dict[ImageKey, str]:
    """The digest of each image's lock file at the commit (its git object, as committed)."""
    wanted = {f"{LOCKS}{image.name}.toml": image for image in manifest.images()}
    present = [
        e.path for e in tree.entries(LOCKS.rstrip("/"))
        if e.path in wanted and e.kind in ("file", "executable")
    ]  # fmt: skip
    data = tree.read(present, max_bytes=MAX_BYTES) if present else {}
    return {wanted[p]: "sha256:" + hashlib.sha256(body).hexdigest() for p, body in data.items()}


def _vendors(manifest: PinManifest) -> dict[str, Vendor]:
    return {name: v.vendor for name, v in manifest.variants.items()}


def validated(commit: str, pr: int, *, repo: Path, manifest: Path = DEFAULT_PATH) -> Validated:
    """What ``evidence record`` and ``evidence sign`` hold a validation run to: ``commit`` (the
    trigger check's), its PR, and the inputs this code computes from the commit's git objects."""
    rev_arg(commit, option="--commit")
    if not COMMIT_RE.fullmatch(commit):
        raise ConfigError(f"--commit {commit!r}: not a full 40-hex commit; pass the validated SHA")
    if pr < 1:
        raise ConfigError(f"--pr {pr}: not a pull request number")
    found = commit_inputs(commit, repo=repo, manifest=manifest)
    return Validated(
        commit=commit, pr=pr, inputs=found.inputs, vendors=found.vendors,
        manifest_digest=found.manifest_digest, locks=found.locks,
    )  # fmt: skip


def inputs_report(options: InputsOptions) -> str:
    """What ``evidence inputs`` prints: the text lines, or the JSON the issue fixes."""
    rev_arg(options.head, option="--head")
    found = commit_inputs(options.head, repo=options.repo, manifest=options.manifest)
    return found.json() if options.format == "json" else found.text()


def evidence_blobs(ref: str, *, repo: Path = Path()) -> list[Blob]:
    """``evidence/<variant>-<arch>.dsse.json`` at ``ref`` as git objects (every envelope of that
    folder, at most ``MAX_EVIDENCE_FILES``); [] when ``ref`` is absent."""
    rev_arg(ref, option="--evidence-ref")
    if run_git(repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").returncode != 0:
        return []  # no validate/pr-N branch: the gate judges without evidence
    tree = CommitTree(repo, ref)
    entries = [
        e for e in tree.entries("evidence")
        if e.path.count("/") == 1 and e.path.endswith(".dsse.json")
    ]  # fmt: skip
    if len(entries) > MAX_EVIDENCE_FILES:
        raise ConfigError(
            f"{ref}:evidence/: {len(entries)} envelopes, more than the {MAX_EVIDENCE_FILES} the "
            "gate reads; keep one per image"
        )
    blobs: list[Blob] = []
    for entry in sorted(entries, key=lambda e: e.path):
        name = entry.path
        if entry.kind not in ("file", "executable"):
            raise ConfigError(
                f"{ref}:{name}: {KIND_NAMES[entry.kind]}; evidence is a regular file, "
                "re-run the validation"
            )
        data = tree.read([name], max_bytes=strictjson.MAX_BYTES)[name]
        blobs.append(Blob(name=f"{ref}:{name}", data=data))
    return blobs
