"""The gate's remaining edges, each with its exact text: bounds of age and clock skew, refs that
only look like branches, refusals without a PR number, and what an accepted record carries.

Found by mutation testing (``nox -s mutate``): each test here kills mutants that the gate's other
tests let through.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from tests.unit.evidence_builders import (
    HEAD,
    HEAD_INPUTS,
    NOW,
    REPO,
    REPO_ID,
    REQUIRED,
    Signer,
    entry,
    evidence,
    payload_of,
    resign,
    smoke_report,
)
from twinbuild.evidence import GateRefused, GateResult, Policy, gate

POLICY = Policy(
    base_repository=REPO, base_repository_id=REPO_ID, head_commit=HEAD, pr=42, required=REQUIRED
)
OTHER = "f" * 40


def _gate(paths: list[Path], signer: Signer, policy: Policy = POLICY) -> GateResult:
    return gate(paths, policy=policy, trusted=signer.trusted, now=NOW)


def _refusals(paths: list[Path], signer: Signer, policy: Policy = POLICY) -> list[str]:
    with pytest.raises(GateRefused) as info:
        _gate(paths, signer, policy)
    assert str(info.value) == "\n".join(info.value.refusals)
    return list(info.value.refusals)


def test_evidence_exactly_max_age_old_or_max_skew_ahead_counts(
    tmp_path: Path, signer: Signer
) -> None:
    old = evidence(tmp_path, signer, "cuda", now=NOW - POLICY.max_age)
    ahead = evidence(tmp_path, signer, "rocm", now=NOW + POLICY.max_skew)
    assert len(_gate([old, ahead], signer).accepted) == 2
    older = evidence(
        tmp_path, signer, "cuda", name="older", now=NOW - POLICY.max_age - timedelta(seconds=1)
    )
    further = evidence(
        tmp_path, signer, "rocm", name="further", now=NOW + POLICY.max_skew + timedelta(seconds=1)
    )
    refusals = _refusals([older, further], signer)
    assert [r.split(": ")[1] for r in refusals] == ["created_at", "created_at"]


@pytest.mark.parametrize(
    "ref",
    ["refs/heads/validate//pr-42", "refs/heads/validate/pr-42/", "refs/heads/validate/pr-42."],
)
def test_a_ref_that_git_would_not_name_a_branch_is_refused(
    tmp_path: Path, signer: Signer, ref: str
) -> None:
    cuda = evidence(tmp_path, signer, "cuda")
    payload = payload_of(cuda)
    payload["predicate"]["source"]["ref"] = ref
    resign(cuda, payload, signer)
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer) == [
        f"{cuda}: ref: {ref!r} is not a plain branch name (only A-Z a-z 0-9 . _ / - are allowed); "
        "push to a branch like validate/pr-42"
    ]


def test_without_a_pr_number_the_refusal_says_pr_n(tmp_path: Path, signer: Signer) -> None:
    cuda = evidence(tmp_path, signer, "cuda", commit=OTHER)
    policy = replace(POLICY, pr=None, match_inputs=False, head_inputs=HEAD_INPUTS)
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer, policy) == [
        f"{cuda}: commit: evidence is for commit {OTHER}, the PR head is {HEAD}, and "
        "--same-commit counts the PR head's own evidence only; push the new head to "
        "validate/pr-N to validate it"
    ]


def test_evidence_matched_by_inputs_says_so(tmp_path: Path, signer: Signer) -> None:
    paths = [evidence(tmp_path, signer, p, commit=OTHER) for p in ("cuda", "rocm")]
    result = _gate(paths, signer, replace(POLICY, head_inputs=HEAD_INPUTS))
    assert [a.matched_by for a in result.accepted] == ["inputs", "inputs"]
    assert result.lines()[0] == (
        "cuda-amd64: 2 passed, 0 skipped on 1x NVIDIA H200 (driver 570.86, 12.9); run 9001 attempt 1 "
        f"on refs/heads/validate/pr-42, commit {OTHER[:12]} with the same inputs as the PR head, "
        "2025-06-01T12:00:00Z"
    )


def test_an_accepted_record_names_its_file_and_signer(tmp_path: Path, signer: Signer) -> None:
    paths = [evidence(tmp_path, signer, p) for p in ("cuda", "rocm")]
    result = _gate(paths, signer)
    assert [(a.path, a.keyids) for a in result.accepted] == [
        (str(paths[0]), (signer.keyid,)),
        (str(paths[1]), (signer.keyid,)),
    ]


def test_several_flaky_tests_are_listed_in_the_summary(tmp_path: Path, signer: Signer) -> None:
    tests = [
        entry("test_a", attempts=2, flaky=True),
        entry("test_b", attempts=2, flaky=True),
        entry("test_ok"),
    ]
    cuda = evidence(tmp_path, signer, "cuda", report=smoke_report("cuda", tests=tests))
    result = _gate([cuda, evidence(tmp_path, signer, "rocm")], signer)
    assert result.lines()[0].startswith(
        "cuda-amd64: 3 passed, 0 skipped, 2 flaky: tests/smoke/test_gpu.py::test_a, "
        "tests/smoke/test_gpu.py::test_b on 1x NVIDIA H200"
    )


BASE = "b" * 40
CUDA, ROCM = REQUIRED
SAME = {CUDA: "sha256:" + "c" * 64, ROCM: "sha256:" + "d" * 64}


def _unchanged_policy(**kw: object) -> Policy:
    values: dict[str, object] = {
        "base_commit": BASE,
        "base_inputs": dict(SAME),
        "head_inputs": dict(SAME),
    }
    values.update(kw)
    return replace(POLICY, **values)  # type: ignore[arg-type]


def test_a_pr_that_changes_no_image_input_needs_no_evidence(signer: Signer) -> None:
    result = _gate([], signer, _unchanged_policy())
    assert result.accepted == ()
    assert result.lines() == [
        f"no image input changed between the base {BASE[:12]} and the head {HEAD[:12]} "
        f"(cuda-amd64 {SAME[CUDA][:19]}, rocm-amd64 {SAME[ROCM][:19]}); no GPU evidence needed"
    ]
    assert result.unchanged == result.lines()[0]


MISSING = [
    f"{i.name}: missing: no signed evidence of {i}; the gate requires every architecture of "
    f'every variant with validate = "pr": add evidence/{i.name}.dsse.json from the validation run'
    for i in REQUIRED
]


@pytest.mark.parametrize(
    "change",
    [
        {"base_commit": None},
        {"base_inputs": None},
        {"head_inputs": None},
        {"head_inputs": {CUDA: SAME[CUDA]}},  # rocm unknown at the head
        {"base_inputs": {CUDA: SAME[CUDA]}},  # rocm unknown at the base
        {"head_inputs": {CUDA: SAME[CUDA], ROCM: "sha256:" + "e" * 64}},
        {"base_inputs": {CUDA: "sha256:" + "e" * 64, ROCM: SAME[ROCM]}},
    ],
    ids=[
        "no-base",
        "no-base-inputs",
        "no-head-inputs",
        "head-lacks-rocm",
        "base-lacks-rocm",
        "rocm-moved",
        "cuda-moved",
    ],
)
def test_a_pr_that_may_change_an_image_needs_both_platforms(
    signer: Signer, change: dict[str, object]
) -> None:
    assert _refusals([], signer, _unchanged_policy(**change)) == MISSING


def test_failed_tests_are_named_three_at_most(tmp_path: Path, signer: Signer) -> None:
    def run(n: int) -> str:
        tests = [entry(f"t{i}", "failed") for i in range(n)] + [entry("ok")]
        cuda = evidence(tmp_path, signer, "cuda", name=f"f{n}",
                        report=smoke_report("cuda", tests=tests))  # fmt: skip
        [refusal] = _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer)
        return refusal.split(": results: ", 1)[1]

    ids = [f"tests/smoke/test_gpu.py::t{i}" for i in range(5)]
    assert run(3) == f"the run failed (3 failed: {', '.join(ids[:3])}); fix and validate again"
    assert run(4) == (
        f"the run failed (4 failed: {', '.join(ids[:3])} and 1 more); fix and validate again"
    )
    assert run(5) == (
        f"the run failed (5 failed: {', '.join(ids[:3])} and 2 more); fix and validate again"
    )


def test_a_pass_on_a_second_attempt_is_flaky_even_unmarked(tmp_path: Path, signer: Signer) -> None:
    tests = [
        entry("retried", attempts=2),  # passed on its second attempt, not marked flaky
        entry("marked", flaky=True),  # marked flaky by the runner on its first attempt
        entry("plain"),
    ]
    cuda = evidence(tmp_path, signer, "cuda", report=smoke_report("cuda", tests=tests))
    result = _gate([cuda, evidence(tmp_path, signer, "rocm")], signer)
    assert result.flaky == (
        "cuda-amd64: tests/smoke/test_gpu.py::retried",
        "cuda-amd64: tests/smoke/test_gpu.py::marked",
    )


def test_both_missing_platforms_are_reported(signer: Signer) -> None:
    assert _refusals([], signer) == MISSING


def test_check_one_accepts_or_refuses_one_envelope(tmp_path: Path, signer: Signer) -> None:
    """The release's check: one platform's evidence, the same rules, no both-platforms rule."""
    from twinbuild.evidence.evidence_check import check_one
    from twinbuild.evidence.signing import verify

    good = verify(evidence(tmp_path, signer, "rocm"), trusted=signer.trusted)
    accepted = check_one(good, policy=POLICY, now=NOW)
    assert (accepted.image, accepted.matched_by, accepted.keyids) == (
        REQUIRED[1],
        "commit",
        (signer.keyid,),
    )
    old = evidence(tmp_path, signer, "cuda", name="old", now=NOW - timedelta(days=30))
    with pytest.raises(GateRefused) as info:
        check_one(verify(old, trusted=signer.trusted), policy=POLICY, now=NOW)
    assert info.value.refusals == (
        f"{old}: created_at: evidence from 2025-05-02T12:00:00Z is older than 14 days; re-run "
        "the validation (push to validate/pr-42 again)",
    )
