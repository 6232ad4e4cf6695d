"""The PR gate as ``gate.yml`` runs it: base, head, reviews and evidence in; one verdict out.

Everything about the PR is read as git objects or as data (the reviews answer, the evidence), and
everything is judged by this code, the base's:

1. the tree the PR would land (:mod:`~twinbuild.evidence.landing`): the head, or its merge with
   the current base when it lags;
2. the trust roots it changes (:mod:`~twinbuild.evidence.trust_roots`) need a code owner's
   approval of the head, as the base's CODEOWNERS says, by someone GitHub says can write
   (:mod:`~twinbuild.evidence.permissions`), and its ``pyproject.toml`` may not have
   pip run or install a not-input (:mod:`~twinbuild.evidence.packaging`) (refused: exit 9);
3. which images need evidence: every architecture of every variant the landing tree's manifest
   gates (``validate = "pr"``), and of every variant the base's manifest gates that the tree still
   has. A PR that changes the set of images its manifest gates (an architecture of a gated
   variant dropped or added, a variant moved to ``validate = "nightly"``, removed or newly gated)
   changes what the gate asks of every later PR: like a trust root, it passes only with a code
   owner's approval of the head (exit 9);
4. when the landing tree's inputs of those images equal the base's, no evidence is needed;
   otherwise each image's signed evidence must be for exactly those inputs
   (:func:`~twinbuild.evidence.evidence_check.gate`; refused: exit 7).

Every refusal is reported in one run: a PR that changes a key and a recipe hears about both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from twinbuild.errors import ConfigError, EvidenceRefused, TrustRootRefused
from twinbuild.evidence import keys, packaging, permissions, reviews, trust_roots
from twinbuild.evidence.command_options import GateOptions
from twinbuild.evidence.evidence_check import GateRefused, GateResult, Policy, gate
from twinbuild.evidence.head import CommitInputs, commit_inputs, evidence_blobs
from twinbuild.evidence.landing import landing
from twinbuild.evidence.signing import Blob
from twinbuild.manifest.model import ImageKey
from twinbuild.util import environ, values
from twinbuild.util.git import rev_arg


class PrGateRefused(TrustRootRefused):
    """Trust roots refused (and perhaps evidence too), one line each."""

    def __init__(self, refusals: list[str]) -> None:
        super().__init__("\n".join(refusals))
        self.refusals = tuple(refusals)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrVerdict:
    lines: tuple[str, ...]
    flaky: tuple[str, ...]


def judge(
    options: GateOptions, *, env: Mapping[str, str], event: Mapping[str, object], now: datetime
) -> PrVerdict:
    """The gate's verdict on the PR ``options`` names; raises the refusals (exit 9, else 7)."""
    head = rev_arg(options.head, option="--head")
    base = rev_arg(options.base, option="--base")
    if options.evidence_ref is not None:
        rev_arg(options.evidence_ref, option="--evidence-ref")
    pull = _table(event, "pull_request")
    repository = _table(event, "repository")
    number = pull.get("number")
    pr = number if isinstance(number, int) else options.pr
    if pr is None:
        raise ConfigError(
            "evidence gate: the PR number is unknown; pass --pr N (gate.yml's event says it)"
        )
    repo_id = environ.whole("GITHUB_REPOSITORY_ID", low=1, high=values.MAX_ID, env=env)
    if repo_id is None:
        payload_id = repository.get("id")
        if not isinstance(payload_id, int) or not 1 <= payload_id <= values.MAX_ID:
            raise ConfigError(
                "evidence gate: GITHUB_REPOSITORY_ID is unset; run it in GitHub Actions"
            )
        repo_id = payload_id
    blobs: list[Path | Blob] = list(options.evidence)
    if options.evidence_ref:
        blobs += evidence_blobs(options.evidence_ref, repo=options.repo)
    found = reviews.load(options.reviews) if options.reviews is not None else None
    answers = permissions.answers(options.permissions, env=env)

    lands = landing(options.repo, base, head, pr=f"pr-{pr}")
    changed = trust_roots.changed(options.repo, base, lands.tree)
    trust = trust_roots.judge(
        changed, owners=trust_roots.base_codeowners(options.repo, base) if changed else None,
        reviews=found, head=head, base=base, answers=answers,
    )  # fmt: skip
    # Refused whoever approves: pip running a not-input, paths a checkout writes as one.
    installs = (
        *packaging.refusals(options.repo, lands.tree, name=lands.tree[:12]),
        *trust_roots.collided(options.repo, base, lands.tree),
    )
    at_base = commit_inputs(base, repo=options.repo, manifest=options.manifest)
    landed = commit_inputs(lands.tree, repo=options.repo, manifest=options.manifest)
    moved = image_set_change(at_base, landed)
    if moved:
        owners = trust_roots.base_codeowners(options.repo, base)
        why = (
            f"this PR changes which images the gate requires ({moved}): that changes what the "
            "gate asks of every later PR, and automation alone never passes that"
        )
        rel = options.manifest.as_posix()
        policy_verdict = trust_roots.judge(
            {rel: None}, owners=owners, reviews=found, head=head, base=base, answers=answers,
            why={rel: why},
        )  # fmt: skip
        trust = trust_roots.TrustVerdict(
            changed=(*trust.changed, *policy_verdict.changed),
            refusals=(*trust.refusals, *policy_verdict.refusals),
            approvers=tuple(sorted({*trust.approvers, *policy_verdict.approvers})),
            source=answers.source,
        )
    policy = Policy(
        base_repository=env.get("GITHUB_REPOSITORY", ""),
        base_repository_id=repo_id,
        head_commit=head,
        pr=pr,
        default_branch=str(repository.get("default_branch") or options.default_branch),
        required=required_images(at_base, landed),
        vendors={
            **landed.vendors,
            **{v: x for v, x in at_base.vendors.items() if v in landed.vendors},
        },
        head_inputs=landed.inputs,
        landing=None if lands.contains_base else lands.describe(),
        match_inputs=not options.same_commit,
        base_commit=base,
        base_inputs=at_base.inputs,
        head_claims=landed.claims,
        base_claims=at_base.claims,
        manifest_digest=landed.manifest_digest,
        max_age=timedelta(days=options.max_age_days),
    )
    try:
        result: GateResult | None = gate(
            blobs, policy=policy, trusted=keys.load_trusted(options.keys), now=now
        )
        evidence_refusals: tuple[str, ...] = ()
    except GateRefused as refused:
        result, evidence_refusals = None, refused.refusals
    if trust.refusals or installs:
        raise PrGateRefused([*trust.refusals, *installs, *evidence_refusals])
    if result is None:
        raise GateRefused(evidence_refusals)
    return PrVerdict(lines=(*trust.lines(), *result.lines()), flaky=result.flaky)


def required_images(base: CommitInputs, landed: CommitInputs) -> tuple[ImageKey, ...]:
    """The images the gate needs evidence for: every architecture of each variant the landing
    tree gates, and of each variant the base gates that the landing tree still builds."""
    gated = set(landed.required) | set(base.required)
    return tuple(i for i in landed.inputs if i.variant in gated)


def gated_images(at: CommitInputs) -> tuple[ImageKey, ...]:
    """Every architecture of every variant a commit's own manifest gates."""
    return tuple(i for i in at.inputs if i.variant in at.required)


def image_set_change(base: CommitInputs, landed: CommitInputs) -> str:
    """How the images the landing tree gates differ from the base's ('' when they do not): an
    architecture or a variant dropped (moved to nightly, removed) or added."""
    before, after = gated_images(base), gated_images(landed)
    gone = [i.name for i in before if i not in after]
    new = [i.name for i in after if i not in before]
    said = [f"no longer: {', '.join(gone)}"] if gone else []
    said += [f"now also: {', '.join(new)}"] if new else []
    return "; ".join(said)


def _table(event: Mapping[str, object], key: str) -> dict[str, object]:
    value = event.get(key)
    return value if isinstance(value, dict) else {}


def refusals_of(error: EvidenceRefused | TrustRootRefused) -> tuple[str, ...]:
    """The refusal lines an error carries (one per line of its message otherwise)."""
    found = getattr(error, "refusals", None)
    return tuple(found) if found is not None else tuple(str(error).splitlines())
