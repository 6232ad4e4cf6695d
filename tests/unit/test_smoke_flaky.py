"""The rerun policy: a failed GPU test reruns once; a pass on the rerun is flaky, never hidden."""

from __future__ import annotations

import pytest

from twinbuild.smoke.flaky import Recorder, Verdict, verdict

pytest_plugins = ["pytester"]

TESTS = """
import pytest
from pathlib import Path

def _attempt(name):
    counter = Path(name)
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    return n

@pytest.mark.gpu
def test_flaky_gpu():
    assert _attempt("flaky") > 1, "first attempt fails"

@pytest.mark.gpu
def test_broken_gpu():
    _attempt("broken")
    assert False, "always fails"

@pytest.mark.gpu
def test_hung_gpu(request):
    _attempt("hung")
    request.node.user_properties.append(("no_rerun", "timed out"))
    pytest.fail("all_reduce_perf did not finish within its timeout (exit 124): a hang", pytrace=False)

def test_pin_mismatch():
    _attempt("pin")
    pytest.fail("pin x: expected 1, found 2", pytrace=False)

def test_skipped():
    pytest.skip("not in local profile: x (why)")
"""


def test_verdicts() -> None:
    assert verdict(["passed"]) == Verdict(outcome="passed", attempts=1, flaky=False)
    assert verdict(["failed", "passed"]) == Verdict(outcome="passed", attempts=2, flaky=True)
    assert verdict(["failed", "failed"]) == Verdict(outcome="failed", attempts=2, flaky=False)
    with pytest.raises(ValueError, match="a test runs once or twice, not 3 times"):
        verdict(["failed", "failed", "passed"])
    with pytest.raises(ValueError, match="only a failed attempt is rerun"):
        verdict(["passed", "passed"])


def _run(pytester: pytest.Pytester, *, rerun: bool) -> tuple[dict[str, dict[str, object]], str]:
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    pytester.makepyfile(test_suite=TESTS)
    recorder = Recorder(rerun_failed_once=rerun)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", plugins=[recorder])
    records = {str(r["id"]).split("::")[1]: r for r in recorder.records}
    return records, str(result.stdout)


def test_rerun_once_records_flaky_and_failures(pytester: pytest.Pytester) -> None:
    records, _ = _run(pytester, rerun=True)
    flaky, broken = records["test_flaky_gpu"], records["test_broken_gpu"]
    assert (flaky["outcome"], flaky["attempts"], flaky["flaky"]) == ("passed", 2, True)
    assert (broken["outcome"], broken["attempts"], broken["flaky"]) == ("failed", 2, False)
    assert broken["message"] == "AssertionError: always fails\nassert False"
    assert broken["markers"] == ["gpu"]
    assert (pytester.path / "broken").read_text() == "2"  # never a third attempt
    pin = records["test_pin_mismatch"]
    assert (pin["outcome"], pin["attempts"], pin["message"]) == (
        "failed", 1, "pin x: expected 1, found 2",
    )  # fmt: skip
    assert (pytester.path / "pin").read_text() == "1"  # not a GPU test: no rerun
    hung = records["test_hung_gpu"]
    assert (hung["outcome"], hung["attempts"], hung["flaky"]) == ("failed", 1, False)
    assert (pytester.path / "hung").read_text() == "1"  # a hang is a failure, never flaky
    assert records["test_skipped"]["message"] == "not in local profile: x (why)"


def test_without_the_flag_nothing_reruns(pytester: pytest.Pytester) -> None:
    records, _ = _run(pytester, rerun=False)
    flaky = records["test_flaky_gpu"]
    assert (flaky["outcome"], flaky["attempts"], flaky["flaky"]) == ("failed", 1, False)
    assert (pytester.path / "flaky").read_text() == "1"
