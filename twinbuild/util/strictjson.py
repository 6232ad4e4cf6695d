"""Strict JSON loading for signed evidence: one meaning per file, or a refusal.

A signature only helps if every reader sees the same document. Python's ``json`` module quietly
keeps the last of two duplicate keys, accepts ``NaN`` and turns ``1e999`` into infinity; another
tool may read the same bytes differently. Evidence is read here and nowhere else.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
from array import array
from pathlib import Path
from typing import Any, TypeVar, cast

from twinbuild.errors import ConfigError
from twinbuild.util import bounded

MAX_BYTES = 4 * 1024 * 1024
"""Largest evidence file we read: a smoke run of thousands of tests is a few hundred KiB."""
MAX_DEPTH = bounded.MAX_DEPTH
"""Deepest nesting of objects and arrays (every parsed file's bound): a statement nests five."""
MAX_NUMBER_CHARS = 32
"""Longest number we convert: a run id has 19 digits; thousands of digits only cost time."""

_T = TypeVar("_T", bound=str)
EVIDENCE = "evidence"


def read_bytes(path: Path, *, max_bytes: int = MAX_BYTES, what: str = EVIDENCE) -> bytes:
    """The file's bytes, refusing a missing, special or oversized file before reading it.

    ``what`` names the document in messages: evidence, the GitHub event payload, an API answer.
    """
    return bounded.read_bytes(path, limit=max_bytes, what=f"{what} file")


def load(path: Path, *, max_bytes: int = MAX_BYTES, what: str = EVIDENCE) -> Any:
    """Parse the file at ``path`` strictly (see :func:`loads`)."""
    data = read_bytes(path, max_bytes=max_bytes, what=what)
    return loads(data, source=str(path), max_bytes=max_bytes, what=what)


def loads(data: bytes, *, source: str, max_bytes: int = MAX_BYTES, what: str = EVIDENCE) -> Any:
    """Parse ``data`` as one strict JSON document; ``source`` names it in messages.

    Refused: empty input, more than ``max_bytes``, bytes that are not UTF-8 (or a byte order mark),
    duplicate keys, ``NaN``/``Infinity`` or numbers too large for a float, a lone surrogate escape
    (``"\\ud800"``: half a character, which no file can be written with), a truncated document and
    anything after the document.
    """
    if not data.strip():
        raise ConfigError(f"{source}: empty file; re-run the step that writes it")
    if len(data) > max_bytes:
        raise ConfigError(
            f"{source}: larger than {max_bytes} bytes; too large for {what}, is this the right "
            "file?"
        )
    if data.startswith(b"\xef\xbb\xbf"):
        raise ConfigError(f"{source}: starts with a byte order mark; write plain UTF-8 JSON")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: byte {exc.start} is not UTF-8; {what} is UTF-8 JSON, re-create the file"
        ) from None
    found = _depth(data)
    if found > MAX_DEPTH:
        raise ConfigError(
            f"{source}: objects and arrays nested {found} deep, over the limit of {MAX_DEPTH}; "
            f"{what} nests a few levels, re-create the file"
        )
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except _Refused as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except RecursionError:  # the depth check above makes this unreachable; keep it one line
        raise ConfigError(f"{source}: nested too deep to read; re-create the file") from None
    except json.JSONDecodeError as exc:
        where = f"{source}:{exc.lineno}:{exc.colno}"
        if exc.msg == "Extra data":
            raise ConfigError(
                f"{where}: trailing data after the JSON document; one file holds one document"
            ) from None
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise ConfigError(
                f"{where}: the JSON document ends early (truncated?): {exc.msg}; re-create the file"
            ) from None
        raise ConfigError(f"{where}: invalid JSON: {exc.msg}") from None
    if "\\u" in text:  # only an escape can make a lone surrogate
        bounded.check_shape(doc, source=source, what=what, integers=False)
    return doc


class _Refused(ValueError):
    """A strictness rule ``json`` itself does not enforce."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(
                f"duplicate key {key!r}; readers disagree on which one counts, so it is refused"
            )
        result[key] = value
    return result


def _no_constant(name: str) -> float:
    raise _Refused(f"{name} is not JSON; write a finite number or null")


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: linear time
_OPEN_CLOSE = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def depth(data: bytes) -> int:
    """How deep ``[``/``{`` nest in the JSON ``data`` (outside strings), in linear time and
    without recursion: the check before anything that hands brackets to ``json``."""
    return _depth(data)


def _depth(data: bytes) -> int:
    """How deep ``[``/``{`` nest outside strings, without recursion (C-speed on 4 MiB)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    steps = array("b", brackets.translate(_OPEN_CLOSE))  # 0x01 = +1, 0xff = -1
    return max(itertools.accumulate(steps), default=0)


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(
            f"a number of {len(text)} digits is larger than any evidence field; re-create the file"
        )
    return int(text)


def _finite_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(
            f"a number of {len(text)} characters is longer than any evidence field; "
            "re-create the file"
        )
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text} does not fit a float; write a finite number")
    return value


def dumps(value: Any) -> str:
    """Stable, readable JSON for files kept in git (sorted keys, indent 2, final newline)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def canonical(value: Any) -> bytes:
    """Compact, key-sorted UTF-8 bytes: what gets signed."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


#: What a missing key of evidence (and of a smoke report, its input) is told.
EVIDENCE_WRITES = "`twinbuild evidence record` writes it"


class Fields:
    """A JSON object read field by field with its key path; unknown keys are an error. The one
    typed reader of the JSON twinbuild reads back: evidence, smoke reports, build records."""

    def __init__(
        self, data: object, path: str, source: str, *, missing: str = EVIDENCE_WRITES
    ) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: {path}: expected an object, got {_tname(data)}")
        self.data: dict[str, Any] = data
        self.path = path
        self.source = source
        self.missing = missing  # what to do about a missing key, after "missing; "
        self.seen: set[str] = set()

    def where(self, key: str) -> str:
        return f"{self.source}: {self.path}.{key}"

    def _get(self, key: str) -> Any:
        self.seen.add(key)
        if key not in self.data:
            raise ConfigError(f"{self.where(key)}: missing; {self.missing}")
        return self.data[key]

    def _typed(self, key: str, kind: type, name: str) -> Any:
        value = self._get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"{self.where(key)}: expected {name}, got {_tname(value)}")
        return value

    def text(self, key: str) -> str:
        return cast("str", self._typed(key, str, "a string"))

    def integer(self, key: str) -> int:
        value = cast("int", self._typed(key, int, "an integer"))
        if value < 0:
            raise ConfigError(f"{self.where(key)}: {value} is negative")
        return value

    def opt_integer(self, key: str) -> int | None:
        return None if self._get(key) is None else self.integer(key)

    def flag(self, key: str) -> bool:
        return cast("bool", self._typed(key, bool, "true or false"))

    def number(self, key: str) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{self.where(key)}: expected a number, got {_tname(value)}")
        return float(value)

    def match(self, key: str, pattern: re.Pattern[str], what: str) -> str:
        value = self.text(key)
        if not pattern.fullmatch(value):
            raise ConfigError(f"{self.where(key)}: {value!r} is not {what}")
        return value

    def opt_match(self, key: str, pattern: re.Pattern[str], what: str) -> str | None:
        return None if self._get(key) is None else self.match(key, pattern, what)

    def choice(self, key: str, choices: tuple[_T, ...]) -> _T:
        value = self.text(key)
        if value not in choices:
            raise ConfigError(f"{self.where(key)}: {value!r} is not one of {', '.join(choices)}")
        return value

    def obj(self, key: str) -> Fields:
        return Fields(self._get(key), f"{self.path}.{key}", self.source, missing=self.missing)

    def opt_obj(self, key: str) -> Fields | None:
        return None if self._get(key) is None else self.obj(key)

    def items(self, key: str) -> list[Fields]:
        items = self._typed(key, list, "a list")
        return [
            Fields(v, f"{self.path}.{key}[{i}]", self.source, missing=self.missing)
            for i, v in enumerate(items)
        ]

    def strings(self, key: str) -> list[str]:
        items = self._typed(key, list, "a list")
        for i, v in enumerate(items):
            if not isinstance(v, str):
                raise ConfigError(f"{self.where(key)}[{i}]: expected a string, got {_tname(v)}")
        return cast("list[str]", items)

    def ignore(self, *keys: str) -> None:
        """Keys this reader knows and deliberately does not read (they pass ``done``)."""
        self.seen.update(keys)

    def done(self) -> None:
        for key in self.data:
            if key not in self.seen:
                hint = difflib.get_close_matches(key, list(self.seen), n=1)
                maybe = f"; perhaps you meant {hint[0]!r}?" if hint else ""
                raise ConfigError(f"{self.where(key)}: unknown key{maybe}")


def _tname(value: object) -> str:
    return "null" if value is None else type(value).__name__
