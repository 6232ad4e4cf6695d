"""The nightly rerun policy: one rerun, flaky told apart from failed, refusals reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twinbuild.ci import rerun
from twinbuild.ci.rerun import Decision
from twinbuild.errors import ConfigError, FindingsError

CUDA = "GPU smoke (cuda)"
ROCM = "GPU smoke (rocm)"
NIGHTLY = ".github/workflows/nightly.yml"


def test_attempt_one_passing_is_passed() -> None:
    decision = rerun.decide(attempt=1, current={CUDA: "success", ROCM: "success"})
    assert decision == Decision(verdict="passed", reason="attempt 1 passed")
    assert decision.ok


def test_attempt_one_failing_asks_for_one_rerun_of_the_failed_jobs() -> None:
    decision = rerun.decide(
        attempt=1, current={CUDA: "failure", ROCM: "success", "build": "skipped"}
    )
    assert decision == Decision(
        verdict="rerun",
        reason="attempt 1 failed; re-running the failed jobs once (attempt 2 reports)",
        jobs=(CUDA,),
    )
    assert decision.outputs() == {"verdict": "rerun", "jobs": CUDA}


def test_failed_then_passed_is_flaky() -> None:
    decision = rerun.decide(
        attempt=2,
        current={CUDA: "success", ROCM: "success"},
        previous={CUDA: "failure", ROCM: "success"},
    )
    assert decision == Decision(
        verdict="flaky", reason="failed in attempt 1, passed in attempt 2", jobs=(CUDA,)
    )
    assert decision.ok
    assert decision.markdown() == (
        f"## nightly: flaky\n\nfailed in attempt 1, passed in attempt 2\n\n- {CUDA}\n"
    )


def test_failed_twice_is_failed_and_fails_the_report() -> None:
    decision = rerun.decide(
        attempt=2, current={CUDA: "failure", ROCM: "success"}, previous={CUDA: "failure"}
    )
    assert decision == Decision(
        verdict="failed", reason="failed in attempt 1 and again in attempt 2", jobs=(CUDA,)
    )
    with pytest.raises(FindingsError) as info:
        decision.raise_if_bad()
    assert str(info.value) == "nightly: failed: failed in attempt 1 and again in attempt 2"


def test_attempt_two_never_asks_for_another_rerun() -> None:
    decision = rerun.decide(attempt=2, current={ROCM: "failure"}, previous={CUDA: "failure"})
    assert decision.verdict == "failed"
    assert decision.reason == "attempt 2 failed; no result in attempt 2 for jobs that failed before"
    assert decision.jobs == (CUDA, ROCM)


def test_attempt_three_was_started_by_hand_and_says_so() -> None:
    decision = rerun.decide(attempt=3, current={CUDA: "success"}, previous={CUDA: "failure"})
    assert decision == Decision(
        verdict="flaky",
        reason=(
            "failed in attempt 2, passed in attempt 3 (attempt 3 was started by hand: the guard "
            "allows 1 automatic rerun)"
        ),
        jobs=(CUDA,),
    )


def test_a_rerun_of_a_passing_run_reports_passed() -> None:
    decision = rerun.decide(attempt=2, current={CUDA: "success"}, previous={CUDA: "success"})
    assert decision == Decision(verdict="passed", reason="attempt 2 passed")


def test_cancelled_jobs_are_a_refusal_not_a_rerun() -> None:
    decision = rerun.decide(attempt=1, current={CUDA: "cancelled", ROCM: "failure"})
    assert decision == Decision(
        verdict="refuse",
        reason=(
            "attempt 1 has cancelled jobs; a cancelled run is not re-run automatically: re-run it "
            "by hand if the cancel was a mistake"
        ),
        jobs=(CUDA,),
    )
    assert not decision.ok
    with pytest.raises(FindingsError, match=r"^nightly: refuse: attempt 1 has cancelled jobs"):
        decision.raise_if_bad()


def test_attempt_two_without_previous_outcomes_is_a_usage_error() -> None:
    with pytest.raises(ConfigError) as info:
        rerun.decide(attempt=2, current={CUDA: "success"})
    assert str(info.value) == (
        "rerun-decision: attempt 2 needs the job outcomes of attempt 1 (--previous) to tell flaky "
        "from failed"
    )


def test_attempt_zero_is_a_usage_error() -> None:
    with pytest.raises(ConfigError, match=r"^rerun-decision: --attempt must be 1 or more, got 0$"):
        rerun.decide(attempt=0, current={})


def run_doc(**overrides: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "id": 42,
        "run_attempt": 1,
        "status": "completed",
        "conclusion": "failure",
        "path": NIGHTLY,
    }
    doc.update(overrides)
    return doc


def test_guard_allows_one_rerun_of_a_failed_nightly() -> None:
    assert rerun.guard(run_doc(), workflow=NIGHTLY) == Decision(
        verdict="rerun", reason="run 42 failed at attempt 1; re-running its failed jobs once"
    )
    assert rerun.guard(run_doc(conclusion="timed_out"), workflow=NIGHTLY).verdict == "rerun"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        (
            {"run_attempt": 2},
            "run 42 is at attempt 2: it was already re-run; the guard allows 1 automatic rerun, so "
            "it stops here (read attempt 2's report)",
        ),
        (
            {"path": ".github/workflows/pr.yml"},
            "run 42 is from '.github/workflows/pr.yml', not '.github/workflows/nightly.yml'; only "
            "nightly runs are re-run",
        ),
        (
            {"status": "in_progress", "conclusion": None},
            "run 42 is still in_progress; it can only be re-run once it has finished",
        ),
        (
            {"conclusion": "success"},
            "run 42 concluded 'success'; there is nothing failed to re-run",
        ),
        (
            {"conclusion": "cancelled"},
            "run 42 was cancelled; a cancelled run is not re-run automatically",
        ),
        ({"run_attempt": "1"}, "run 42 has no usable run_attempt ('1')"),
    ],
)
def test_guard_refuses_with_the_reason(overrides: dict[str, object], reason: str) -> None:
    decision = rerun.guard(run_doc(**overrides), workflow=NIGHTLY)
    assert decision == Decision(verdict="refuse", reason=reason)
    with pytest.raises(FindingsError, match=r"^nightly: refuse: "):
        decision.raise_if_bad()


def test_guard_accepts_a_path_with_a_ref_suffix() -> None:
    assert rerun.guard(run_doc(path=f"{NIGHTLY}@main"), workflow=NIGHTLY).verdict == "rerun"


def test_outcomes_from_the_jobs_api_leave_unfinished_jobs_out() -> None:
    doc = {
        "total_count": 4,
        "jobs": [
            {"name": CUDA, "status": "completed", "conclusion": "timed_out"},
            {"name": ROCM, "status": "completed", "conclusion": "success"},
            {"name": "build production (cuda)", "status": "completed", "conclusion": "skipped"},
            {"name": "report", "status": "in_progress", "conclusion": None},
        ],
    }
    assert rerun.outcomes(doc, source="current.json") == {
        CUDA: "failure",
        ROCM: "success",
        "build production (cuda)": "skipped",
    }


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "current.json: expected a GitHub jobs API answer with a 'jobs' list"),
        ({"jobs": [{"status": "completed"}]}, "current.json: jobs[0] has no 'name'"),
        (
            {"jobs": [{"name": "x", "status": "completed", "conclusion": "exploded"}]},
            "current.json: jobs[0] (x): unknown conclusion 'exploded'",
        ),
    ],
)
def test_outcomes_reject_what_is_not_a_jobs_answer(doc: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        rerun.outcomes(doc, source="current.json")
    assert str(info.value) == message


def test_load_json_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "run.json"
    good.write_text(json.dumps({"id": 1}), encoding="utf-8")
    assert rerun.load_json(good) == {"id": 1}
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  nope\n}", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        rerun.load_json(bad)
    assert (
        str(info.value) == f"{bad}:2: not JSON: Expecting property name enclosed in double quotes"
    )
    with pytest.raises(ConfigError) as missing:
        rerun.load_json(tmp_path / "absent.json")
    assert (
        str(missing.value)
        == f"{tmp_path / 'absent.json'}: no such file; save the GitHub API answer there first (gh api ... > FILE)"
    )


def test_a_job_name_cannot_forge_the_verdict_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.github_runner import runner_outputs
    from twinbuild.cli.main import main

    forged = "smoke\nverdict=passed"  # a job name is the workflow author's text, not ours
    current = tmp_path / "current.json"
    jobs = [{"name": forged, "status": "completed", "conclusion": "failure"}]
    current.write_text(json.dumps({"jobs": jobs}))
    out, summary = tmp_path / "output", tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    argv = ["rerun-decision", "report", "--attempt", "2", "--current", str(current)]
    code = main([*argv, "--previous", str(current), "--summary", str(summary), "--github-output"])
    assert code == FindingsError.exit_code
    assert runner_outputs(out.read_text()) == {"verdict": "failed", "jobs": forged}
    assert summary.read_text().startswith("## nightly: failed\n")
    assert capsys.readouterr().out.startswith("nightly: failed: ")
