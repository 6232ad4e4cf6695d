"""The evidence gate: does the signed GPU evidence count for this pull request?

It passes only when, for each image the gate requires (every architecture of every variant whose
``validate`` is ``"pr"``), exactly one signed statement says: the default branch's validation
workflow of this repository (not a fork), run by ``workflow_run`` after the build of
``validate/pr-<N>`` for this very PR, tested a commit whose image inputs (as the signer computed
them from git objects) are those of the tree the PR would land, recently, and at least one GPU
test passed on a GPU of that variant's vendor with nothing failed; and all of that evidence is
for one commit. Every failed check is reported, each on its own line with what to do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from twinbuild.errors import EvidenceRefused
from twinbuild.evidence.record_statement import SAFE_REF_RE
from twinbuild.evidence.signing import Blob, Verified, verify
from twinbuild.evidence.statement import Statement, format_time
from twinbuild.manifest.model import ImageKey, Profile, Vendor
from twinbuild.smoke.run_summary import Counts

#: The only run that signs evidence: the default branch's validation workflow, which GitHub runs
#: from the default branch's copy (``workflow_run``), so the PR under test never wrote it.
ALLOWED_EVENTS = ("workflow_run",)
VALIDATION_WORKFLOW = ".github/workflows/validate-gpu.yml"
_VALIDATE_PR = re.compile(r"refs/heads/validate/pr-([1-9][0-9]{0,18})")
_IMAGE_DIGEST_RE = re.compile(r"(?:[^@\s]+@)?sha256:([0-9a-f]{64})")
_FORK_HELP = (
    "a fork's run ran code (and, under pull_request, a workflow) the fork chose, so it proves "
    "nothing and never gets GPU runners or the signing key; a maintainer reviews the PR "
    "(including .github/) and pushes its head to validate/pr-N in {base}"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What the evidence must match; the CLI fills it from the PR and the checkout of its head."""

    base_repository: str  # owner/name of the repository the PR targets
    base_repository_id: int
    head_commit: str  # the PR head, 40 hex
    pr: int | None = None  # None (a release): any validate/pr-<N> whose statement says N
    default_branch: str = "main"
    workflow: str = VALIDATION_WORKFLOW  # the workflow file whose runs sign evidence
    #: The images whose evidence the gate needs (each architecture of each gated variant).
    required: tuple[ImageKey, ...] = ()
    # Inputs hash per image of the tree the PR would land (the head, or its merge with the
    # base); given, every statement's inputs hash must equal it, whatever commit it names.
    head_inputs: Mapping[ImageKey, str] | None = None
    landing: str | None = None  # "the merge of the head ... into the base ...": the head lags
    match_inputs: bool = True  # evidence for another commit counts when its inputs hash matches
    base_commit: str | None = None  # the PR base; with base_inputs, an unchanged PR needs nothing
    base_inputs: Mapping[ImageKey, str] | None = None  # inputs hash per image at the base
    # What the manifest claims about each image (its claims digest) at the landing tree and at
    # the base: a claim no build arg carries (toolkit, gpu_archs, imports) needs evidence too.
    head_claims: Mapping[ImageKey, str] | None = None
    base_claims: Mapping[ImageKey, str] | None = None
    manifest_digest: str | None = None  # sha256:... of pins/manifest.toml at the PR head
    images: Mapping[ImageKey, str] | None = None  # image digests that must be the ones tested
    #: Each variant's vendor as the judging side reads it (the base's manifest first): the
    #: evidence's GPU and its recorded vendor must be this.
    vendors: Mapping[str, Vendor] | None = None
    profile: Profile = "production"
    max_age: timedelta = timedelta(days=14)
    max_skew: timedelta = timedelta(minutes=5)  # clocks disagree a little; the future does not come


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted:
    """One image's evidence that counts."""

    image: ImageKey
    path: str
    keyids: tuple[str, ...]
    statement: Statement
    matched_by: Literal["commit", "inputs"]
    flaky: tuple[str, ...]  # tests that passed only on a rerun
    landing: str | None = None  # the PR lags: its merge with the base, which has these inputs

    def summary(self) -> str:
        p = self.statement.predicate
        c, gpu = p.results.counts, p.gpu
        on = f"{gpu.count}x {gpu.model} (driver {gpu.driver}, {gpu.runtime})" if gpu else "no GPU"
        flaky = f", {len(self.flaky)} flaky: {', '.join(self.flaky)}" if self.flaky else ""
        bound = (
            f"commit {p.source.commit[:12]}"
            if self.matched_by == "commit"
            else f"commit {p.source.commit[:12]} with the same inputs as the PR head"
        )
        if self.landing is not None:
            bound = f"commit {p.source.commit[:12]}, whose inputs {self.landing} has too"
        return (
            f"{self.image.name}: {c.passed} passed, {c.skipped} skipped{flaky} on {on}; "
            f"run {p.run.run_id} attempt {p.run.run_attempt} on {p.source.ref}, {bound}, "
            f"{format_time(p.created_at)}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    accepted: tuple[Accepted, ...]
    unchanged: str | None = None  # why no evidence was needed, when the images did not change

    @property
    def flaky(self) -> tuple[str, ...]:
        return tuple(f"{a.image.name}: {t}" for a in self.accepted for t in a.flaky)

    def lines(self) -> list[str]:
        if self.unchanged is not None:
            return [self.unchanged]
        return [a.summary() for a in self.accepted]


class GateRefused(EvidenceRefused):
    """Every refusal, one line each (``str()`` joins them)."""

    def __init__(self, refusals: Sequence[str]) -> None:
        super().__init__("\n".join(refusals))
        self.refusals = tuple(refusals)


@dataclass(slots=True)
class _Checks:
    refusals: list[str] = field(default_factory=list)

    def refuse(self, path: str, check: str, message: str) -> None:
        self.refusals.append(f"{path}: {check}: {message}")


def gate(
    paths: Sequence[Path | Blob],
    *,
    policy: Policy,
    trusted: Mapping[str, Ed25519PublicKey],
    now: datetime,
) -> GateResult:
    """Accept the evidence in ``paths`` for the PR ``policy`` describes, or raise GateRefused.

    A PR whose image inputs at the head equal those at the base changes no image: it passes with
    no evidence. A file that cannot be read as an envelope raises ConfigError; a signature or
    policy failure is collected, and all of them are raised together.
    """
    if not policy.required:  # deny by default: a gate that needs nothing would pass anything
        raise GateRefused(
            ["the gate requires no image's evidence: the manifest must mark at least one variant "
             'validate = "pr" (docs/trust.md)']
        )  # fmt: skip
    unchanged = _unchanged(policy)
    if unchanged is not None:
        return GateResult(accepted=(), unchanged=unchanged)
    checks = _Checks()
    verified: list[Verified] = []
    for path in paths:
        try:
            verified.append(verify(path, trusted=trusted))
        except GateRefused:
            raise
        except EvidenceRefused as exc:  # signature, payloadType or predicateType
            checks.refusals.append(str(exc))
    required = set(policy.required)
    # Evidence of an image the gate does not require (a nightly variant's) is not judged.
    verified = [v for v in verified if v.statement.predicate.image in required]
    accepted = [a for v in verified if (a := _check(v, policy, now, checks)) is not None]
    _check_images(verified, policy.required, checks)
    if not checks.refusals:
        _check_one_commit(accepted, policy, checks)
    if checks.refusals:
        raise GateRefused([*_why_claims(policy), *checks.refusals])
    order = {image: i for i, image in enumerate(policy.required)}
    return GateResult(accepted=tuple(sorted(accepted, key=lambda a: order[a.image])))


def _unchanged(policy: Policy) -> str | None:
    head, base = policy.head_inputs, policy.base_inputs
    if head is None or base is None or policy.base_commit is None or not policy.required:
        return None
    if any(head.get(i) is None or head.get(i) != base.get(i) for i in policy.required):
        return None
    if _claims_moved(policy):
        return None
    same = ", ".join(f"{i.name} {head[i][:19]}" for i in policy.required)
    merged = " merged into it" if policy.landing is not None else ""
    return (
        f"no image input changed between the base {policy.base_commit[:12]} and the head "
        f"{policy.head_commit[:12]}{merged} ({same}); no GPU evidence needed"
    )


def _claims_moved(policy: Policy) -> tuple[ImageKey, ...]:
    """The required images whose manifest claims differ between the base and the landing tree."""
    head, base = policy.head_claims, policy.base_claims
    if head is None or base is None:
        return ()
    return tuple(i for i in policy.required if head.get(i) != base.get(i))


def _why_claims(policy: Policy) -> list[str]:
    """Why evidence is needed when no build input moved: the manifest's claims did."""
    moved = _claims_moved(policy)
    if not moved or policy.head_inputs != policy.base_inputs:
        return []
    pr = f"pr-{policy.pr}" if policy.pr is not None else "pr-N"
    return [
        f"manifest: no build input moved, but pins/manifest.toml changes what it claims about the "
        f"{', '.join(i.name for i in moved)} image{'s' if len(moved) > 1 else ''} (what the smoke "
        "run checks), so GPU evidence of those "
        f"claims is needed: push the head to validate/{pr}"
    ]


def _check(v: Verified, policy: Policy, now: datetime, checks: _Checks) -> Accepted | None:
    before = len(checks.refusals)
    p = v.statement.predicate
    path, image, src, run = v.path, p.image, p.source, p.run
    pr = f"pr-{policy.pr}" if policy.pr is not None else "pr-N"
    base = policy.base_repository

    if run.event not in ALLOWED_EVENTS:
        if run.event in ("pull_request", "pull_request_target"):
            why = "the PR chose the code (and, under pull_request, the workflow file)"
        elif run.event == "push":
            why = "a push runs the pushed branch's own workflow file, which the PR wrote"
        else:
            why = "that event runs code or a workflow the default branch did not choose"
        checks.refuse(
            path,
            "event",
            f"run event {run.event!r} cannot count ({why}); only the default branch's "
            f"{policy.workflow} (workflow_run) signs evidence: push the reviewed PR head to "
            f"refs/heads/validate/{pr} in {base}",
        )
    else:
        _check_workflow(path, run.workflow_ref, policy, pr, checks)
    repos = [(src.repository, src.repository_id), (src.head_repository, src.head_repository_id)]
    for name, repo_id in repos:
        if repo_id != policy.base_repository_id or name.lower() != base.lower():
            checks.refuse(
                path,
                "repository",
                f"evidence comes from {name!r} (id {repo_id}), not {base!r} "
                f"(id {policy.base_repository_id}); " + _FORK_HELP.format(base=base),
            )
            break
    _check_ref(path, src.ref, src.pr, policy, pr, checks)
    matched_by = _check_inputs(v, policy, pr, checks)
    if p.build.profile != policy.profile:
        checks.refuse(
            path,
            "profile",
            f"evidence is for the {p.build.profile} profile, the gate needs {policy.profile}; "
            f"validate the {policy.profile} images",
        )

    age = now - p.created_at
    if age > policy.max_age:
        checks.refuse(
            path,
            "created_at",
            f"evidence from {format_time(p.created_at)} is older than {policy.max_age.days} days; "
            f"re-run the validation (push to validate/{pr} again)",
        )
    elif -age > policy.max_skew:
        checks.refuse(
            path,
            "created_at",
            f"evidence claims {format_time(p.created_at)}, later than now "
            f"({format_time(now)}); a record from the future is refused, check the runner's clock",
        )

    _check_subjects(v, policy, checks)
    flaky = _check_results(v, checks, before, policy.vendors)
    if len(checks.refusals) > before:
        return None
    return Accepted(
        image=image,
        path=path,
        keyids=v.keyids,
        statement=v.statement,
        matched_by=matched_by,
        flaky=flaky,
        landing=policy.landing,
    )


def _check_workflow(path: str, ref: str, policy: Policy, pr: str, checks: _Checks) -> None:
    """The run that signed is the validation workflow's file, at the default branch, here."""
    repo, sep, rest = ref.partition("/.github/")
    wanted = f"{policy.workflow}@refs/heads/{policy.default_branch}"
    if sep and repo.casefold() == policy.base_repository.casefold() and ".github/" + rest == wanted:
        return
    checks.refuse(
        path,
        "workflow",
        f"evidence comes from {ref!r}, not {policy.base_repository}/{wanted}; only the default "
        f"branch's validation workflow signs evidence: push the reviewed PR head to "
        f"refs/heads/validate/{pr}",
    )


def _check_ref(
    path: str, ref: str, recorded_pr: int | None, policy: Policy, pr: str, checks: _Checks
) -> None:
    """The ref is exactly ``refs/heads/validate/pr-<N>`` of the PR gated, and says so twice."""
    if not SAFE_REF_RE.fullmatch(ref) or ".." in ref or "//" in ref or ref.endswith(("/", ".")):
        checks.refuse(
            path,
            "ref",
            f"{ref!r} is not a plain branch name (only A-Z a-z 0-9 . _ / - are allowed); "
            f"push to a branch like validate/{pr}",
        )
        return
    match = _VALIDATE_PR.fullmatch(ref)
    wanted = f"refs/heads/validate/{pr}" if policy.pr is not None else "refs/heads/validate/pr-N"
    if match is None or (policy.pr is not None and int(match.group(1)) != policy.pr):
        checks.refuse(
            path,
            "ref",
            f"evidence validated {ref!r}, not {wanted}; evidence counts only for the PR whose "
            f"branch it validated: push the reviewed PR head to {wanted}",
        )
        return
    if recorded_pr != int(match.group(1)):
        checks.refuse(
            path,
            "pr",
            f"evidence names PR {recorded_pr} but validated {ref!r}; a statement must name the PR "
            f"of its branch: validate again ({wanted})",
        )


def _check_inputs(
    v: Verified, policy: Policy, pr: str, checks: _Checks
) -> Literal["commit", "inputs"]:
    """Evidence counts for the image inputs it tested: those of the tree the PR would land."""
    p, path = v.statement.predicate, v.path
    src, head = p.source, policy.head_commit
    matched_by: Literal["commit", "inputs"] = "commit" if src.commit == head else "inputs"
    wanted = (policy.head_inputs or {}).get(p.image)
    push = f"push the new head to validate/{pr} to validate it"
    if wanted is None:
        if src.commit != head:
            checks.refuse(
                path,
                "commit",
                f"evidence is for commit {src.commit}, the PR head is {head} and no inputs hash "
                f"at the PR head was given to compare; {push}",
            )
        return matched_by
    if p.build.inputs_hash != wanted:
        where = policy.landing or f"the PR head {head[:12]}"
        advice = push
        if policy.landing is not None:
            advice = (
                "the head lags the base, whose changes moved the image inputs, so that merge "
                f"was never built: rebase the PR on the base and push the new head to "
                f"validate/{pr}"
            )
        checks.refuse(
            path,
            "inputs",
            f"evidence tested inputs {p.build.inputs_hash} (commit {src.commit[:12]}); {where} "
            f"has {wanted}; {advice}",
        )
    elif src.commit != head and not policy.match_inputs:
        checks.refuse(
            path,
            "commit",
            f"evidence is for commit {src.commit}, the PR head is {head}, and --same-commit "
            f"counts the PR head's own evidence only; {push}",
        )
    return matched_by


def _check_one_commit(accepted: Sequence[Accepted], policy: Policy, checks: _Checks) -> None:
    """Every image's evidence is for one commit: each image's hash leaves the other recipe
    families' ``images/<other>/`` out, so only together do they cover every input."""
    commits = {a.image: a.statement.predicate.source.commit for a in accepted}
    if len(set(commits.values())) <= 1:
        return
    pr = f"pr-{policy.pr}" if policy.pr is not None else "pr-N"
    shown = ", ".join(f"{i.name} for {c[:12]}" for i, c in commits.items())
    checks.refusals.append(
        f"commit: the evidence is for {len(set(commits.values()))} commits ({shown}); the "
        f"images count only from one validation of one commit: push the head to validate/{pr} "
        "again"
    )


def _check_subjects(v: Verified, policy: Policy, checks: _Checks) -> None:
    st, path = v.statement, v.path
    image = st.predicate.image
    if policy.manifest_digest is not None:
        recorded = "sha256:" + st.manifest_subject().sha256
        if recorded != policy.manifest_digest:
            checks.refuse(
                path,
                "manifest",
                f"evidence tested pins/manifest.toml {recorded}, the PR head has "
                f"{policy.manifest_digest}; validate the PR head",
            )
    wanted = (policy.images or {}).get(image)
    if wanted is None:
        return
    match = _IMAGE_DIGEST_RE.fullmatch(wanted)
    if match is None:
        checks.refuse(
            path,
            "image",
            f"{wanted!r} is a tag without a digest; tags move, evidence binds digests: "
            "pass repository@sha256:<64 hex>",
        )
    elif match.group(1) != st.image_subject().sha256:
        checks.refuse(
            path,
            "image",
            f"the {image} image tested was sha256:{st.image_subject().sha256}, not {wanted}; "
            "evidence counts only for the image it tested",
        )


def _check_results(
    v: Verified, checks: _Checks, before: int, vendors: Mapping[str, Vendor] | None
) -> tuple[str, ...]:
    p, path = v.statement.predicate, v.path
    res, gpu = p.results, p.gpu
    vendor = p.vendor
    judged = (vendors or {}).get(p.variant, vendor)
    if judged != vendor:
        checks.refuse(
            path,
            "vendor",
            f"the evidence says {p.variant} is {vendor}; the manifest the gate judges by says "
            f"{judged}: validate the variant on a {judged} GPU runner",
        )
    if gpu is None or gpu.count < 1:
        checks.refuse(path, "gpu", f"the smoke run saw no GPU; run it on a {judged} GPU runner")
    elif gpu.vendor != judged:
        checks.refuse(
            path,
            "gpu",
            f"{p.image} evidence ran on a {gpu.vendor} GPU ({gpu.model}); {p.variant} needs "
            f"{judged}: run its job on a {judged} runner",
        )
    if res.counts != Counts.of(res.tests):
        checks.refuse(path, "results", "counts disagree with the tests listed; re-record")
    c = Counts.of(res.tests)
    if not res.tests:
        checks.refuse(path, "results", "zero tests ran; no tests is not evidence, fix the run")
    elif c.skipped == len(res.tests):
        checks.refuse(
            path,
            "results",
            f"all {c.skipped} tests were skipped; skipped is not evidence, run on a GPU runner",
        )
    elif c.failed:
        failed = [t.id for t in res.tests if t.outcome == "failed"]
        more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
        checks.refuse(
            path,
            "results",
            f"the run failed ({c.failed} failed: {', '.join(failed[:3])}{more}); "
            "fix and validate again",
        )
    elif not any(t.gpu and t.outcome == "passed" for t in res.tests):
        checks.refuse(
            path, "results", "no GPU test (marker gpu) passed; only GPU tests are GPU evidence"
        )
    elif res.verdict != "passed" and len(checks.refusals) == before:
        checks.refuse(path, "results", "the record's verdict is failed; validate again")
    return tuple(t.id for t in res.tests if t.outcome == "passed" and (t.flaky or t.attempts > 1))


def _check_images(
    verified: list[Verified], required: tuple[ImageKey, ...], checks: _Checks
) -> None:
    for image in required:
        mine = [v for v in verified if v.statement.predicate.image == image]
        if not mine:
            checks.refusals.append(
                f"{image.name}: missing: no signed evidence of {image}; the gate requires every "
                f'architecture of every variant with validate = "pr": add '
                f"evidence/{image.name}.dsse.json from the validation run"
            )
            continue
        if len(mine) == 1:
            continue
        runs = {v.statement.predicate.run.run_id for v in mine}
        if len(runs) == 1:
            latest = max(v.statement.predicate.run.run_attempt for v in mine)
            for v in mine:
                run = v.statement.predicate.run
                if run.run_attempt < latest:
                    checks.refusals.append(
                        f"{v.path}: attempt: run {run.run_id} attempt {run.run_attempt} is "
                        f"superseded by attempt {latest}; only the latest attempt counts"
                    )
            mine = [v for v in mine if v.statement.predicate.run.run_attempt == latest]
        if len(mine) > 1:
            files = ", ".join(str(v.path) for v in mine)
            checks.refusals.append(
                f"{image.name}: duplicate: evidence of {image} appears {len(mine)} times "
                f"({files}); each image counts once, keep one file per image"
            )


def check_one(verified: Verified, *, policy: Policy, now: datetime) -> Accepted:
    """The gate's checks on one verified envelope (source, ref, age, image, GPU results).

    For a release: ``policy.images`` names the digest being released and ``policy.head_commit``
    the statement's own commit, since the digest, not a PR head, is what must match.
    """
    checks = _Checks()
    accepted = _check(verified, policy, now, checks)
    if accepted is None or checks.refusals:
        raise GateRefused(checks.refusals)
    return accepted
