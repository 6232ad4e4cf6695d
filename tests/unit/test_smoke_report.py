"""The JSON summary (the evidence module's input), JUnit XML and markdown."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import ImageKey
from twinbuild.smoke import run_summary, smoke_report
from twinbuild.smoke.gpu import GpuInfo
from twinbuild.smoke.smoke_report import SmokeReport
from twinbuild.util.strictjson import Fields

TESTS: list[dict[str, Any]] = [
    {"id": "test_conformance.py::test_pin[tms]", "outcome": "passed", "attempts": 1,
     "flaky": False, "duration_s": 0.1, "markers": [], "message": ""},
    {"id": "test_gpu.py::test_matmul_matches_cpu", "outcome": "passed", "attempts": 2,
     "flaky": True, "duration_s": 1.5, "markers": ["gpu"], "message": ""},
    {"id": "test_conformance.py::test_pin[fla]", "outcome": "failed", "attempts": 1,
     "flaky": False, "duration_s": 0.0, "markers": [],
     "message": "pins/manifest.toml:37: pin fla: expected fla==0.4.2, found fla 0.4.3"},
    {"id": "test_platform.py::test_binary[x]", "outcome": "skipped", "attempts": 1,
     "flaky": False, "duration_s": 0.0, "markers": [], "message": "production contents"},
]  # fmt: skip


def _summary() -> dict[str, Any]:
    return smoke_report.summary(
        image_key=ImageKey(variant="cuda", arch="linux/amd64"),
        profile="local",
        image=smoke_report.ImageRef(id="sha256:abc", inputs_hash="sha256:in"),
        manifest_digest="sha256:m",
        gpu=None,
        tests=[smoke_report.SmokeTest.from_json(Fields(t, "test", "TESTS")) for t in TESTS],
        holds={"tms": "f" * 40, "fla": "0.4.3"},
    ).to_json()


def _report(data: dict[str, Any]) -> SmokeReport:
    return SmokeReport.from_json(data, "summary")


def test_summary_shape() -> None:
    data = _summary()
    assert list(data) == [
        "schema", "variant", "arch", "profile", "image", "manifest_digest", "gpu", "tests",
        "counts", "holds",
    ]  # fmt: skip
    assert data["schema"] == 2
    assert data["image"] == {
        "id": "sha256:abc",
        "digest": None,
        "inputs_hash": "sha256:in",
        "base_digest": None,
    }
    assert data["counts"] == {"passed": 2, "failed": 1, "skipped": 1, "flaky": 1}
    assert list(data["holds"]) == ["fla", "tms"]


def test_write_json_and_junit(tmp_path: Path) -> None:
    paths = _report(_summary()).save(tmp_path)
    assert paths == {
        "json": tmp_path / "smoke-cuda-amd64-local.json",
        "junit": tmp_path / "smoke-cuda-amd64-local.junit.xml",
    }
    assert json.loads(paths["json"].read_text()) == _summary()
    suite = ET.parse(paths["junit"]).getroot()  # noqa: S314 -- our own file
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("4", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failure = cases["test_pin[fla]"].find("failure")
    assert failure is not None
    assert failure.get("message") == TESTS[2]["message"]
    flaky = cases["test_matmul_matches_cpu"].findall("properties/property")
    assert [(p.get("name"), p.get("value")) for p in flaky] == [
        ("attempts", "2"),
        ("flaky", "true"),
    ]
    assert cases["test_pin[tms]"].get("classname") == "test_conformance"


def test_markdown_lists_failures_and_flaky() -> None:
    assert smoke_report.markdown([_report(_summary())]) == (
        "## twinbuild smoke\n\n"
        "| variant | arch | profile | image | passed | failed | skipped | flaky | GPU |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        "| cuda | linux/amd64 | local | `sha256:abc` | 2 | 1 | 1 | 1 | none |\n\n"
        "### cuda (linux/amd64) (local)\n\n"
        "- **FLAKY (passed on rerun)** `test_gpu.py::test_matmul_matches_cpu`: \n"
        "- **FAILED** `test_conformance.py::test_pin[fla]`: " + TESTS[2]["message"] + "\n"
    )


def test_another_image_gets_its_own_report_and_smoke_md_keeps_both(tmp_path: Path) -> None:
    built = _summary()
    other = {**_summary(), "image": {**built["image"], "id": "sha256:" + "9" * 64}}
    first = _report(built).save(tmp_path)
    second = _report(other).save(tmp_path, keyed=True)  # `smoke --image X --variant cuda`
    assert first["json"].name == "smoke-cuda-amd64-local.json"
    assert second["json"].name == "smoke-cuda-amd64-local-999999999999.json"
    assert json.loads(first["json"].read_text())["image"]["id"] == "sha256:abc"  # not overwritten
    (tmp_path / "smoke-rocm-amd64-local.json").write_text("{")  # a run that died mid-write
    rows = [line for line in smoke_report.markdown(smoke_report.collected(tmp_path)).splitlines()
            if line.startswith("| cuda ")]  # fmt: skip
    assert sorted(row.split(" | ")[3] for row in rows) == ["`sha256:999999999999`", "`sha256:abc`"]


def test_a_report_saves_and_loads_back_as_the_same_record(tmp_path: Path) -> None:
    made = _report(_summary())
    paths = made.save(tmp_path)
    assert SmokeReport.load(paths["json"]) == made
    assert made.counts == run_summary.Counts(passed=2, failed=1, skipped=1, flaky=1)
    assert [t.id for t in made.failures] == ["test_conformance.py::test_pin[fla]"]


def test_a_report_of_a_run_that_saw_gpus_loads_back_whole(tmp_path: Path) -> None:
    """A GPU run's report holds what nvidia-smi said of each GPU (``archs``): it loads back as
    the same record, the archs included, where it used to be refused as an unknown key."""
    h200 = GpuInfo(vendor="nvidia", model="NVIDIA H200", driver="580.95.05", runtime="13.0",
                   count=2, archs=("9.0", "9.0"))  # fmt: skip
    made = dataclasses.replace(_report(_summary()), gpu=h200)
    paths = made.save(tmp_path)
    assert json.loads(paths["json"].read_text())["gpu"]["archs"] == ["9.0", "9.0"]
    assert SmokeReport.load(paths["json"]) == made
    written = json.loads(paths["json"].read_text())
    older = {**written, "gpu": {k: v for k, v in written["gpu"].items() if k != "archs"}}
    loaded = _report(older).gpu
    assert loaded is not None
    assert loaded.archs == ()
    with pytest.raises(ConfigError, match=r"report\.gpu\.cores: unknown key"):
        _report({**written, "gpu": {**written["gpu"], "cores": 1}})


def test_a_report_whose_counts_disagree_is_refused(tmp_path: Path) -> None:
    data = {**_summary(), "counts": {"passed": 4, "failed": 0, "skipped": 0, "flaky": 0}}
    with pytest.raises(ConfigError) as info:
        SmokeReport.from_json(data, "r.json")
    assert str(info.value) == (
        "r.json: report.counts: 4 passed, 0 failed, 0 skipped, 0 flaky disagrees with its tests "
        "(2 passed, 1 failed, 1 skipped, 1 flaky); the report is inconsistent, re-run the smoke "
        "tests"
    )
