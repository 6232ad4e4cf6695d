"""The manifest loader's messages: what a bad key, name or value is told, in one place.

Each says what is wrong and what to do; look-alike characters are named with their code point.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from pathlib import Path

from twinbuild.util import bounded

#: Deepest nesting of tables and arrays a manifest may use; it needs four.
MAX_DEPTH = 16


def too_deep(path: Path) -> str:
    return (
        f"{path}: tables or arrays nested more than {MAX_DEPTH} deep; a manifest nests a few "
        "levels (pins.NAME.VARIANT.KEY), fix the file"
    )


def toml_error(path: Path, message: str, text: str) -> str:
    found = re.search(r"\(at line (\d+), column (\d+)\)", message)
    if found is None:
        return f"{path}: invalid TOML: {message}"
    detail = message[: found.start()].strip()
    line, column = int(found.group(1)), int(found.group(2))
    lines = bounded.lines(text)
    source_line = lines[line - 1] if 0 < line <= len(lines) else ""
    odd = first_non_ascii(source_line[max(column - 2, 0) :])
    # a look-alike letter (Cyrillic for Latin) is why a bare key seems to end early
    if odd:
        detail += f"; {odd} is not ASCII, bare keys are ASCII letters, digits, '-' and '_'"
    return f"{path}:{line}:{column}: invalid TOML: {detail}"


def first_non_ascii(text: str) -> str:
    """``'x' (U+0430 CYRILLIC SMALL LETTER A)`` for the first non-ASCII character, else ''."""
    for char in text:
        if not char.isascii():
            return describe_char(char)
    return ""


def describe_char(char: str) -> str:
    """A character with its code point and Unicode name, for messages about look-alikes."""
    return f"'{char}' (U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')})"


def bad_name(name: str, what: str = "pin") -> str:
    odd = first_non_ascii(name)
    if odd:
        return (
            f"{odd} is not ASCII (a look-alike letter?); {what} names are lower-case ASCII "
            "letters, digits, '-' and '_'"
        )
    return (
        f"{what} names are lower-case letters, digits, '-' and '_' (at most 64, starting with a "
        f"letter or digit); rename the {what}"
    )


def type_name(value: object) -> str:
    names = {bool: "bool", int: "int", float: "float", str: "string", list: "array", dict: "table"}
    return names.get(type(value), type(value).__name__)


def example(name: str) -> str:
    return {
        "commit": ' (quote it: commit = "<40 hex>")',
        "version": ' (quote it: version = "1.2.3")',
    }.get(name, "")


def one_of(value: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(value, choices, n=1)
    if not close:
        return f"; expected one of {', '.join(choices)}"
    return f"; did you mean '{close[0]}'?{_look_alike(value, close[0])}"


def _look_alike(value: str, meant: str) -> str:
    """Where ``value`` differs from ``meant`` by a non-ASCII look-alike (Cyrillic U+0441 for 'c'),
    which no eye sees in the suggestion: the character and its position (from 1)."""
    if len(value) != len(meant):
        return ""
    for position, (got, want) in enumerate(zip(value, meant, strict=True), start=1):
        if got != want and not got.isascii():
            name = unicodedata.name(got, "unnamed character")
            return f" (U+{ord(got):04X} {name} at position {position}, where it has '{want}')"
    return ""
    for position, (got, want) in enumerate(zip(value, meant, strict=True)):
        if got != want and not got.isascii():
            return (
                f" ({'' if want.isascii() else 'a look-alike: '}it differs at position "
                f"{position}: U+{ord(got):04X} {unicodedata.name(got, 'unnamed character')} "
                f"where '{meant}' has '{want}')"
            )
    return ""


def unknown_name(what: str, name: str, known: tuple[str, ...]) -> str:
    """``unknown variant 'cu31'; did you mean 'cu13'?``, or the list of known names."""
    return f"unknown {what} '{name}'{one_of(name, known)}"
