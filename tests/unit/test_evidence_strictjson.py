"""Strict JSON: every way a file could mean two things, or nothing, is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinbuild.errors import ConfigError
from twinbuild.util import strictjson


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "f.json: empty file; re-run the step that writes it"),
        (b"  \n", "f.json: empty file; re-run the step that writes it"),
        (
            b'{"a": 1, "a": 2}',
            "f.json: duplicate key 'a'; readers disagree on which one counts, so it is refused",
        ),
        (
            b'{"x": {"verdict": "failed", "verdict": "passed"}}',
            "f.json: duplicate key 'verdict'; readers disagree on which one counts, "
            "so it is refused",
        ),
        (b'{"a": NaN}', "f.json: NaN is not JSON; write a finite number or null"),
        (b'{"a": -Infinity}', "f.json: -Infinity is not JSON; write a finite number or null"),
        (b'{"a": 1e999}', "f.json: number 1e999 does not fit a float; write a finite number"),
        (
            b'{"a": 1} {"a": 2}',
            "f.json:1:10: trailing data after the JSON document; one file holds one document",
        ),
        (
            b'{"a": [1, 2',
            "f.json:1:12: the JSON document ends early (truncated?): Expecting ',' delimiter; "
            "re-create the file",
        ),
        (b'{"a": tru}', "f.json:1:7: invalid JSON: Expecting value"),
        (
            b'{"a": "\xff"}',
            "f.json: byte 7 is not UTF-8; evidence is UTF-8 JSON, re-create the file",
        ),
        (
            b'\xef\xbb\xbf{"a": 1}',
            "f.json: starts with a byte order mark; write plain UTF-8 JSON",
        ),
    ],
)
def test_refused(data: bytes, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        strictjson.loads(data, source="f.json")
    assert str(info.value) == message


def test_accepts_plain_json() -> None:
    assert strictjson.loads(b'{"a": [1, 2.5, null, "\xc3\xa9"]}\n', source="f") == {
        "a": [1, 2.5, None, "é"]
    }


def test_oversized_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b'{"a": "' + b"x" * 100 + b'"}')
    with pytest.raises(ConfigError) as info:
        strictjson.load(path, max_bytes=64)
    assert str(info.value) == (
        f"{path}: 109 bytes, over the 64-byte limit for the evidence file; is this the right file?"
    )


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        strictjson.load(tmp_path / "nope.json")
    path = tmp_path / "nope.json"
    assert str(info.value) == f"{path}: no such file; pass the path of an existing evidence file"


def test_canonical_is_compact_and_sorted() -> None:
    assert strictjson.canonical({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
