"""The PR gate as ``gate.yml`` runs it: base, head, reviews and evidence in; one verdict out.

Everything about the PR is read as git objects or as data (the reviews answer, the evidence), and
everything is judged by this code, the base's:

1. the tree the PR would land (:mod:`~twinbuild.evidence.landing`): the head, or its merge with
   the current base when it lags;
2. the trust roots it changes (:mod:`~twinbuild.evidence.trust_roots`) need a code owner's
   approval of the head, as the base's CODEOWNERS says, and its ``pyproject.toml`` may not have
   pip run or install a not-input (:mod:`~twinbuild.evidence.packaging`) (refused: exit 9);
3. when the landing tree's image inputs equal the base's, no evidence is needed; otherwise both
   platforms' signed evidence must be for exactly those inputs (:func:`~twinbuild.evidence.gate.
   gate`; refused: exit 7).

Every refusal is reported in one run: a PR that changes a key and a recipe hears about both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from twinbuild.errors import ConfigError, EvidenceRefused, TrustRootRefused
from twinbuild.evidence import keys, packaging, reviews, trust_roots
from twinbuild.evidence.gate import GateRefused, GateResult, Policy, gate
from twinbuild.evidence.head import commit_inputs, evidence_blobs
from twinbuild.evidence.landing import landing
from twinbuild.evidence.options import GateOptions
from twinbuild.evidence.signing import Blob
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

    lands = landing(options.repo, base, head, pr=f"pr-{pr}")
    changed = trust_roots.changed(options.repo, base, lands.tree)
    trust = trust_roots.judge(
        changed, owners=trust_roots.base_codeowners(options.repo, base) if changed else None,
        reviews=found, head=head, base=base,
    )  # fmt: skip
    installs = packaging.refusals(options.repo, lands.tree, name=lands.tree[:12])
    at_base = commit_inputs(base, repo=options.repo, manifest=options.manifest)
    landed = commit_inputs(lands.tree, repo=options.repo, manifest=options.manifest)
    policy = Policy(
        base_repository=env.get("GITHUB_REPOSITORY", ""),
        base_repository_id=repo_id,
        head_commit=head,
        pr=pr,
        default_branch=str(repository.get("default_branch") or options.default_branch),
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


def _table(event: Mapping[str, object], key: str) -> dict[str, object]:
    value = event.get(key)
    return value if isinstance(value, dict) else {}


def refusals_of(error: EvidenceRefused | TrustRootRefused) -> tuple[str, ...]:
    """The refusal lines an error carries (one per line of its message otherwise)."""
    found = getattr(error, "refusals", None)
    return tuple(found) if found is not None else tuple(str(error).splitlines())
