"""`evidence gate`: every way evidence could fail to count for a PR is refused with its reason."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MINI_VARIANTS, image
from tests.unit.evidence_builders import (
    HEAD,
    HEAD_INPUTS,
    IMAGE_REFS,
    INPUTS,
    MANIFEST,
    NOW,
    REPO,
    REPO_ID,
    REQUIRED,
    Signer,
    entry,
    evidence,
    github_env,
    payload_of,
    resign,
    smoke_report,
    validated,
    write_json,
)
from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.evidence import GateRefused, GateResult, Policy, dsse, gate, record

POLICY = Policy(
    base_repository=REPO, base_repository_id=REPO_ID, head_commit=HEAD, pr=42, required=REQUIRED
)
FORK_HELP = (
    "a fork's run ran code (and, under pull_request, a workflow) the fork chose, so it proves "
    "nothing and never gets GPU runners or the signing key; a maintainer reviews the PR "
    "(including .github/) and pushes its head to validate/pr-N in twinbuild/twinbuild"
)


def _both(tmp_path: Path, signer: Signer, **kw: Any) -> list[Path]:
    return [evidence(tmp_path, signer, "cuda", **kw), evidence(tmp_path, signer, "rocm", **kw)]


def _gate(paths: list[Path], signer: Signer, policy: Policy = POLICY) -> GateResult:
    return gate(paths, policy=policy, trusted=signer.trusted, now=NOW)


def _refusals(paths: list[Path], signer: Signer, policy: Policy = POLICY) -> list[str]:
    with pytest.raises(GateRefused) as info:
        _gate(paths, signer, policy)
    assert info.value.exit_code == 7
    return list(info.value.refusals)


def _edit(path: Path, signer: Signer, change: Callable[[dict[str, Any]], None]) -> Path:
    """Change the payload and re-sign it with the trusted key (only the policy can catch it)."""
    payload = payload_of(path)
    change(payload["predicate"])
    return resign(path, payload, signer)


def test_both_platforms_from_a_validation_branch_pass(tmp_path: Path, signer: Signer) -> None:
    result = _gate(_both(tmp_path, signer), signer)
    assert [a.image for a in result.accepted] == list(REQUIRED)
    assert result.lines() == [
        "cuda-amd64: 2 passed, 0 skipped on 1x NVIDIA H200 (driver 570.86, 12.9); run 9001 attempt 1 "
        f"on refs/heads/validate/pr-42, commit {HEAD[:12]}, 2025-06-01T12:00:00Z",
        "rocm-amd64: 2 passed, 0 skipped on 8x AMD Instinct MI300X (driver 6.10.5, 6.4.1); run 9001 "
        f"attempt 1 on refs/heads/validate/pr-42, commit {HEAD[:12]}, 2025-06-01T12:00:00Z",
    ]
    assert result.flaky == ()


def test_a_flaky_pass_counts_and_is_reported(tmp_path: Path, signer: Signer) -> None:
    tests = [entry("test_mm", attempts=2, flaky=True), entry("test_ok")]
    cuda = evidence(tmp_path, signer, "cuda", report=smoke_report("cuda", tests=tests))
    result = _gate([cuda, evidence(tmp_path, signer, "rocm")], signer)
    assert result.flaky == ("cuda-amd64: tests/smoke/test_gpu.py::test_mm",)
    assert result.lines()[0].startswith(
        "cuda-amd64: 2 passed, 0 skipped, 1 flaky: tests/smoke/test_gpu.py::test_mm on 1x NVIDIA H200"
    )


EVENT_HELP = (
    "only the default branch's .github/workflows/validate-gpu.yml (workflow_run) signs evidence: "
    "push the reviewed PR head to refs/heads/validate/pr-42 in twinbuild/twinbuild"
)


@pytest.mark.parametrize("event", ["pull_request", "pull_request_target"])
def test_pull_request_events_are_refused(tmp_path: Path, signer: Signer, event: str) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["run"].update(event=event))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: event: run event {event!r} cannot count (the PR chose the code (and, under "
        f"pull_request, the workflow file)); {EVENT_HELP}"
    ]


def test_a_push_run_is_refused_it_ran_the_pushed_branchs_own_workflow(
    tmp_path: Path, signer: Signer
) -> None:
    """The old design: validate.yml on push signed; its file was the PR's own copy."""
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["run"].update(event="push"))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: event: run event 'push' cannot count (a push runs the pushed branch's own "
        f"workflow file, which the PR wrote); {EVENT_HELP}"
    ]


@pytest.mark.parametrize("event", ["issue_comment", "workflow_dispatch", "schedule"])
def test_other_events_are_refused(tmp_path: Path, signer: Signer, event: str) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["run"].update(event=event))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: event: run event {event!r} cannot count (that event runs code or a workflow "
        f"the default branch did not choose); {EVENT_HELP}"
    ]


@pytest.mark.parametrize(
    "workflow_ref",
    [
        f"{REPO}/.github/workflows/validate.yml@refs/heads/main",  # another file
        f"{REPO}/.github/workflows/validate-gpu.yml@refs/heads/validate/pr-42",  # the PR's copy
        "mallory/twinbuild/.github/workflows/validate-gpu.yml@refs/heads/main",  # another repo
        ".github/workflows/validate-gpu.yml@refs/heads/main",
    ],
)
def test_evidence_from_another_workflow_is_refused(
    tmp_path: Path, signer: Signer, workflow_ref: str
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["run"].update(workflow_ref=workflow_ref))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: workflow: evidence comes from {workflow_ref!r}, not twinbuild/twinbuild/"
        ".github/workflows/validate-gpu.yml@refs/heads/main; only the default branch's "
        "validation workflow signs evidence: push the reviewed PR head to "
        "refs/heads/validate/pr-42"
    ]


def test_the_repository_name_in_the_workflow_ref_ignores_case(
    tmp_path: Path, signer: Signer
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    ref = "TwinBuild/TwinBuild/.github/workflows/validate-gpu.yml@refs/heads/main"
    _edit(cuda, signer, lambda p: p["run"].update(workflow_ref=ref))
    assert len(_gate([cuda, rocm], signer).accepted) == 2


@pytest.mark.parametrize(
    ("field", "name", "repo_id"),
    [
        ("head", "mallory/twinbuild", REPO_ID),  # same id, other name
        ("head", REPO, 666),  # same name (a recreated repo), other id
        ("repository", "mallory/twinbuild", 666),
    ],
)
def test_evidence_from_another_repository_is_refused(
    tmp_path: Path, signer: Signer, field: str, name: str, repo_id: int
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    keys = (
        ("head_repository", "head_repository_id")
        if field == "head"
        else ("repository", "repository_id")
    )
    _edit(cuda, signer, lambda p: p["source"].update({keys[0]: name, keys[1]: repo_id}))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: repository: evidence comes from {name!r} (id {repo_id}), not "
        f"'twinbuild/twinbuild' (id {REPO_ID}); {FORK_HELP}"
    ]


def test_a_real_fork_pull_request_run_gets_both_reasons(tmp_path: Path, signer: Signer) -> None:
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {
                    "number": 42,
                    "head": {"repo": {"full_name": "mallory/twinbuild", "id": 666}},
                }
            }
        )
    )
    env = github_env(GITHUB_EVENT_NAME="pull_request", GITHUB_EVENT_PATH=str(event))
    paths = []
    for platform in ("cuda", "rocm"):
        # What record writes in a fork's pull_request run, signed by a stolen key: the signer
        # itself refuses to sign a statement whose head repository is not this one.
        report = write_json(tmp_path / f"{platform}.smoke.json", smoke_report(platform))
        statement = record(report, env=env, now=NOW, validated=validated(smoke_report(platform)))
        payload = statement.to_dict()
        payload["predicate"]["source"]["ref"] = "refs/pull/42/merge"
        paths.append(resign(tmp_path / f"{platform}.dsse.json", payload, signer))
    refusals = _refusals(paths, signer)
    assert [r.split(": ")[1] for r in refusals] == ["event", "repository", "ref"] * 2


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/feature/x",
        "refs/heads/main",  # the default branch: not this PR's validation
        "refs/heads/validate/pr-43",  # another PR's branch
        "refs/heads/validate/pr-420",
        "refs/heads/validate/pr-42-retry",
        "refs/heads/validate/x/pr-42",
    ],
)
def test_evidence_from_another_ref_is_refused(tmp_path: Path, signer: Signer, ref: str) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["source"].update(ref=ref))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: ref: evidence validated {ref!r}, not refs/heads/validate/pr-42; evidence "
        "counts only for the PR whose branch it validated: push the reviewed PR head to "
        "refs/heads/validate/pr-42"
    ]


def test_evidence_that_names_another_pr_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["source"].update(pr=43))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: pr: evidence names PR 43 but validated 'refs/heads/validate/pr-42'; a "
        "statement must name the PR of its branch: validate again (refs/heads/validate/pr-42)"
    ]


def test_evidence_of_another_prs_validation_is_refused(tmp_path: Path, signer: Signer) -> None:
    paths = [evidence(tmp_path, signer, p, pr=43) for p in ("cuda", "rocm")]
    assert [r.split(": ")[1] for r in _refusals(paths, signer)] == ["ref", "ref"]


def test_both_platforms_must_be_one_commits_evidence(tmp_path: Path, signer: Signer) -> None:
    policy = replace(POLICY, head_inputs=HEAD_INPUTS)
    cuda = evidence(tmp_path, signer, "cuda")
    rocm = evidence(tmp_path, signer, "rocm", commit="e" * 40)
    assert _refusals([cuda, rocm], signer, policy) == [
        f"commit: the evidence is for 2 commits (cuda-amd64 for {HEAD[:12]}, rocm-amd64 for "
        f"{'e' * 12}); the images count only from one validation of one commit: push the "
        "head to validate/pr-42 again"
    ]


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/validate/pr-1;rm -rf ~",
        "refs/heads/validate/$(reboot)",
        "refs/heads/validate/a`id`",
        "refs/heads/validate/../main",
    ],
)
def test_a_ref_with_shell_metacharacters_is_refused(
    tmp_path: Path, signer: Signer, ref: str
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["source"].update(ref=ref))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: ref: {ref!r} is not a plain branch name (only A-Z a-z 0-9 . _ / - are "
        "allowed); push to a branch like validate/pr-42"
    ]


def test_evidence_for_another_commit_is_refused(tmp_path: Path, signer: Signer) -> None:
    paths = _both(tmp_path, signer)
    new_head = "f" * 40
    assert _refusals(paths, signer, replace(POLICY, head_commit=new_head)) == [
        f"{path}: commit: evidence is for commit {HEAD}, the PR head is {new_head} and no "
        "inputs hash at the PR head was given to compare; push the new head to validate/pr-42 "
        "to validate it"
        for path in paths
    ]


def test_another_commit_with_the_same_inputs_counts(tmp_path: Path, signer: Signer) -> None:
    policy = replace(POLICY, head_commit="f" * 40, head_inputs=HEAD_INPUTS)
    result = _gate(_both(tmp_path, signer), signer, policy)
    assert [a.matched_by for a in result.accepted] == ["inputs", "inputs"]
    assert "with the same inputs as the PR head" in result.lines()[0]


def test_another_commit_with_other_inputs_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    changed = {image("cuda"): "sha256:" + "e" * 64, image("rocm"): INPUTS["rocm"]}
    policy = replace(POLICY, head_commit="f" * 40, head_inputs=changed)
    assert _refusals([cuda, rocm], signer, policy) == [
        f"{cuda}: inputs: evidence tested inputs {INPUTS['cuda']} (commit {HEAD[:12]}); the PR "
        f"head {'f' * 12} has {changed[image('cuda')]}; push the new head to validate/pr-42 to "
        "validate it"
    ]


def test_evidence_for_the_head_itself_must_have_its_inputs(tmp_path: Path, signer: Signer) -> None:
    """The head's own evidence counts for its inputs only: if the signer's hash (of an older
    default branch) differs from what this gate computes, the evidence is revalidated."""
    cuda, rocm = _both(tmp_path, signer)
    changed = {image("cuda"): "sha256:" + "e" * 64, image("rocm"): INPUTS["rocm"]}
    assert [
        r.split(": ")[1]
        for r in _refusals([cuda, rocm], signer, replace(POLICY, head_inputs=changed))
    ] == ["inputs"]


def test_a_lagging_head_is_told_to_rebase(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    moved = {image("cuda"): "sha256:" + "e" * 64, image("rocm"): "sha256:" + "9" * 64}
    landing = f"the merge of the head {HEAD[:12]} into the base {'b' * 12}"
    policy = replace(POLICY, head_inputs=moved, landing=landing)
    assert _refusals([cuda, rocm], signer, policy) == [
        f"{path}: inputs: evidence tested inputs {INPUTS[p]} (commit {HEAD[:12]}); {landing} "
        f"has {moved[image(p)]}; the head lags the base, whose changes moved the image inputs, so that "
        "merge was never built: rebase the PR on the base and push the new head to "
        "validate/pr-42"
        for path, p in zip((cuda, rocm), MINI_VARIANTS, strict=True)
    ]


def test_a_superseded_attempt_is_refused(tmp_path: Path, signer: Signer) -> None:
    first = evidence(tmp_path, signer, "cuda", name="cuda-1")
    failed = smoke_report("cuda", tests=[entry("test_mm", "failed")])
    second = evidence(
        tmp_path,
        signer,
        "cuda",
        name="cuda-2",
        report=failed,
        env=github_env(GITHUB_RUN_ATTEMPT="2"),
    )
    assert _refusals([first, second, evidence(tmp_path, signer, "rocm")], signer) == [
        f"{second}: results: the run failed (1 failed: tests/smoke/test_gpu.py::test_mm); "
        "fix and validate again",
        f"{first}: attempt: run 9001 attempt 1 is superseded by attempt 2; only the latest "
        "attempt counts",
    ]


def test_a_wrong_key_is_refused(tmp_path: Path, signer: Signer) -> None:
    other = Signer.new()
    cuda = evidence(tmp_path, other, "cuda")
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer) == [
        f"{cuda}: signature: key {other.keyid[:16]} is not trusted (not in evidence/keys/); "
        "sign with the workflow's key, or add its public key by a PR",
        "cuda-amd64: missing: no signed evidence of cuda (linux/amd64); the gate requires "
        'every architecture of every variant with validate = "pr": add '
        "evidence/cuda-amd64.dsse.json from the validation run",
    ]


def test_a_payload_edited_after_signing_is_refused(tmp_path: Path, signer: Signer) -> None:
    failed = smoke_report("cuda", tests=[entry("test_mm", "failed")])
    cuda = evidence(tmp_path, signer, "cuda", report=failed)
    envelope = json.loads(cuda.read_text())
    payload = payload_of(cuda)
    payload["predicate"]["results"] = payload_of(evidence(tmp_path, signer, "rocm", name="x"))[
        "predicate"
    ]["results"]
    assert payload["predicate"]["results"]["verdict"] == "passed"
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    cuda.write_text(json.dumps(envelope))
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer)[0] == (
        f"{cuda}: signature: does not verify with trusted key {signer.keyid[:16]}; the file "
        "changed after signing, re-run the validation to get fresh evidence"
    )


def test_a_swapped_payload_type_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda = evidence(tmp_path, signer, "cuda")
    envelope = json.loads(cuda.read_text())
    envelope["payloadType"] = "application/vnd.dsse.foreign+json"
    cuda.write_text(json.dumps(envelope))
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer)[0] == (
        f"{cuda}: payloadType 'application/vnd.dsse.foreign+json' is not "
        "'application/vnd.in-toto+json'; only in-toto statements signed by `twinbuild evidence "
        "sign` count"
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "predicateType",
            "https://slsa.dev/provenance/v1",
            "statement.predicateType: 'https://slsa.dev/provenance/v1' is not "
            "'https://twinbuild.dev/gpu-smoke/v2'; sign the record `twinbuild evidence record` wrote",
        ),
        (
            "_type",
            "https://in-toto.io/Statement/v0.1",
            "statement._type: 'https://in-toto.io/Statement/v0.1' is not "
            "'https://in-toto.io/Statement/v1'; only in-toto Statement v1 records count",
        ),
    ],
)
def test_a_swapped_statement_type_is_refused(
    tmp_path: Path, signer: Signer, key: str, value: str, message: str
) -> None:
    cuda = evidence(tmp_path, signer, "cuda")
    payload = payload_of(cuda)
    payload[key] = value
    resign(cuda, payload, signer)
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer)[0] == f"{cuda}: {message}"


def test_an_image_digest_mismatch_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    other = "registry.example/twinbuild/cuda@sha256:" + "9" * 64
    policy = replace(POLICY, images={image("cuda"): other, image("rocm"): IMAGE_REFS["rocm"]})
    assert _refusals([cuda, rocm], signer, policy) == [
        f"{cuda}: image: the cuda (linux/amd64) image tested was sha256:{'3' * 64}, not {other}; evidence "
        "counts only for the image it tested"
    ]


def test_an_expected_image_given_as_a_tag_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    policy = replace(POLICY, images={image("rocm"): "registry.example/twinbuild/rocm:v1"})
    assert _refusals([cuda, rocm], signer, policy) == [
        f"{rocm}: image: 'registry.example/twinbuild/rocm:v1' is a tag without a digest; tags move, "
        "evidence binds digests: pass repository@sha256:<64 hex>"
    ]


def test_a_subject_digest_that_disagrees_with_the_build_is_malformed(
    tmp_path: Path, signer: Signer
) -> None:
    cuda = evidence(tmp_path, signer, "cuda")
    payload = payload_of(cuda)
    payload["subject"][0]["digest"]["sha256"] = "9" * 64
    resign(cuda, payload, signer)
    with pytest.raises(ConfigError) as info:
        _gate([cuda], signer)
    assert str(info.value) == (
        f"{cuda}: statement.subject: image digest {'9' * 64} is not the digest predicate.build "
        f"records ({'3' * 64})"
    )


def test_a_manifest_mismatch_is_refused(tmp_path: Path, signer: Signer) -> None:
    paths = _both(tmp_path, signer)
    head_manifest = "sha256:" + "5" * 64
    assert _refusals(paths, signer, replace(POLICY, manifest_digest=head_manifest)) == [
        f"{path}: manifest: evidence tested pins/manifest.toml {MANIFEST}, the PR head has "
        f"{head_manifest}; validate the PR head"
        for path in paths
    ]
    assert len(_gate(paths, signer, replace(POLICY, manifest_digest=MANIFEST)).accepted) == 2


def test_missing_rocm_evidence_is_refused(tmp_path: Path, signer: Signer) -> None:
    assert _refusals([evidence(tmp_path, signer, "cuda")], signer) == [
        "rocm-amd64: missing: no signed evidence of rocm (linux/amd64); the gate requires "
        'every architecture of every variant with validate = "pr": add '
        "evidence/rocm-amd64.dsse.json from the validation run"
    ]


def test_cuda_counted_twice_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda = evidence(tmp_path, signer, "cuda")
    posing = tmp_path / "rocm.dsse.json"
    shutil.copy(cuda, posing)
    assert _refusals([cuda, posing], signer) == [
        f"cuda-amd64: duplicate: evidence of cuda (linux/amd64) appears 2 times ({cuda}, "
        f"{posing}); each image counts once, keep one file per image",
        "rocm-amd64: missing: no signed evidence of rocm (linux/amd64); the gate requires "
        'every architecture of every variant with validate = "pr": add '
        "evidence/rocm-amd64.dsse.json from the validation run",
    ]


def test_cuda_from_two_runs_is_refused(tmp_path: Path, signer: Signer) -> None:
    one = evidence(tmp_path, signer, "cuda", name="a")
    two = evidence(tmp_path, signer, "cuda", name="b", env=github_env(GITHUB_RUN_ID="9002"))
    refusals = _refusals([one, two, evidence(tmp_path, signer, "rocm")], signer)
    assert refusals == [
        f"cuda-amd64: duplicate: evidence of cuda (linux/amd64) appears 2 times ({one}, {two}); "
        "each image counts once, keep one file per image"
    ]


def test_nvidia_results_for_rocm_are_refused(tmp_path: Path, signer: Signer) -> None:
    report = smoke_report(
        "rocm",
        gpu={
            "vendor": "nvidia",
            "model": "NVIDIA H200",
            "driver": "570.86",
            "runtime": "12.9",
            "count": 1,
        },
    )
    rocm = evidence(tmp_path, signer, "rocm", report=report)
    assert _refusals([evidence(tmp_path, signer, "cuda"), rocm], signer) == [
        f"{rocm}: gpu: rocm (linux/amd64) evidence ran on a nvidia GPU (NVIDIA H200); rocm needs "
        "amd: run its job on a amd runner"
    ]


def test_a_run_without_gpu_is_refused(tmp_path: Path, signer: Signer) -> None:
    rocm = evidence(tmp_path, signer, "rocm", report=smoke_report("rocm", gpu=None))
    assert _refusals([evidence(tmp_path, signer, "cuda"), rocm], signer) == [
        f"{rocm}: gpu: the smoke run saw no GPU; run it on a amd GPU runner"
    ]


def _forge_passed(tests: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
    def change(p: dict[str, Any]) -> None:
        outcomes = [t["outcome"] for t in tests]
        p["results"] = {
            "verdict": "passed",
            "tests": tests,
            "counts": {
                "passed": outcomes.count("passed"),
                "failed": outcomes.count("failed"),
                "skipped": outcomes.count("skipped"),
                "flaky": 0,
            },
        }

    return change


@pytest.mark.parametrize(
    ("tests", "message"),
    [
        ([], "zero tests ran; no tests is not evidence, fix the run"),
        (
            [entry("a", "skipped"), entry("b", "skipped")],
            "all 2 tests were skipped; skipped is not evidence, run on a GPU runner",
        ),
        (
            [entry("a", gpu=False)],
            "no GPU test (marker gpu) passed; only GPU tests are GPU evidence",
        ),
        (
            [entry("a"), entry("b", "failed")],
            "the run failed (1 failed: tests/smoke/test_gpu.py::b); fix and validate again",
        ),
    ],
)
def test_a_passed_verdict_without_passing_gpu_tests_is_refused(
    tmp_path: Path, signer: Signer, tests: list[dict[str, Any]], message: str
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, _forge_passed(tests))
    assert _refusals([cuda, rocm], signer) == [f"{cuda}: results: {message}"]


def test_counts_that_disagree_with_tests_are_refused(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["results"]["counts"].update(passed=10))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: results: counts disagree with the tests listed; re-record"
    ]


def test_a_failed_verdict_is_refused_even_if_tests_passed(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["results"].update(verdict="failed"))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: results: the record's verdict is failed; validate again"
    ]


def test_expired_evidence_is_refused(tmp_path: Path, signer: Signer) -> None:
    old = NOW - timedelta(days=15)
    cuda = evidence(tmp_path, signer, "cuda", now=old)
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer) == [
        f"{cuda}: created_at: evidence from 2025-05-17T12:00:00Z is older than 14 days; re-run "
        "the validation (push to validate/pr-42 again)"
    ]
    policy = replace(POLICY, max_age=timedelta(days=30))
    assert len(_gate([cuda, evidence(tmp_path, signer, "rocm")], signer, policy).accepted) == 2


def test_future_evidence_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda = evidence(tmp_path, signer, "cuda", now=NOW + timedelta(hours=1))
    assert _refusals([cuda, evidence(tmp_path, signer, "rocm")], signer) == [
        f"{cuda}: created_at: evidence claims 2025-06-01T13:00:00Z, later than now "
        "(2025-06-01T12:00:00Z); a record from the future is refused, check the runner's clock"
    ]
    skewed = evidence(tmp_path, signer, "rocm", now=NOW + timedelta(minutes=4))
    assert len(_gate([evidence(tmp_path, signer, "cuda"), skewed], signer).accepted) == 2


def test_a_local_profile_build_is_refused(tmp_path: Path, signer: Signer) -> None:
    cuda, rocm = _both(tmp_path, signer)
    _edit(cuda, signer, lambda p: p["build"].update(profile="local"))
    assert _refusals([cuda, rocm], signer) == [
        f"{cuda}: profile: evidence is for the local profile, the gate needs production; "
        "validate the production images"
    ]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b"", "empty file; re-run the step that writes it"),
        (lambda b: b[: len(b) // 2], "the JSON document ends early"),
        (lambda b: b + b'{"payload": ""}', "trailing data after the JSON document"),
        (lambda b: b.replace(b"{", b'{"payloadType": "x", ', 1), "duplicate key 'payloadType'"),
        (lambda b: b.replace(b'"signatures"', b'"n": NaN, "signatures"'), "NaN is not JSON"),
        (lambda b: b.replace(b'"signatures"', b'"\xff": 1, "signatures"'), "is not UTF-8"),
        (
            lambda b: b + b" " * (4 * 1024 * 1024),
            "over the 4194304-byte limit for the evidence file",
        ),
    ],
)
def test_malformed_files_are_config_errors(
    tmp_path: Path, signer: Signer, mutate: Callable[[bytes], bytes], message: str
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    cuda.write_bytes(mutate(cuda.read_bytes()))
    with pytest.raises(ConfigError) as info:
        _gate([cuda, rocm], signer)
    assert not isinstance(info.value, EvidenceRefused)
    assert info.value.exit_code == 2
    assert str(info.value).startswith(str(cuda))
    assert message in str(info.value)


def test_duplicate_keys_inside_the_signed_payload_are_refused(
    tmp_path: Path, signer: Signer
) -> None:
    cuda, rocm = _both(tmp_path, signer)
    payload = payload_of(cuda)
    text = (
        json.dumps(payload)
        .replace('"verdict": "passed"', '"verdict": "failed", "verdict": "passed"')
        .encode()
    )
    envelope = dsse.sign(text, signer.key)
    cuda.write_text(json.dumps(envelope.to_dict()))
    with pytest.raises(ConfigError) as info:
        _gate([cuda, rocm], signer)
    assert str(info.value) == (
        f"{cuda}: payload: duplicate key 'verdict'; readers disagree on which one counts, so it "
        "is refused"
    )
