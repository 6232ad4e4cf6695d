"""The build record: one typed record that build saves, push extends and smoke reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_engine import FakeEngine
from tests.helpers import edit, image, mini_project
from tests.unit.test_build import _build, holding
from twinbuild.builder.build_record import BaseRef, BuildRecord, PushRecord, SkippedPin, record_path
from twinbuild.errors import ConfigError

IMAGE = "sha256:" + "1" * 64
PUSHED = PushRecord(ref="r:5000/twinbuild/rocm@sha256:" + "2" * 64, registry="r:5000", at="now")


def test_a_record_saves_and_loads_back(tmp_path: Path) -> None:
    made = BuildRecord(
        image_id=IMAGE, variant="rocm", arch="linux/amd64", profile="local", tag="twinbuild/rocm:local-amd64",
        inputs_hash="sha256:i", manifest_digest="sha256:m", base=BaseRef(ref="b:1", id="sha256:b"),
        skipped=(SkippedPin(pin="tms", reason="needs nvcc"),), python="/opt/venv/bin/python",
        log="build.log", pushed=PUSHED,
    )  # fmt: skip
    path = tmp_path / "image.json"
    made.save(path)
    assert BuildRecord.load(path) == made
    assert json.loads(path.read_text())["skipped"] == [{"pin": "tms", "reason": "needs nvcc"}]
    assert "pushed" not in BuildRecord(image_id=IMAGE).to_json()  # recorded only once pushed


def test_an_older_or_hand_written_record_needs_only_its_image(tmp_path: Path) -> None:
    path = tmp_path / "image.json"
    path.write_text(json.dumps({"image_id": IMAGE, "inputs_hash": "x", "later": "ignored"}))
    assert BuildRecord.load(path) == BuildRecord(image_id=IMAGE, inputs_hash="x")
    assert BuildRecord.load(tmp_path / "missing.json") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "unreadable build record (Expecting property name enclosed in double quotes: "
              "line 1 column 2 (char 1)); rebuild the image"),
        ('{"image_id": "abc"}', "no image_id in the build record; rebuild the image"),
        (f'{{"image_id": "{IMAGE}", "python": 3}}', "record.python: expected a string, got int"),
        (f'{{"image_id": "{IMAGE}", "arch": "linux/s390x"}}',
         "record.arch: 'linux/s390x' is not one of linux/amd64, linux/arm64"),
        (f'{{"image_id": "{IMAGE}", "base": {{"ref": "b"}}}}',
         "record.base.id: missing; rebuild the image"),
    ],
)  # fmt: skip
def test_an_unusable_record_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "image.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        BuildRecord.load(path)
    assert str(info.value) == f"{path}: {message}"


def test_an_up_to_date_build_keeps_the_push_and_a_new_image_drops_it(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    first = _build(root, FakeEngine())
    path = record_path(root, "production", image("rocm"))
    loaded = BuildRecord.load(path)
    assert loaded is not None
    loaded.with_push(PUSHED).save(path)  # what `twinbuild push` does once the registry confirmed
    assert _build(root, holding(first)).up_to_date
    kept = BuildRecord.load(path)
    assert kept is not None
    assert kept.pushed == PUSHED  # the same image: where it was pushed still holds
    edit(root / "pins/manifest.toml", 'version = "0.65.1"', 'version = "0.65.2"')
    other = "sha256:" + "c" * 64
    rebuilt = _build(root, FakeEngine(build_id=other))
    assert rebuilt.image_id == other
    fresh = BuildRecord.load(path)
    assert fresh is not None
    assert fresh.pushed is None  # another image: that push was of the old one


def test_saving_over_a_record_that_is_not_text_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "image.json"
    path.write_bytes(b"\xff\xfe garbled by a crash\n")
    BuildRecord(image_id=IMAGE).save(path)  # UnicodeDecodeError escaped the no-op check
    assert BuildRecord.load(path) == BuildRecord(image_id=IMAGE)


def test_saving_where_a_fifo_is_refuses_without_waiting(tmp_path: Path) -> None:
    import os

    from tests.fuzz.conftest import time_bound

    path = tmp_path / "image.json"
    os.mkfifo(path)
    with time_bound(5), pytest.raises(ConfigError, match="not a regular file"):
        BuildRecord(image_id=IMAGE).save(path)  # read_text() of a FIFO waited for a writer
