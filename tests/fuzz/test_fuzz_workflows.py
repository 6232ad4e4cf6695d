"""The workflow reader behind `twinbuild workflows check` on any file in .github/workflows."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given

from tests.fuzz.conftest import outcome
from tests.fuzz.strategies import as_bytes, hostile
from tests.helpers import FIXTURES
from twinbuild.ci import workflows

REPO = Path(__file__).resolve().parents[2]
SEEDS = [
    p.read_text()
    for p in sorted(
        [*(REPO / ".github/workflows").glob("*.yml"), *(FIXTURES / "workflows").glob("*.yml")]
    )
]


@given(data=as_bytes(hostile(SEEDS, prefix="zz: ")))
def test_any_workflow_ends_in_findings_or_our_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "ci.yml"
    path.write_bytes(data)
    result = outcome(lambda: workflows.check([path]), folder=tmp_path)
    assert isinstance(result, list) or str(result).startswith(str(path))
