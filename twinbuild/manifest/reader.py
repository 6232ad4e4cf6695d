"""The manifest reader's typed getters: every value is checked for its type where it is read.

One :class:`Reader` reads one manifest text and collects every problem instead of stopping at the
first, each as one line ``file:line: key.path: what is wrong; what to do``. ``read_variants.py``
and ``read_pins.py`` read their tables through it, in the style of packaging's pylock.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from twinbuild.manifest.messages import bad_name, example, one_of, type_name
from twinbuild.manifest.model import NAME_RE
from twinbuild.manifest.tomlpos import KeyLines

Key = tuple[str, ...]


class Reader:
    """Collects every error of one manifest; the getters return None for a value of a wrong type
    (after saying so), so one bad key never hides the next."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.keylines = KeyLines.index(text)
        self.errors: list[str] = []
        self.bad_keys: set[Key] = set()

    def error(self, key: Key, message: str) -> None:
        dotted = ".".join(key).replace(".[", "[")  # an array entry: floors[1].gpus
        line = self.keylines.line_of(key)
        # A key missing from a table that is not in the file has no line: name the file alone.
        where = f"{self.path}:{line}" if line else str(self.path)
        text = f"{where}: {dotted}: {message}"
        if text not in self.errors:  # one key missing on two images is one problem
            self.errors.append(text)

    def line_of(self, key: Key) -> int:
        return self.keylines.line_of(key)

    def get(self, table: Mapping[str, Any], key: Key, typ: type) -> Any:
        value = table.get(key[-1])
        if value is None:
            return None
        self.bad_keys.add(key)  # until it passes the type check below
        if typ is str and not isinstance(value, str):
            self.error(key, f"expected a string, got {type_name(value)}{example(key[-1])}")
            return None
        if typ is list and (
            not isinstance(value, list) or not all(isinstance(x, str) for x in value)
        ):
            self.error(key, f"expected a list of strings, got {_list_type(value)}")
            return None
        if typ is dict and not isinstance(value, dict):
            self.error(key, f"expected a table, got {type_name(value)}")
            return None
        if typ is int and (not isinstance(value, int) or isinstance(value, bool)):
            self.error(key, f"expected an integer, got {type_name(value)}")
            return None
        self.bad_keys.discard(key)
        return value

    def get_str(self, table: Mapping[str, Any], key: Key) -> str | None:
        return cast(str | None, self.get(table, key, str))

    def need_str(self, table: Mapping[str, Any], key: Key, hint: str) -> str:
        value = self.get_str(table, key)
        if value is None and key[-1] not in table:
            self.error(key, f"missing; {hint}")
        return value or ""

    def get_list(self, table: Mapping[str, Any], key: Key) -> tuple[str, ...]:
        return tuple(self.get(table, key, list) or ())

    def get_table(self, table: Mapping[str, Any], key: Key) -> dict[str, Any] | None:
        return cast(dict[str, Any] | None, self.get(table, key, dict))

    def need_table(self, table: Mapping[str, Any], key: Key, hint: str) -> dict[str, Any] | None:
        """A table that must be there: None (and one error) when it is missing or not a table."""
        value = self.get_table(table, key)
        if value is None and key[-1] not in table:
            self.error(key, f"missing; {hint}")
        return value

    def choice(
        self, table: Mapping[str, Any], key: Key, choices: tuple[str, ...], hint: str
    ) -> str | None:
        """A string that must be one of ``choices``; None (after one error) otherwise."""
        value = self.get_str(table, key)
        if value is None:
            if key[-1] not in table and hint:
                self.error(key, f"missing; {hint}")
            return None
        if value not in choices:
            self.error(key, f"unknown {key[-1]} '{value}'{one_of(value, choices)}")
            return None
        return value

    def name(self, key: Key, name: str, what: str) -> bool:
        """Whether ``name`` (the last part of ``key``) may name a ``what``: it becomes a file
        name, a tag or a build arg."""
        if NAME_RE.fullmatch(name):
            return True
        self.error(key, bad_name(name, what))
        return False

    def unknown_keys(
        self,
        table: Mapping[str, Any],
        prefix: Key,
        known: tuple[str, ...],
        *,
        also: str = "",
    ) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = (
                    f"; did you mean '{close[0]}'?"
                    if close
                    else f"; known keys: {', '.join(known)}{also}"
                )
                self.error((*prefix, key), f"unknown key{hint}")


def _list_type(value: object) -> str:
    if isinstance(value, list):
        odd = next((x for x in value if not isinstance(x, str)), None)
        return f"an array holding {type_name(odd)} {odd!r}"[:120]
    return type_name(value)
