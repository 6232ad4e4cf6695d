"""Line numbers of keys in a TOML text.

tomllib gives values, not positions; findings must name the line. This index maps each dotted key
path (``pins.tms.commit``) to the line that declares it: the ``key = value`` line, the ``[table]``
header, or the parent key's line for keys inside an inline table. The Nth ``[[array.of.tables]]``
entry is the path ``(..., "[N]")``, so each entry's keys have their own lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^\s*(?P<open>\[\[?)\s*(?P<key>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEYVAL = re.compile(
    r"""^\s*(?P<key>(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'""")


def split_key(raw: str) -> tuple[str, ...]:
    """Split a dotted TOML key (``a."b.c".d``) into its parts, unquoted."""
    return tuple(p[1:-1] if p[0] in "\"'" else p for p in _PART.findall(raw))


@dataclass(slots=True)
class KeyLines:
    """Dotted key path -> 1-based line, built once per text."""

    lines: dict[tuple[str, ...], int] = field(default_factory=dict)

    @classmethod
    def index(cls, text: str) -> KeyLines:
        found: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        entries: dict[tuple[str, ...], int] = {}
        in_multiline: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            header = _HEADER.match(line)
            if header:
                table = split_key(header.group("key"))
                found.setdefault(table, number)
                if header.group("open") == "[[":
                    n = entries.get(table, 0)
                    entries[table] = n + 1
                    table = (*table, f"[{n}]")
                    found.setdefault(table, number)
                continue
            keyval = _KEYVAL.match(line)
            if keyval:
                path = table + split_key(keyval.group("key"))
                found.setdefault(path, number)
                rest = line[keyval.end() :]
                for quote in ('"""', "'''"):
                    if rest.count(quote) % 2 == 1:
                        in_multiline = quote
                # keys inside an inline table live on this line
                for inner in re.finditer(r"([A-Za-z0-9_-]+)\s*=", rest):
                    found.setdefault((*path, inner.group(1)), number)
        return cls(found)

    def line_of(self, path: tuple[str, ...]) -> int:
        """The line of the longest declared prefix of ``path`` (0 when none is declared)."""
        for end in range(len(path), 0, -1):
            number = self.lines.get(path[:end])
            if number is not None:
                return number
        return 0
