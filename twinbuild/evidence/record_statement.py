"""Build the evidence statement from one smoke report and the GitHub Actions environment.

The verdict is computed here from the tests, never copied: a report whose counts disagree with its
tests is refused, and a run with no GPU, a failed test, or no GPU test passed is recorded as
``failed``. So a ``passed`` record exists only for a run whose GPU tests passed.

What the statement says it is about comes from :class:`~twinbuild.evidence.statement.Validated`,
never from the image or the PR's build: the commit and PR the trigger check established, and the
commit's inputs hash and manifest digest as this (default-branch) code computes them from git
objects. The image's own ``org.twinbuild.inputs-hash`` label was written by the PR's build code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.evidence.statement import (
    COMMIT_RE,
    DIGEST_RE,
    IMAGE_REF_RE,
    MANIFEST_SUBJECT,
    Build,
    Predicate,
    Results,
    Run,
    Source,
    Statement,
    Subject,
    TestResult,
    Validated,
    Verdict,
)
from twinbuild.manifest.model import Vendor
from twinbuild.smoke.run_summary import Counts, Gpu
from twinbuild.smoke.smoke_report import SmokeReport
from twinbuild.util import github, strictjson, values
from twinbuild.util.atomic import write_atomic

PR_EVENTS = ("pull_request", "pull_request_target")
SAFE_REF_RE = re.compile(r"refs/[A-Za-z0-9._/-]+")


def record(
    report: Path, *, env: Mapping[str, str], now: datetime, validated: Validated
) -> Statement:
    """The statement for the smoke run in ``report`` of ``validated``, in the job ``env`` names."""
    smoke = SmokeReport.load(report)  # the report's own shape: types, keys, counts against tests
    image, profile = smoke.image_key, smoke.profile
    where = f"{report}: report"
    if image not in validated.inputs:
        known = ", ".join(i.name for i in validated.inputs)
        raise ConfigError(
            f"{report}: report.variant: {image} is no image of commit {validated.commit} "
            f"(its manifest has {known}); smoke an image of the validated commit"
        )
    vendor = validated.vendors[image.variant]
    digest = "a digest like sha256:<64 hex>"
    image_id = _match(smoke.image.id, f"{where}.image.id", DIGEST_RE, digest)
    image_ref = _image_ref(smoke.image.digest, f"{where}.image.digest")
    # Not smoke.image.inputs_hash: the PR's build wrote that label; the commit's is computed.
    base_digest = _match(smoke.image.base_digest, f"{where}.image.base_digest", DIGEST_RE, digest)
    manifest_digest = _match(smoke.manifest_digest, f"{where}.manifest_digest", DIGEST_RE, digest)
    if manifest_digest != validated.manifest_digest:
        raise ConfigError(
            f"{report}: report.manifest_digest: the smoke run checked pins/manifest.toml "
            f"{manifest_digest}, commit {validated.commit} has {validated.manifest_digest}; "
            "smoke the image against the validated commit's manifest"
        )
    seen = smoke.gpu
    gpu = None
    if seen is not None:
        gpu = Gpu(
            vendor=seen.vendor, model=seen.model, driver=seen.driver, runtime=seen.runtime,
            count=seen.count,
        )  # fmt: skip
    # A failure's message and what the image holds stay in the smoke report, not the evidence.
    tests = tuple(
        TestResult(
            id=t.id,
            outcome=t.outcome,
            attempts=t.attempts,
            flaky=t.flaky,
            duration_s=t.duration_s,
            markers=t.markers,
        )
        for t in smoke.tests
    )
    counts = Counts.of(tests)
    build = Build(
        profile=profile,
        inputs_hash=validated.inputs[image],
        base_digest=base_digest,
        image_id=image_id,
        image_ref=image_ref,
        manifest_digest=manifest_digest,
        lock_digest=validated.locks.get(image),
    )
    source, run = _from_env(env, validated)
    verdict: Verdict = "passed" if _validated(vendor, gpu, tests) else "failed"
    predicate = Predicate(
        variant=image.variant,
        arch=image.arch,
        vendor=vendor,
        source=source,
        run=run,
        build=build,
        gpu=gpu,
        results=Results(verdict=verdict, tests=tests, counts=counts),
        created_at=now,
    )
    image_name = image_ref.split("@", 1)[0] if image_ref else f"twinbuild/{image.variant}"
    subjects = (
        Subject(name=image_name, sha256=build.image_sha256()),
        Subject(name=MANIFEST_SUBJECT, sha256=manifest_digest.removeprefix("sha256:")),
    )
    return Statement(subject=subjects, predicate=predicate)


def save(statement: Statement, path: Path) -> None:
    """Write the unsigned statement (atomically) for `evidence sign`."""
    write_atomic(path, strictjson.dumps(statement.to_dict()).encode("utf-8"))


def _validated(vendor: Vendor, gpu: Gpu | None, tests: tuple[TestResult, ...]) -> bool:
    return (
        gpu is not None
        and gpu.count > 0
        and gpu.vendor == vendor
        and not any(t.outcome == "failed" for t in tests)
        and any(t.gpu and t.outcome == "passed" for t in tests)
    )


def _match(value: str | None, where: str, pattern: re.Pattern[str], what: str) -> str:
    """A report value evidence needs, in the form it needs (host mode has no image: refused)."""
    if value is None:
        raise ConfigError(f"{where}: expected a string, got null")
    if not pattern.fullmatch(value):
        raise ConfigError(f"{where}: {value!r} is not {what}")
    return value


def _image_ref(ref: str | None, where: str) -> str | None:
    if ref is not None and "@" not in ref:
        raise ConfigError(
            f"{where}: {ref!r} is a tag without a digest; tags move, evidence "
            "binds digests: push the image and record repository@sha256:..."
        )
    return None if ref is None else _match(ref, where, IMAGE_REF_RE, "repository@sha256:<64 hex>")


def _env(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ConfigError(
            f"${name} is not set; `evidence record` runs inside a GitHub Actions job "
            "(set the GITHUB_* variables by hand for a dry run)"
        )
    return value


def _env_int(env: Mapping[str, str], name: str) -> int:
    return values.whole(_env(env, name), name=f"${name}", low=1, high=values.MAX_ID)


def _from_env(env: Mapping[str, str], validated: Validated) -> tuple[Source, Run]:
    repository = _env(env, "GITHUB_REPOSITORY")
    repository_id = _env_int(env, "GITHUB_REPOSITORY_ID")
    if not COMMIT_RE.fullmatch(validated.commit):
        raise ConfigError(f"--commit: {validated.commit!r} is not a full 40-hex commit")
    event = _env(env, "GITHUB_EVENT_NAME")
    head_repository, head_repository_id = repository, repository_id
    if event in PR_EVENTS:  # recorded as it is, so the gate names the fork it came from
        head_repository, head_repository_id, _ = _pr_head(env)
    source = Source(
        repository=repository,
        repository_id=repository_id,
        head_repository=head_repository,
        head_repository_id=head_repository_id,
        commit=validated.commit,
        ref=validated.ref,
        pr=validated.pr,
    )
    run = Run(
        event=event,
        workflow_ref=_env(env, "GITHUB_WORKFLOW_REF"),
        run_id=_env_int(env, "GITHUB_RUN_ID"),
        run_attempt=_env_int(env, "GITHUB_RUN_ATTEMPT"),
        actor=_env(env, "GITHUB_ACTOR"),
        runner_name=_env(env, "RUNNER_NAME"),
        runner_environment=_env(env, "RUNNER_ENVIRONMENT"),
    )
    return source, run


def _pr_head(env: Mapping[str, str]) -> tuple[str, int, int]:
    """Head repository (name, id) and PR number from a pull_request event's payload."""
    path = Path(_env(env, "GITHUB_EVENT_PATH"))
    payload = github.event_at(path)
    try:
        pull = payload["pull_request"]
        repo = pull["head"]["repo"]
        name, repo_id, number = repo["full_name"], repo["id"], pull["number"]
    except (KeyError, TypeError):
        raise ConfigError(
            f"{path}: pull_request.head.repo is missing; not a pull_request event payload"
        ) from None
    if not isinstance(name, str) or not isinstance(repo_id, int) or not isinstance(number, int):
        raise ConfigError(f"{path}: pull_request.head.repo has unexpected types")
    return name, repo_id, number
