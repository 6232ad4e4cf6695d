"""The strict JSON reader (every evidence file) and the rerun policy's API answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import outcome
from tests.fuzz.strategies import as_bytes, json_values, mutated, nested
from tests.unit.evidence_builders import smoke_report
from twinbuild.ci import rerun
from twinbuild.errors import TwinbuildError
from twinbuild.util import github, strictjson

SEEDS = [json.dumps(smoke_report("cuda"), indent=1), '{"a": [1, 2.5, "x", null, true]}']


@given(data=as_bytes(mutated(SEEDS) | nested([""], "", "[", "]") | json_values.map(json.dumps)))
def test_strict_json_on_any_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "evidence.json"
    path.write_bytes(data)
    outcome(lambda: strictjson.load(path), folder=tmp_path)


def _rerun(doc: Any) -> object:
    current = rerun.outcomes(doc, source="jobs.json")
    decision = rerun.decide(attempt=2, current=current, previous=current)
    return decision.line(), decision.markdown(), github.format_outputs(decision.outputs())


@given(doc=json_values, attempt=st.integers(-2, 5))
def test_rerun_policy_on_any_api_answer(tmp_path: Path, doc: Any, attempt: int) -> None:
    outcome(lambda: _rerun(doc), folder=tmp_path)
    if isinstance(doc, dict):
        result = outcome(lambda: rerun.guard(doc, workflow=".github/workflows/nightly.yml"),
                         folder=tmp_path)  # fmt: skip
        assert isinstance(result, rerun.Decision | TwinbuildError)
