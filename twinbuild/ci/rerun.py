"""The nightly's rerun policy: one automatic rerun, then a verdict that tells flaky from failed.

Pure decisions over job outcomes, as the GitHub jobs API reports them for each attempt of a run:

- ``decide`` (the report job at the end of every attempt): attempt 1 with a failure asks for a
  rerun; attempt 2 says "flaky" (failed, then passed) or "failed" (failed twice); a cancelled job
  is a refusal. Only attempt 1 can ask for a rerun, so the report alone cannot loop.
- ``guard`` (nightly-rerun.yml, before it re-runs a finished run): refuses a run that is not a
  finished, failed nightly run at attempt 1. This is what stops a rerun loop started any other way.

A refusal is a verdict like the others: it is written to the summary and fails the job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.errors import ConfigError, FindingsError
from twinbuild.util import bounded, github

Outcome = Literal["success", "failure", "cancelled", "skipped"]
Verdict = Literal["passed", "rerun", "flaky", "failed", "refuse"]

MAX_ATTEMPTS = 2  # the first run and one automatic rerun

# GitHub's job and run conclusions, folded into the four outcomes the policy reasons about.
_CONCLUSIONS: Mapping[str, Outcome] = {
    "success": "success",
    "failure": "failure",
    "timed_out": "failure",
    "startup_failure": "failure",
    "action_required": "failure",
    "cancelled": "cancelled",
    "skipped": "skipped",
    "neutral": "skipped",
    "stale": "skipped",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do after an attempt, why, and which jobs it is about."""

    verdict: Verdict
    reason: str
    jobs: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the job that reports this decision should pass."""
        return self.verdict in {"passed", "rerun", "flaky"}

    def line(self) -> str:
        return f"nightly: {self.verdict}: {self.reason}"

    def markdown(self) -> str:
        """The step summary: the verdict word first, then the reason and the jobs."""
        text = f"## nightly: {self.verdict}\n\n{self.reason}\n"
        if self.jobs:
            text += "\n" + "".join(f"- {job}\n" for job in self.jobs)
        return text

    def outputs(self) -> dict[str, str]:
        """The step outputs: ``verdict`` and ``jobs`` (comma-separated)."""
        return {"verdict": self.verdict, "jobs": ",".join(self.jobs)}

    def publish(self, summary: Path | None, *, github_output: bool = False) -> None:
        """Append the verdict to the step summary file and $GITHUB_OUTPUT, where asked."""
        github.append_summary(summary, self.markdown())
        if github_output:
            github.write_outputs(self.outputs(), who="rerun-decision report")

    def raise_if_bad(self) -> None:
        if not self.ok:
            raise FindingsError(self.line())


def decide(
    *,
    attempt: int,
    current: Mapping[str, Outcome],
    previous: Mapping[str, Outcome] | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> Decision:
    """The verdict after ``attempt`` of a run, given this attempt's and the previous one's jobs."""
    if attempt < 1:
        raise ConfigError(f"rerun-decision: --attempt must be 1 or more, got {attempt}")
    cancelled = _with(current, "cancelled")
    if cancelled:
        return Decision(
            verdict="refuse",
            reason=(
                f"attempt {attempt} has cancelled jobs; a cancelled run is not re-run "
                "automatically: re-run it by hand if the cancel was a mistake"
            ),
            jobs=cancelled,
        )
    failed = _with(current, "failure")
    if attempt == 1:
        if failed:
            return Decision(
                verdict="rerun",
                reason="attempt 1 failed; re-running the failed jobs once (attempt 2 reports)",
                jobs=failed,
            )
        return Decision(verdict="passed", reason="attempt 1 passed")
    if previous is None:
        raise ConfigError(
            f"rerun-decision: attempt {attempt} needs the job outcomes of attempt {attempt - 1} "
            "(--previous) to tell flaky from failed"
        )
    by_hand = (
        f" (attempt {attempt} was started by hand: the guard allows {max_attempts - 1} automatic "
        "rerun)"
        if attempt > max_attempts
        else ""
    )
    failed_before = _with(previous, "failure")
    # A job that failed before and has no result now was not re-run: it still counts as failed.
    missing = tuple(job for job in failed_before if job not in current)
    if failed or missing:
        twice = [job for job in failed if job in failed_before]
        reason = (
            f"failed in attempt {attempt - 1} and again in attempt {attempt}"
            if twice and len(twice) == len(failed) and not missing
            else f"attempt {attempt} failed"
        )
        if missing:
            reason += f"; no result in attempt {attempt} for jobs that failed before"
        return Decision(
            verdict="failed", reason=reason + by_hand, jobs=tuple(sorted({*failed, *missing}))
        )
    if failed_before:
        return Decision(
            verdict="flaky",
            reason=f"failed in attempt {attempt - 1}, passed in attempt {attempt}{by_hand}",
            jobs=failed_before,
        )
    return Decision(verdict="passed", reason=f"attempt {attempt} passed{by_hand}")


def guard(
    run: Mapping[str, object], *, workflow: str, max_attempts: int = MAX_ATTEMPTS
) -> Decision:
    """Whether the finished run ``run`` (the GitHub runs API object) may be re-run now."""
    run_id = run.get("id")
    attempt = run.get("run_attempt")
    status = run.get("status")
    conclusion = run.get("conclusion")
    path = str(run.get("path", "")).split("@", 1)[0]
    name = f"run {run_id}"
    if path != workflow:
        return _refuse(f"{name} is from '{path}', not '{workflow}'; only nightly runs are re-run")
    if status != "completed":
        return _refuse(f"{name} is still {status}; it can only be re-run once it has finished")
    if not isinstance(attempt, int) or attempt < 1:
        return _refuse(f"{name} has no usable run_attempt ({attempt!r})")
    if attempt >= max_attempts:
        return _refuse(
            f"{name} is at attempt {attempt}: it was already re-run; the guard allows "
            f"{max_attempts - 1} automatic rerun, so it stops here "
            f"(read attempt {attempt}'s report)"
        )
    outcome = _CONCLUSIONS.get(str(conclusion))
    if outcome == "failure":
        return Decision(
            verdict="rerun",
            reason=f"{name} failed at attempt {attempt}; re-running its failed jobs once",
        )
    if outcome == "cancelled":
        return _refuse(f"{name} was cancelled; a cancelled run is not re-run automatically")
    return _refuse(f"{name} concluded '{conclusion}'; there is nothing failed to re-run")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportOptions:
    """What ``twinbuild rerun-decision report`` was asked for."""

    attempt: int  # github.run_attempt
    current: Path  # the jobs API answer for this attempt
    previous: Path | None = None  # the jobs API answer for the previous attempt (attempt > 1)
    summary: Path | None = None  # step summary file to append the verdict to
    github_output: bool = False  # write verdict= and jobs= to $GITHUB_OUTPUT


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardOptions:
    """What ``twinbuild rerun-decision guard`` was asked for."""

    run: Path  # the runs API answer for the run
    workflow: str = ".github/workflows/nightly.yml"
    summary: Path | None = None  # step summary file to append the verdict to


def report(options: ReportOptions) -> Decision:
    """:func:`decide` over the jobs API answers the options name."""
    current = outcomes(load_json(options.current), source=str(options.current))
    previous = (
        None
        if options.previous is None
        else outcomes(load_json(options.previous), source=str(options.previous))
    )
    decision = decide(attempt=options.attempt, current=current, previous=previous)
    decision.publish(options.summary, github_output=options.github_output)
    return decision


def check_guard(options: GuardOptions) -> Decision:
    """:func:`guard` over the runs API answer the options name."""
    run = load_json(options.run)
    missing = [k for k in ("id", "path", "status") if not isinstance(run, dict) or k not in run]
    if missing or not isinstance(run, dict):
        keys = ", ".join(map(repr, missing))
        raise ConfigError(
            f"{options.run}: not a GitHub workflow run object (no {keys}); "
            "save the runs API answer: gh api repos/OWNER/REPO/actions/runs/RUN_ID > FILE"
        )
    decision = guard(run, workflow=options.workflow)
    decision.publish(options.summary)
    return decision


def outcomes(doc: object, *, source: str) -> dict[str, Outcome]:
    """Job name -> outcome from a jobs API answer (``{"jobs": [...]}``), finished jobs only.

    The job that runs the report is still in progress when it asks, so it leaves itself out.
    """
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ConfigError(f"{source}: expected a GitHub jobs API answer with a 'jobs' list")
    result: dict[str, Outcome] = {}
    for index, job in enumerate(jobs):
        if not isinstance(job, dict) or not isinstance(job.get("name"), str):
            raise ConfigError(f"{source}: jobs[{index}] has no 'name'")
        if job.get("status") != "completed":
            continue
        conclusion = job.get("conclusion")
        outcome = _CONCLUSIONS.get(str(conclusion))
        if outcome is None:
            raise ConfigError(
                f"{source}: jobs[{index}] ({job['name']}): unknown conclusion {conclusion!r}"
            )
        result[job["name"]] = outcome
    return result


MAX_BYTES = 16 * 1024 * 1024
"""Largest API answer read: a jobs list of a few hundred jobs is well under 1 MiB."""


def load_json(path: Path) -> object:
    """A JSON file the workflow saved from the GitHub API; ConfigError names the file."""
    text = bounded.read_text(
        path,
        limit=MAX_BYTES,
        what="GitHub API answer",
        missing="no such file; save the GitHub API answer there first (gh api ... > FILE)",
    )
    try:
        doc = bounded.parse(lambda: json.loads(text), source=str(path), what="GitHub API answer")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    bounded.check_shape(doc, source=str(path), what="GitHub API answer")
    return doc


def _with(outcomes_: Mapping[str, Outcome], outcome: Outcome) -> tuple[str, ...]:
    return tuple(sorted(job for job, value in outcomes_.items() if value == outcome))


def _refuse(reason: str) -> Decision:
    return Decision(verdict="refuse", reason=reason)
