"""`twinbuild release`: put a release tag on a digest, only with its signed GPU evidence beside it.

Release tags live in ``<registry>/twinbuild/<platform>``, a namespace CI never writes: `push`
(and so every CI build job) writes ``<registry>/twinbuild-ci/<platform>``. A release copies the
tested digest across, and the order is what makes it safe to interrupt or to lose the registry
in the middle of:

1. ``--image`` must be a ``<platform>`` repository of twinbuild (the repository a CUDA digest sits
   in decides nothing: the platform of the evidence must be the repository's), and the digest must
   exist in the registry (else exit 2);
   ``--image`` must also be one image: an index of several (linux/amd64 and linux/arm64, say)
   holds images the GPU run never started (its engine pulled one), so it is refused (exit 7);
   an index of one image and BuildKit's attestations (``unknown/unknown``) is that image;
2. the evidence must verify against the trusted keys and pass the gate's checks for exactly that
   digest (source, branch, age, a GPU of the platform's vendor, GPU tests passed), else exit 7;
   and it must be about what the release checkout holds (``ship.merged``: the inputs hash and
   manifest digest this code computes at HEAD, the validated commit in HEAD's history), else
   exit 9: sound evidence of a PR nobody merged ships nothing;
3. the tag must not point at another digest, unless ``--force``;
4. the digest is copied into the release repository (blobs mounted, the manifest's exact bytes
   PUT by digest: it names the same digest), and the DSSE envelope stored next to it
   (``sha256-<hex>.att``, see ``ship.oci``);
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

from twinbuild.engine.registry import CI_NAMESPACE, RELEASE_NAMESPACE
from twinbuild.errors import ConfigError, EngineError, EvidenceRefused
from twinbuild.evidence.gate import Accepted, GateRefused, Policy, check_one
from twinbuild.evidence.signing import Blob, Verified, verify
from twinbuild.manifest.model import PLATFORMS, Platform, Profile
from twinbuild.ship.merged import Checkout, check_merged, checkout_at
from twinbuild.ship.oci import MAX_INDEX_ENTRIES, Client, ImageRef, Manifest, check_tag, json_object
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
    platform: Platform
    image: ImageRef
    tag: str
    evidence: Path | Blob
    trust: Trust
    checkout: Checkout  # the default branch's checkout: what the evidence must be about
    now: datetime
    force: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseRequest:
    """What `twinbuild release` was asked for, as given; `release_image` checks and resolves it."""

    platform: Platform
    image: str  # REPO@sha256:...
    tag: str
    evidence: Path | None = None  # the envelope file, or
    evidence_ref: str | None = None  # a git ref carrying evidence/<platform>.dsse.json
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
    image: ImageRef  # the digest in the release repository
    source: ImageRef  # the digest as --image named it (the CI namespace)
    tag: str
    attachment: str  # the evidence artifact's digest
    moved_from: str | None  # the digest the tag named before, when --force moved it
    accepted: Accepted

    def describe(self) -> str:
        moved = f" (moved from {self.moved_from})" if self.moved_from else ""
        copied = f", copied from {self.source.name}" if self.source != self.image else ""
        return (
            f"released {self.image.tagged(self.tag)} = {self.image}{moved}{copied}; evidence "
            f"{self.image.tagged(self.image.attachment_tag)} ({self.attachment}): "
            f"{self.accepted.summary()}"
        )


def platform_of(image: ImageRef) -> Platform:
    """The platform whose repository ``image`` is in: ``[NS/]twinbuild-ci/<platform>`` (what
    `push` writes) or ``[NS/]twinbuild/<platform>`` (releases)."""
    namespace, _, tail = image.repository.rpartition("/")
    group = namespace.rpartition("/")[2]
    for platform in PLATFORMS:
        if tail == platform and group in (CI_NAMESPACE, RELEASE_NAMESPACE):
            return platform
    raise ConfigError(
        f"--image {image}: not a twinbuild image repository; expected "
        f"[NAMESPACE/]{CI_NAMESPACE}/<platform>@sha256:... as `twinbuild push` prints it"
    )


def release_target(image: ImageRef, platform: Platform) -> ImageRef:
    """Where a release of ``image`` goes: ``[NS/]twinbuild/<platform>``, for a ``platform`` image
    only. CUDA evidence never tags a digest someone pushed into the ROCm repository."""
    found = platform_of(image)
    if found != platform:
        raise EvidenceRefused(
            f"--image {image}: is in the {found} repository, and {platform} evidence releases "
            f"only into {RELEASE_NAMESPACE}/{platform}; pass the {found} evidence and "
            f"--platform {found}, or the {platform} image"
        )
    namespace = image.repository.rpartition("/")[0].rpartition("/")[0]
    repository = f"{RELEASE_NAMESPACE}/{platform}"
    return image.moved(f"{namespace}/{repository}" if namespace else repository)


def check_evidence(
    verified: Verified, *, platform: Platform, image: ImageRef, trust: Trust, now: datetime
) -> Accepted:
    """The gate's checks for one platform's evidence bound to ``image``; one-line refusal."""
    predicate = verified.statement.predicate
    if predicate.platform != platform:
        raise EvidenceRefused(
            f"{verified.path}: platform: the evidence is for {predicate.platform}, not {platform}; "
            f"pass the {platform} evidence"
        )
    policy = Policy(
        base_repository=trust.repository,
        base_repository_id=trust.repository_id,
        head_commit=predicate.source.commit,  # the digest binds the release, not a PR head
        default_branch=trust.default_branch,
        images={platform: str(image)},
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
    platform: Platform,
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
        from twinbuild.evidence.keys import keys_folder

        raise EvidenceRefused(
            f"no trusted evidence key in {keys_folder(trust.keys)}: commit the public key to "
            "evidence/keys/ on the default branch (`twinbuild evidence keygen`) and pass that "
            "folder with --keys"
        )
    verified = verify(source, trusted=trust.keys)  # a bad signature: EvidenceRefused, one line
    accepted = check_evidence(verified, platform=platform, image=image, trust=trust, now=now)
    check_merged(verified.statement, checkout, source=verified.path)
    return source.data, accepted


def release(options: ReleaseOptions, client: Client | None = None, say: Say = print) -> Released:
    """Tag ``options.image`` as ``options.tag`` in its release repository, after copying it there
    and storing its verified evidence beside it."""
    image, tag = options.image, check_tag(options.tag)
    target = release_target(image, options.platform)
    client = client or Client(image.registry)
    subject = client.manifest(image.repository, image.digest)
    if subject is None:
        raise ConfigError(
            f"--image {image}: the registry {image.registry} has no such digest in "
            f"{image.repository}; release a digest that `twinbuild push` printed"
        )
    _one_image(image, subject)
    envelope, accepted = load_evidence(
        options.evidence, platform=options.platform, image=image, trust=options.trust,
        checkout=options.checkout, now=options.now,
    )  # fmt: skip
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
    attachment = client.attach(
        target,
        subject,
        envelope,
        {
            "org.twinbuild.platform": options.platform,
            "org.twinbuild.evidence.keyid": accepted.keyids[0],
            "org.opencontainers.image.created": options.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    )
    say(f"evidence stored: {target.tagged(target.attachment_tag)} ({attachment})")
    _move_tag(client, target, tag, subject)
    return Released(
        image=target, source=image, tag=tag, attachment=attachment, moved_from=moved_from,
        accepted=accepted,
    )  # fmt: skip


def _one_image(image: ImageRef, subject: Manifest) -> None:
    """Refuse an index listing more than one image an engine would run (exit 7)."""
    items = json_object(subject.data, f"read {image}").get("manifests")
    if not isinstance(items, list):
        return  # an image manifest (the copy refuses anything else, naming it)
    runnable = []
    for item in items[: MAX_INDEX_ENTRIES + 1]:
        found = item.get("platform") if isinstance(item, dict) else None
        platform = found if isinstance(found, dict) else {}
        parts = [str(platform.get(k, "?"))[:40] for k in ("os", "architecture", "variant")]
        if parts[:2] != ["unknown", "unknown"]:  # an attestation: no engine runs it
            runnable.append("/".join(parts if "variant" in platform else parts[:2]))
    if len(runnable) > 1:
        raise EvidenceRefused(
            f"--image {image}: an index of {len(runnable)} images ({', '.join(runnable)}); a GPU "
            "run tests the one image its engine pulls, so the evidence does not cover the "
            "others: release one image's own digest"
        )


def _move_tag(client: Client, image: ImageRef, tag: str, subject: Manifest) -> None:
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
    """Fetch the evidence stored next to ``image`` and check it names exactly that digest.

    Every envelope must verify with a trusted key, be for the platform of ``image``'s
    repository, name ``image``'s digest as its image subject and carry a passed verdict (the
    verdict is computed at record time: GPU tests passed, none failed).
    """
    if not keys:
        raise EvidenceRefused("no trusted evidence key; pass the folder of *.pub keys with --keys")
    platform = platform_of(image)
    found: list[Verified] = []
    for blob in fetch_evidence(image, client):
        checked = verify(blob, trusted=keys)
        st = checked.statement
        if st.predicate.platform != platform:
            raise EvidenceRefused(
                f"{blob.name}: platform: the evidence is for {st.predicate.platform}, and "
                f"{image.name} is the {platform} repository; evidence counts only for its platform"
            )
        if "sha256:" + st.image_subject().sha256 != image.digest:
            raise EvidenceRefused(
                f"{blob.name}: image: the evidence is for sha256:{st.image_subject().sha256}, "
                f"not {image.digest}; evidence counts only for the image it tested"
            )
        if st.predicate.results.verdict != "passed":
            raise EvidenceRefused(f"{blob.name}: results: the recorded verdict is failed")
        found.append(checked)
    return found


def release_image(
    request: ReleaseRequest, env: Mapping[str, str] | None = None, say: Say = print
) -> Released:
    """`twinbuild release`: read the evidence and trusted keys, then `release`."""
    from twinbuild.evidence.keys import load_trusted

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
    options = ReleaseOptions(
        platform=request.platform,
        image=ImageRef.parse(request.image),
        tag=request.tag,
        evidence=_evidence(request),
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


def _evidence(request: ReleaseRequest) -> Path | Blob:
    if request.evidence is not None:
        return request.evidence
    if request.evidence_ref is None:
        raise ConfigError("release: pass --evidence FILE or --evidence-ref REF")
    from twinbuild.util.git import rev_arg, run_git

    rev_arg(request.evidence_ref, option="--evidence-ref")
    name = f"{request.evidence_ref}:evidence/{request.platform}.dsse.json"
    shown = run_git(request.repo, "show", name, binary=True)
    if shown.returncode != 0:
        detail = shown.stderr.decode(errors="replace").strip()
        raise ConfigError(f"{name}: not in git ({detail}); fetch that ref first")
    return Blob(name=name, data=shown.stdout)
