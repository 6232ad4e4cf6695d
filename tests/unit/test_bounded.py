"""The bounded reader: regular files only, size checked before reading, parsed shape bounded."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from twinbuild.errors import ConfigError
from twinbuild.util import bounded


def test_reads_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_bytes(b"x = 1\n")
    assert bounded.read_bytes(path, limit=6, what="manifest") == b"x = 1\n"


def test_missing_file_names_the_hint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        bounded.read_bytes(
            tmp_path / "nope", limit=10, what="manifest", missing="not found; create it"
        )
    assert str(err.value) == f"{tmp_path / 'nope'}: not found; create it"


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as err:
        bounded.read_bytes(fifo, limit=10, what="manifest")
    assert str(err.value) == (
        f"{fifo}: is a FIFO (named pipe), not a regular file; pass the manifest file itself"
    )


def test_dev_zero_through_a_symlink_is_refused_by_name(tmp_path: Path) -> None:
    link = tmp_path / "manifest.toml"
    link.symlink_to("/dev/zero")
    with pytest.raises(ConfigError) as err:
        bounded.read_bytes(link, limit=10, what="manifest")
    assert str(err.value) == (
        f"{link}: is a link to /dev/zero, a character device, not a regular file; "
        "pass the manifest file itself"
    )


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        bounded.read_bytes(tmp_path, limit=10, what="workflow")
    assert str(err.value) == (
        f"{tmp_path}: is a directory, not a regular file; pass the workflow file itself"
    )


def test_size_is_checked_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as handle:  # sparse: 1 GiB that reading would have to allocate
        handle.truncate(1 << 30)
    with pytest.raises(ConfigError) as err:
        bounded.read_bytes(big, limit=1024, what="manifest")
    assert str(err.value) == (
        f"{big}: {1 << 30} bytes, over the 1024-byte limit for the manifest; is this the right file?"
    )


def test_a_file_that_lies_about_its_size_is_still_bounded() -> None:
    # /proc files report size 0 and can be longer than the limit.
    with pytest.raises(ConfigError, match=r"grew while being read, over the 16-byte limit"):
        bounded.read_bytes(Path("/proc/self/status"), limit=16, what="input")


def test_bom_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        bounded.decode(b"\xef\xbb\xbfx = 1", source="m.toml", what="manifest")
    assert str(err.value) == (
        "m.toml:1: starts with a UTF-8 byte order mark (BOM, bytes ef bb bf); "
        "save the manifest as UTF-8 without BOM"
    )
    assert bounded.decode(b"\xef\xbb\xbfa: 1", source="w.yml", what="workflow", bom=True) == "a: 1"


def test_not_utf8_names_line_and_byte() -> None:
    with pytest.raises(ConfigError) as err:
        bounded.decode(b"a\nb\n\xb4", source="w.yml", what="workflow")
    assert str(err.value) == "w.yml:3: not UTF-8 (byte 0xb4); save the workflow as UTF-8"


def test_parser_recursion_is_the_projects_error() -> None:
    deep = "x = " + "[" * 5000 + "]" * 5000
    with pytest.raises(ConfigError) as err:
        bounded.parse(lambda: tomllib.loads(deep), source="m.toml", what="manifest")
    assert str(err.value) == (
        "m.toml: nested too deeply to read (a manifest needs at most 32 levels); "
        "is this the right file?"
    )


def test_huge_integer_text_is_the_projects_error() -> None:
    with pytest.raises(ConfigError, match=r"^m.toml: a number with over 4300 digits; "):
        bounded.parse(lambda: tomllib.loads("x = " + "9" * 5000), source="m.toml", what="manifest")


def test_other_value_errors_pass_through() -> None:
    with pytest.raises(tomllib.TOMLDecodeError):
        bounded.parse(lambda: tomllib.loads("x = "), source="m.toml", what="manifest")


def test_shape_depth_and_integers_name_the_key() -> None:
    bounded.check_shape({"a": [{"b": 2**63 - 1}]}, source="s", what="manifest")
    with pytest.raises(ConfigError) as err:
        bounded.check_shape({"a": [{"b": 2**63}]}, source="s", what="manifest")
    assert str(err.value) == (
        "s: the integer at 'a[0].b' does not fit in 64 bits (over 9223372036854775807); "
        "a manifest holds no such number"
    )
    nested: list[object] = []
    value: list[object] = nested
    for _ in range(40):
        inner: list[object] = []
        value.append(inner)
        value = inner
    with pytest.raises(ConfigError) as deep:
        bounded.check_shape({"x": nested}, source="s", what="manifest")
    assert str(deep.value).startswith("s: nested over 32 levels deep at 'x")
