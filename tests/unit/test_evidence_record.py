"""`evidence record`: a statement from a smoke report and the GitHub Actions environment, about the
commit the validation workflow's own code established (`Validated`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.evidence_builders import (
    HEAD,
    IMAGE_REFS,
    INPUTS,
    MANIFEST,
    NOW,
    REPO,
    REPO_ID,
    WORKFLOW_REF,
    entry,
    github_env,
    smoke_report,
    validated,
    write_json,
)
from twinbuild.errors import ConfigError
from twinbuild.evidence import record, save
from twinbuild.evidence.statement import PREDICATE_TYPE, STATEMENT_TYPE, Statement
from twinbuild.util import strictjson


def _record(tmp_path: Path, report: dict[str, Any], **env: str) -> Statement:
    variant = report.get("variant")
    about = validated(smoke_report(variant if variant in ("cuda", "rocm") else "cuda"))
    path = write_json(tmp_path / "smoke.json", report)
    return record(path, env=github_env(**env), now=NOW, validated=about)


def test_statement_from_a_passing_run(tmp_path: Path) -> None:
    statement = _record(tmp_path, smoke_report("cuda"))
    data = statement.to_dict()
    assert data["_type"] == STATEMENT_TYPE
    assert data["predicateType"] == PREDICATE_TYPE
    assert data["subject"] == [
        {"name": "registry.example/twinbuild/cuda", "digest": {"sha256": "3" * 64}},
        {"name": "pins/manifest.toml", "digest": {"sha256": "a" * 64}},
    ]
    p = data["predicate"]
    assert (p["variant"], p["arch"]) == ("cuda", "linux/amd64")
    assert p["source"] == {
        "repository": REPO,
        "repository_id": REPO_ID,
        "head_repository": REPO,
        "head_repository_id": REPO_ID,
        "commit": HEAD,
        "ref": "refs/heads/validate/pr-42",
        "pr": 42,
    }
    assert p["run"] == {
        "event": "workflow_run",
        "workflow_ref": WORKFLOW_REF,
        "run_id": 9001,
        "run_attempt": 1,
        "actor": "maintainer",
        "runner_name": "gpu-h200-1",
        "runner_environment": "self-hosted",
    }
    assert p["build"] == {
        "profile": "production",
        "inputs_hash": INPUTS["cuda"],
        "base_digest": "sha256:" + "b" * 64,
        "image_id": "sha256:" + "1" * 64,
        "image_ref": IMAGE_REFS["cuda"],
        "manifest_digest": MANIFEST,
        "lock_digest": None,  # the mini project keeps no locks
    }
    assert p["gpu"]["model"] == "NVIDIA H200"
    assert p["results"]["verdict"] == "passed"
    assert p["results"]["counts"] == {"passed": 2, "failed": 0, "skipped": 0, "flaky": 0}
    assert p["created_at"] == "2025-06-01T12:00:00Z"
    assert Statement.from_dict(data, source="s") == statement


def test_unpushed_image_is_named_by_platform_and_id(tmp_path: Path) -> None:
    report = smoke_report("rocm")
    report["image"]["digest"] = None
    subject = _record(tmp_path, report).image_subject()
    assert (subject.name, subject.sha256) == ("twinbuild/rocm", "2" * 64)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"tests": [entry("a"), entry("b", "failed")]}, "a test failed"),
        ({"gpu": None}, "no GPU was seen"),
        ({"tests": [entry("a", "skipped"), entry("b", "skipped")]}, "all skipped"),
        ({"tests": []}, "zero tests"),
        ({"tests": [entry("a", gpu=False)]}, "no GPU test"),
        (
            {
                "gpu": {
                    "vendor": "amd",
                    "model": "MI300X",
                    "driver": "x",
                    "runtime": "6.4",
                    "count": 1,
                }
            },
            "wrong vendor",
        ),
    ],
)
def test_a_run_that_did_not_validate_is_recorded_failed(
    tmp_path: Path, change: dict[str, Any], why: str
) -> None:
    report = smoke_report("cuda", **change)
    if "tests" in change:
        report["counts"] = {
            k: sum(1 for t in change["tests"] if t["outcome"] == k)
            for k in ("passed", "failed", "skipped")
        } | {"flaky": 0}
    assert _record(tmp_path, report).predicate.results.verdict == "failed", why


def test_counts_that_disagree_with_tests_are_refused(tmp_path: Path) -> None:
    report = smoke_report("cuda", tests=[entry("a", "failed")])
    report["counts"] = {"passed": 1, "failed": 0, "skipped": 0, "flaky": 0}
    with pytest.raises(ConfigError) as info:
        _record(tmp_path, report)
    assert str(info.value) == (
        f"{tmp_path / 'smoke.json'}: report.counts: 1 passed, 0 failed, 0 skipped, 0 flaky "
        "disagrees with its tests (0 passed, 1 failed, 0 skipped, 0 flaky); the report is "
        "inconsistent, re-run the smoke tests"
    )


def test_a_tag_without_digest_is_refused(tmp_path: Path) -> None:
    report = smoke_report("cuda")
    report["image"]["digest"] = "registry.example/twinbuild/cuda:latest"
    with pytest.raises(ConfigError) as info:
        _record(tmp_path, report)
    assert str(info.value) == (
        f"{tmp_path / 'smoke.json'}: report.image.digest: 'registry.example/twinbuild/cuda:latest' is a "
        "tag without a digest; tags move, evidence binds digests: push the image and record "
        "repository@sha256:..."
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": 1}, "report.schema: 1 is not 2; update twinbuild"),
        (
            {"arch": "linux/s390x"},
            "report.arch: 'linux/s390x' is not one of linux/amd64, linux/arm64",
        ),
        ({"platform": "cuda"}, "report.platform: unknown key"),
        (
            {"manifest_digest": "abc"},
            "report.manifest_digest: 'abc' is not a digest like sha256:<64 hex>",
        ),
        ({"counts": "3"}, "report.counts: expected an object, got str"),
        ({"extra": 1}, "report.extra: unknown key"),
        ({"gpus": None}, "report.gpus: unknown key; perhaps you meant 'gpu'?"),
    ],
)
def test_malformed_reports(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    report = smoke_report("cuda")
    report.update(change)
    with pytest.raises(ConfigError) as info:
        _record(tmp_path, report)
    assert str(info.value) == f"{tmp_path / 'smoke.json'}: {message}"


def test_a_truncated_report_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps(smoke_report("cuda"))[:50])
    with pytest.raises(ConfigError, match="ends early"):
        record(path, env=github_env(), now=NOW, validated=validated(smoke_report("cuda")))


def test_missing_environment_variable(tmp_path: Path) -> None:
    env = github_env()
    del env["GITHUB_RUN_ATTEMPT"]
    report = smoke_report()
    path = write_json(tmp_path / "s.json", report)
    with pytest.raises(ConfigError) as info:
        record(path, env=env, now=NOW, validated=validated(report))
    assert str(info.value) == (
        "$GITHUB_RUN_ATTEMPT is not set; `evidence record` runs inside a GitHub Actions job "
        "(set the GITHUB_* variables by hand for a dry run)"
    )


def test_the_source_is_the_validated_commit_not_the_runs_own(tmp_path: Path) -> None:
    """workflow_run runs on the default branch: GITHUB_SHA and GITHUB_REF are main's, never what
    the statement is about."""
    statement = _record(tmp_path, smoke_report(), GITHUB_REF="refs/heads/validate/x;curl|sh")
    assert (statement.predicate.source.commit, statement.predicate.source.ref) == (
        HEAD,
        "refs/heads/validate/pr-42",
    )


def test_the_inputs_hash_is_the_computed_one_not_the_image_label(tmp_path: Path) -> None:
    report = smoke_report("cuda")
    report["image"]["inputs_hash"] = "sha256:" + "f" * 64  # what the PR's build labelled
    about = validated(smoke_report("cuda"))
    path = write_json(tmp_path / "smoke.json", report)
    statement = record(path, env=github_env(), now=NOW, validated=about)
    assert statement.predicate.build.inputs_hash == INPUTS["cuda"]


def test_a_smoke_run_of_another_manifest_is_refused(tmp_path: Path) -> None:
    report = smoke_report("cuda", manifest_digest="sha256:" + "e" * 64)
    with pytest.raises(ConfigError) as info:
        record(
            write_json(tmp_path / "smoke.json", report), env=github_env(), now=NOW,
            validated=validated(smoke_report("cuda")),
        )  # fmt: skip
    assert str(info.value).endswith(
        f"report.manifest_digest: the smoke run checked pins/manifest.toml sha256:{'e' * 64}, "
        f"commit {HEAD} has {MANIFEST}; smoke the image against the validated commit's manifest"
    )


def test_a_pull_request_run_records_the_fork_as_head(tmp_path: Path) -> None:
    event = write_json(
        tmp_path / "event.json",
        {
            "pull_request": {
                "number": 7,
                "head": {"repo": {"full_name": "mallory/twinbuild", "id": 666}},
            },
        },
    )
    statement = _record(
        tmp_path,
        smoke_report(),
        GITHUB_EVENT_NAME="pull_request",
        GITHUB_EVENT_PATH=str(event),
        GITHUB_REF="refs/pull/7/merge",
    )
    source = statement.predicate.source
    assert (source.head_repository, source.head_repository_id) == ("mallory/twinbuild", 666)


def test_save_writes_a_statement_that_parses_back(tmp_path: Path) -> None:
    statement = _record(tmp_path, smoke_report("rocm"))
    save(statement, tmp_path / "rocm.statement.json")
    loaded = strictjson.load(tmp_path / "rocm.statement.json")
    assert Statement.from_dict(loaded, source="s") == statement
