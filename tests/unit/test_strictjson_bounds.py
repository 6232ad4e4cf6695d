"""Strict JSON's bounds and typed getters, each with its exact message.

Found by mutation testing (``nox -s mutate``): the limits are checked at the limit and one past
it, and every getter of ``Fields`` says which key, what it expected and what it got.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from twinbuild.errors import ConfigError
from twinbuild.util import strictjson
from twinbuild.util.strictjson import MAX_DEPTH, MAX_NUMBER_CHARS, Fields

HEX = re.compile(r"^[0-9a-f]+$")


def _refused(data: bytes, max_bytes: int = strictjson.MAX_BYTES) -> str:
    with pytest.raises(ConfigError) as info:
        strictjson.loads(data, source="e.json", max_bytes=max_bytes)
    return str(info.value)


def test_the_size_limit_is_inclusive() -> None:
    doc = b'{"a": 1}'
    assert strictjson.loads(doc, source="e.json", max_bytes=len(doc)) == {"a": 1}
    assert _refused(doc, max_bytes=len(doc) - 1) == (
        f"e.json: larger than {len(doc) - 1} bytes; too large for evidence, is this the right file?"
    )


def test_the_depth_limit_is_inclusive() -> None:
    deepest = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert strictjson.loads(deepest, source="e.json") is not None
    assert _refused(b"[" + deepest + b"]") == (
        f"e.json: objects and arrays nested {MAX_DEPTH + 1} deep, over the limit of {MAX_DEPTH}; "
        "evidence nests a few levels, re-create the file"
    )
    brackets_in_strings = b'["' + b"[" * (MAX_DEPTH + 5) + b'"]'
    assert strictjson.loads(brackets_in_strings, source="e.json") == ["[" * (MAX_DEPTH + 5)]


@pytest.mark.parametrize("doc", [b"1", b'"text"', b"null", b"true"])
def test_a_document_without_brackets_has_no_depth(doc: bytes) -> None:
    assert strictjson.loads(doc, source="e.json") == json.loads(doc)


def test_number_length_limits_are_inclusive() -> None:
    longest_int = "9" * MAX_NUMBER_CHARS
    assert strictjson.loads(longest_int.encode(), source="e.json") == int(longest_int)
    assert _refused(("9" * (MAX_NUMBER_CHARS + 1)).encode()) == (
        f"e.json: a number of {MAX_NUMBER_CHARS + 1} digits is larger than any evidence field; "
        "re-create the file"
    )
    longest_float = "0." + "1" * (MAX_NUMBER_CHARS - 2)
    assert strictjson.loads(longest_float.encode(), source="e.json") == float(longest_float)
    assert _refused(("0." + "1" * (MAX_NUMBER_CHARS - 1)).encode()) == (
        f"e.json: a number of {MAX_NUMBER_CHARS + 1} characters is longer than any evidence "
        "field; re-create the file"
    )


def test_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cuda.dsse.json"
    path.write_bytes(b'{"a": 1, "a": 2}')
    with pytest.raises(ConfigError) as info:
        strictjson.load(path)
    assert str(info.value) == (
        f"{path}: duplicate key 'a'; readers disagree on which one counts, so it is refused"
    )
    path.write_bytes(b'{"a": 1}')
    with pytest.raises(ConfigError) as info:
        strictjson.load(path, max_bytes=4)
    assert str(path) in str(info.value)


def test_dumps_is_sorted_indented_utf8_with_a_final_newline() -> None:
    assert strictjson.dumps({"b": [1], "a": "é"}) == '{\n  "a": "é",\n  "b": [\n    1\n  ]\n}\n'
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        strictjson.dumps({"x": float("nan")})


def test_canonical_refuses_what_json_cannot_say() -> None:
    assert strictjson.canonical({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        strictjson.canonical({"x": float("inf")})


def _fields(data: object) -> Fields:
    return Fields(data, "predicate", "e.json")


@pytest.mark.parametrize(
    ("getter", "value", "message"),
    [
        ("text", 5, "e.json: predicate.k: expected a string, got int"),
        ("text", None, "e.json: predicate.k: expected a string, got null"),
        ("integer", True, "e.json: predicate.k: expected an integer, got bool"),
        ("integer", "5", "e.json: predicate.k: expected an integer, got str"),
        ("integer", -1, "e.json: predicate.k: -1 is negative"),
        ("opt_integer", "x", "e.json: predicate.k: expected an integer, got str"),
        ("flag", "yes", "e.json: predicate.k: expected true or false, got str"),
        ("number", True, "e.json: predicate.k: expected a number, got bool"),
        ("number", "1.5", "e.json: predicate.k: expected a number, got str"),
        ("items", {}, "e.json: predicate.k: expected a list, got dict"),
        ("strings", "ab", "e.json: predicate.k: expected a list, got str"),
        ("strings", ["a", 1], "e.json: predicate.k[1]: expected a string, got int"),
    ],
)
def test_each_getter_names_key_expected_and_found(getter: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        getattr(_fields({"k": value}), getter)("k")
    assert str(info.value) == message


def test_getters_return_what_they_read() -> None:
    f = _fields({"t": "x", "i": 0, "n": None, "b": False, "f": 2, "l": ["a"], "o": [{"z": 1}]})
    assert (f.text("t"), f.integer("i"), f.opt_integer("n"), f.flag("b")) == ("x", 0, None, False)
    assert f.number("f") == 2.0
    assert isinstance(f.number("f"), float)
    assert f.strings("l") == ["a"]
    [item] = f.items("o")
    assert (item.path, item.source, item.integer("z")) == ("predicate.o[0]", "e.json", 1)
    with pytest.raises(ConfigError) as info:
        item.text("z")
    assert str(info.value) == "e.json: predicate.o[0].z: expected a string, got int"


def test_missing_and_unknown_keys() -> None:
    f = _fields({"commit": "abc", "comitt": 1})
    with pytest.raises(ConfigError) as info:
        f.text("ref")
    assert (
        str(info.value) == "e.json: predicate.ref: missing; `twinbuild evidence record` writes it"
    )
    f.text("commit")
    with pytest.raises(ConfigError) as info:
        f.done()
    assert str(info.value) == "e.json: predicate.comitt: unknown key; perhaps you meant 'commit'?"


def test_opt_match_reads_null_and_names_what_it_wanted() -> None:
    f = _fields({"n": None, "h": "XYZ"})
    assert f.opt_match("n", HEX, "hex") is None
    with pytest.raises(ConfigError) as info:
        f.opt_match("h", HEX, "lower-case hex")
    assert str(info.value) == "e.json: predicate.h: 'XYZ' is not lower-case hex"
