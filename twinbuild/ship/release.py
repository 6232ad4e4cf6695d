"""`twinbuild release`: put a release tag on a digest, only with its signed GPU evidence beside it.

Release tags live in ``<registry>/twinbuild/<variant>``, a namespace CI never writes: `push`
(and so every CI build job) writes ``<registry>/twinbuild-ci/<variant>``. A release copies the
tested digest across, and the order is what makes it safe to interrupt or to lose the registry
in the middle of:

1. ``--image`` must be a ``<variant>`` repository of twinbuild (the repository a digest sits in
   decides nothing: the variant of the evidence must be the repository's), and the digest must
   exist in the registry (else exit 2). A variant of several architectures releases its image
   index: every architecture the index names is one image with evidence of its own;
2. the evidence must verify against the trusted keys and pass the gate's checks for exactly that
   digest, each architecture's for its own entry (source, branch, age, a GPU of the variant's
   vendor, GPU tests passed); an index with an architecture whose evidence is missing or
   refused is not released (exit 7); and each must be about what the release checkout holds
   (``ship.merged``: the inputs hash and manifest digest this code computes at HEAD, the
   validated commit in HEAD's history), else exit 9: sound evidence of a PR nobody merged ships
   nothing;
3. the tag must not point at another digest, unless ``--force``;
4. the digest is copied into the release repository (blobs mounted, the manifest's exact bytes
   PUT by digest: it names the same digest; an index with each of its entries), and each DSSE
   envelope stored next to the image it is about (``sha256-<hex>.att``, see ``ship.oci``);
5. only then is the tag written, as the image manifest's exact bytes, and read back.

A failure or a signal before step 5 leaves the tag where it was; step 5 is one request, so no tag
ever names a digest whose evidence is not stored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinbuild.engine.registry_names import CI_NAMESPACE, RELEASE_NAMESPACE
from twinbuild.errors import ConfigError, EngineError, EvidenceRefused
from twinbuild.evidence.evidence_check import Accepted, GateRefused, Policy, check_one
from twinbuild.evidence.head import evidence_blobs
from twinbuild.evidence.keys import keys_folder, load_trusted
from twinbuild.evidence.signing import Blob, Verified, verify
from twinbuild.manifest.model import NAME_RE, Arch, ImageKey, Profile
from twinbuild.ship.merged import Checkout, check_merged, checkout_at
from twinbuild.ship.oci import Client, ImageRef, OciManifest, check_tag
from twinbuild.ship.oci_index import children, image_arch
from twinbuild.util import environ, strictjson, values
from twinbuild.util.activity import Say


@dataclass(frozen=True, slots=True, kw_only=True)
class Trust:
    """What evidence must match besides the digest: whose runs count, how old, which profile."""

    keys: Mapping[str, Ed25519PublicKey]
    repository: str  # owner/name whose validate/ runs count
    repository_id: int
    default_branch: str = "main"
    profile: Profile = "production"
    max_age: timedelta = timedelta(days=14)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseOptions:
    image: ImageRef
    tag: str
    evidence: tuple[Path | Blob, ...]  # one envelope per architecture the image names
    trust: Trust
    checkout: Checkout  # the default branch's checkout: what the evidence must be about
    now: datetime
    variant: str | None = None  # None: the repository's; given, it must be that
    force: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseRequest:
    """What `twinbuild release` was asked for, as given; `release_image` checks and resolves it."""

    image: str  # REPO@sha256:... (an image, or a variant's index)
    tag: str
    variant: str | None = None  # None: the one whose repository --image is in
    evidence: tuple[Path, ...] = ()  # the envelope files (one per architecture), or
    evidence_ref: str | None = None  # a git ref carrying evidence/<variant>-<arch>.dsse.json
    keys: Path = Path("evidence/keys")
    repo: Path = Path()  # the checkout of the default branch whose HEAD the PR was merged into
    repository: str | None = None  # None: $GITHUB_REPOSITORY
    repository_id: str | None = None  # None: $GITHUB_REPOSITORY_ID
    default_branch: str = "main"
    profile: Profile = "production"
    max_age_days: float = 14.0
    force: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Released:
    image: ImageRef  # the digest in the release repository (an index for several archs)
    source: ImageRef  # the digest as --image named it (the CI namespace)
    tag: str
    attachments: dict[Arch, str]  # each architecture's evidence artifact digest
    moved_from: str | None  # the digest the tag named before, when --force moved it
    accepted: tuple[Accepted, ...]  # each architecture's evidence

    def describe(self) -> str:
        moved = f" (moved from {self.moved_from})" if self.moved_from else ""
        copied = f", copied from {self.source.name}" if self.source != self.image else ""
        lines = [f"released {self.image.tagged(self.tag)} = {self.image}{moved}{copied}"]
        for accepted in self.accepted:
            arch = accepted.image.arch
            lines.append(f"  evidence ({self.attachments[arch]}): {accepted.summary()}")
        return "\n".join(lines)


def variant_of(image: ImageRef) -> str:
    """The variant whose repository ``image`` is in: ``[NS/]twinbuild-ci/<variant>`` (what
    `push` writes) or ``[NS/]twinbuild/<variant>`` (releases)."""
    namespace, _, tail = image.repository.rpartition("/")
    group = namespace.rpartition("/")[2]
    if NAME_RE.fullmatch(tail) and tail != "base" and group in (CI_NAMESPACE, RELEASE_NAMESPACE):
        return tail
    raise ConfigError(
        f"--image {image}: not a twinbuild image repository; expected "
        f"[NAMESPACE/]{CI_NAMESPACE}/<variant>@sha256:... as `twinbuild push` prints it"
    )


def release_target(image: ImageRef, variant: str) -> ImageRef:
    """Where a release of ``image`` goes: ``[NS/]twinbuild/<variant>``, for a ``variant`` image
    only. cu13 evidence never tags a digest someone pushed into the rocm720-mi35x repository."""
    found = variant_of(image)
    if found != variant:
        raise EvidenceRefused(
            f"--image {image}: is in the {found} repository, and {variant} evidence releases "
            f"only into {RELEASE_NAMESPACE}/{variant}; pass the {found} evidence and "
            f"--variant {found}, or the {variant} image"
        )
    namespace = image.repository.rpartition("/")[0].rpartition("/")[0]
    repository = f"{RELEASE_NAMESPACE}/{variant}"
    return image.moved(f"{namespace}/{repository}" if namespace else repository)


def check_evidence(
    verified: Verified, *, image_key: ImageKey, image: ImageRef, trust: Trust, now: datetime
) -> Accepted:
    """The gate's checks for one image's evidence bound to ``image``; one-line refusal."""
    predicate = verified.statement.predicate
    if predicate.image != image_key:
        raise EvidenceRefused(
            f"{verified.path}: variant: the evidence is for {predicate.image}, not {image_key}; "
            f"pass the evidence of {image_key}"
        )
    policy = Policy(
        base_repository=trust.repository,
        base_repository_id=trust.repository_id,
        head_commit=predicate.source.commit,  # the digest binds the release, not a PR head
        default_branch=trust.default_branch,
        required=(image_key,),
        images={image_key: str(image)},
        profile=trust.profile,
        max_age=trust.max_age,
    )
    try:
        return check_one(verified, policy=policy, now=now)
    except GateRefused as refused:
        more = f" (and {len(refused.refusals) - 1} more)" if len(refused.refusals) > 1 else ""
        raise EvidenceRefused(refused.refusals[0] + more) from None


def load_evidence(
    source: Path | Blob,
    *,
    image_key: ImageKey,
    image: ImageRef,
    trust: Trust,
    checkout: Checkout,
    now: datetime,
) -> tuple[bytes, Accepted]:
    """The envelope's bytes and what it proves, or EvidenceRefused (TrustRootRefused when it is
    not about what ``checkout`` holds) with one line."""
    # Read once, with the bounded reader `verify` uses (a FIFO or a huge file is refused, not
    # read): the bytes verified are the bytes stored.
    if not isinstance(source, Blob):
        source = Blob(name=str(source), data=strictjson.read_bytes(source))
    if not trust.keys:
        raise EvidenceRefused(
            f"no trusted evidence key in {keys_folder(trust.keys)}: commit the public key to "
            "evidence/keys/ on the default branch (`twinbuild evidence keygen`) and pass that "
            "folder with --keys"
        )
    verified = verify(source, trusted=trust.keys)  # a bad signature: EvidenceRefused, one line
    accepted = check_evidence(verified, image_key=image_key, image=image, trust=trust, now=now)
    check_merged(verified.statement, checkout, source=verified.path)
    return source.data, accepted


def _by_digest(sources: tuple[Path | Blob, ...], trust: Trust) -> dict[str, Path | Blob]:
    """The envelopes given, each under the image digest its statement names."""
    found: dict[str, Path | Blob] = {}
    for source in sources:
        blob = (
            source
            if isinstance(source, Blob)
            else Blob(name=str(source), data=strictjson.read_bytes(source))
        )
        if not trust.keys:
            raise EvidenceRefused(
                "no trusted evidence key: commit the public key to evidence/keys/ on the default "
                "branch (`twinbuild evidence keygen`) and pass that folder with --keys"
            )
        digest = "sha256:" + verify(blob, trusted=trust.keys).statement.image_subject().sha256
        found.setdefault(digest, blob)
    return found


def release(options: ReleaseOptions, client: Client | None = None, say: Say = print) -> Released:
    """Tag ``options.image`` as ``options.tag`` in its release repository, after copying it there
    and storing each architecture's verified evidence beside its image."""
    image, tag = options.image, check_tag(options.tag)
    variant = options.variant or variant_of(image)
    target = release_target(image, variant)
    client = client or Client(image.registry)
    subject = client.manifest(image.repository, image.digest)
    if subject is None:
        raise ConfigError(
            f"--image {image}: the registry {image.registry} has no such digest in "
            f"{image.repository}; release a digest that `twinbuild push` printed"
        )
    entries = children(client, image, subject)
    if entries:
        parts = [(e.arch, e.image) for e in entries]
    else:
        parts = [(image_arch(client, image, subject), image)]
    given = _by_digest(options.evidence, options.trust)
    proven: list[tuple[Arch, ImageRef, bytes, Accepted]] = []
    for arch, part in parts:
        source = given.get(part.digest)
        if source is None:
            whole = f"the index names {arch} {part.digest}" if entries else f"{image} is {arch}"
            raise EvidenceRefused(
                f"--image {image}: {whole}, and no evidence given is for that digest; an image "
                "is released only with the evidence of every architecture it names: pass each "
                f"architecture's envelope (evidence/{variant}-<arch>.dsse.json)"
            )
        key = ImageKey(variant=variant, arch=arch)
        envelope, accepted = load_evidence(
            source, image_key=key, image=part, trust=options.trust, checkout=options.checkout,
            now=options.now,
        )  # fmt: skip
        proven.append((arch, part, envelope, accepted))
    before = client.manifest(target.repository, tag)
    moved_from = None
    if before is not None and before.digest != image.digest:
        if not options.force:
            raise EvidenceRefused(
                f"{target.tagged(tag)} already points at {before.digest}, not {image.digest}; "
                "a release tag is not moved silently: pass --force to move it"
            )
        moved_from = before.digest
    if target.repository != image.repository:
        moved = client.copy(image, target.repository, subject)
        say(f"copied {image} to {target.name} ({moved} blobs mounted or copied)")
    attachments: dict[Arch, str] = {}
    for arch, part, envelope, accepted in proven:
        stored_at = part.moved(target.repository)
        part_manifest = (
            subject
            if part.digest == image.digest
            else client.manifest(target.repository, part.digest)
        )
        if part_manifest is None:
            raise EngineError(f"{stored_at}: missing after the copy; refusing to tag")
        attachments[arch] = client.attach(
            stored_at,
            part_manifest,
            envelope,
            {
                "org.twinbuild.variant": variant,
                "org.twinbuild.arch": arch,
                "org.twinbuild.evidence.keyid": accepted.keyids[0],
                "org.opencontainers.image.created": options.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        )
        say(f"evidence stored: {stored_at.tagged(stored_at.attachment_tag)} ({attachments[arch]})")
    _move_tag(client, target, tag, subject)
    return Released(
        image=target, source=image, tag=tag, attachments=attachments, moved_from=moved_from,
        accepted=tuple(a for *_, a in proven),
    )  # fmt: skip


def _move_tag(client: Client, image: ImageRef, tag: str, subject: OciManifest) -> None:
    client.put_manifest(image.repository, tag, subject)
    after = client.manifest(image.repository, tag)
    if after is None or after.digest != image.digest:
        found = after.digest if after else "nothing"
        raise EngineError(f"{image.tagged(tag)} names {found} after the release, not {image}")


def fetch_evidence(image: ImageRef, client: Client | None = None) -> list[Blob]:
    """The envelopes stored next to ``image`` (`evidence verify --image`); refused when none."""
    client = client or Client(image.registry)
    if client.manifest(image.repository, image.digest) is None:
        raise ConfigError(
            f"--image {image}: the registry {image.registry} has no such digest; check the "
            "reference `twinbuild push` printed"
        )
    blobs = client.attachments(image)
    if not blobs:
        raise EvidenceRefused(
            f"{image}: no evidence is stored next to it ({image.tagged(image.attachment_tag)} "
            "is missing); only `twinbuild release` stores it, with verified evidence"
        )
    name = image.tagged(image.attachment_tag)
    return [Blob(name=f"{name}[{i}]", data=data) for i, data in enumerate(blobs)]


def verify_attached(
    image: ImageRef, *, keys: Mapping[str, Ed25519PublicKey], client: Client | None = None
) -> list[Verified]:
    """Fetch the evidence stored next to ``image`` (next to each of its architectures' images,
    for an index) and check it names exactly that digest.

    Every envelope must verify with a trusted key, be for the variant of ``image``'s repository
    and the architecture of the image it sits beside, name that image's digest as its subject and
    carry a passed verdict (the verdict is computed at record time: GPU tests passed, none
    failed). An index with an architecture that has no evidence is refused.
    """
    if not keys:
        raise EvidenceRefused("no trusted evidence key; pass the folder of *.pub keys with --keys")
    variant = variant_of(image)
    client = client or Client(image.registry)
    subject = client.manifest(image.repository, image.digest)
    if subject is None:
        raise ConfigError(
            f"--image {image}: the registry {image.registry} has no such digest; check the "
            "reference `twinbuild push` printed"
        )
    entries = children(client, image, subject)
    parts = [(e.arch, e.image) for e in entries] or [(image_arch(client, image, subject), image)]
    found: list[Verified] = []
    for arch, part in parts:
        wanted = ImageKey(variant=variant, arch=arch)
        for blob in fetch_evidence(part, client):
            checked = verify(blob, trusted=keys)
            st = checked.statement
            if st.predicate.image != wanted:
                raise EvidenceRefused(
                    f"{blob.name}: variant: the evidence is for {st.predicate.image}, and "
                    f"{part.name}@{part.digest[:19]} is {wanted}; evidence counts only for its "
                    "own image"
                )
            if "sha256:" + st.image_subject().sha256 != part.digest:
                raise EvidenceRefused(
                    f"{blob.name}: image: the evidence is for sha256:{st.image_subject().sha256}, "
                    f"not {part.digest}; evidence counts only for the image it tested"
                )
            if st.predicate.results.verdict != "passed":
                raise EvidenceRefused(f"{blob.name}: results: the recorded verdict is failed")
            found.append(checked)
    return found


def release_image(
    request: ReleaseRequest, env: Mapping[str, str] | None = None, say: Say = print
) -> Released:
    """`twinbuild release`: read the evidence and trusted keys, then `release`."""
    env = os.environ if env is None else env
    repository = request.repository or environ.text("GITHUB_REPOSITORY", env)
    if not repository:
        raise ConfigError(
            "release: the repository whose runs count is unknown; pass --repository OWNER/NAME "
            "(GitHub Actions sets GITHUB_REPOSITORY)"
        )
    repository_id = (
        values.whole(request.repository_id, name="--repository-id", low=1, high=values.MAX_ID)
        if request.repository_id
        else environ.whole("GITHUB_REPOSITORY_ID", low=1, high=values.MAX_ID, env=env)
    )
    if repository_id is None:
        raise ConfigError(
            "release: the repository id whose runs count is unknown; pass --repository-id "
            "(GitHub Actions sets GITHUB_REPOSITORY_ID)"
        )
    image = ImageRef.parse(request.image)
    options = ReleaseOptions(
        variant=request.variant,
        image=image,
        tag=request.tag,
        evidence=_evidence(request, request.variant or variant_of(image)),
        trust=Trust(
            keys=load_trusted(request.keys),
            repository=repository,
            repository_id=repository_id,
            default_branch=request.default_branch,
            profile=request.profile,
            max_age=timedelta(days=request.max_age_days),
        ),
        checkout=checkout_at(request.repo),
        now=datetime.now(UTC),
        force=request.force,
    )
    return release(options, say=say)


def _evidence(request: ReleaseRequest, variant: str) -> tuple[Path | Blob, ...]:
    if request.evidence:
        return request.evidence
    if request.evidence_ref is None:
        raise ConfigError(
            "release: pass --evidence FILE (one per architecture) or --evidence-ref REF"
        )
    found = evidence_blobs(request.evidence_ref, repo=request.repo)
    mine = [b for b in found if b.name.rpartition("/")[2].startswith(f"{variant}-")]
    if not mine:
        raise ConfigError(
            f"{request.evidence_ref}: no evidence/{variant}-<arch>.dsse.json there; fetch that "
            "ref first, or pass --evidence FILE"
        )
    return tuple(mine)
