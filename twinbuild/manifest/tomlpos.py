"""Line numbers of keys in a TOML text.

tomllib gives values, not positions; findings must name the line. This index maps each dotted key
path (``pins.tms.commit``) to the line that declares it: the ``key = value`` line, the ``[table]``
header, or the parent key's line for keys inside an inline table. The Nth ``[[array.of.tables]]``
entry is the path ``(..., "[N]")``, so each entry's keys have their own lines.

Lines are TOML's (:func:`twinbuild.util.bounded.lines`: LF, or CRLF), and the index is built in
one pass that looks at each character a bounded number of times: a 60 kB ``why`` or comment once
took a backtracking regex 20 seconds. The loader bounds the text itself (4 MiB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from twinbuild.util import bounded

_ONE_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
_KEYVAL = re.compile(rf"\s*(?P<key>{_ONE_KEY}(?:[ \t]*\.[ \t]*{_ONE_KEY})*)[ \t]*=")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'""")
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def split_key(raw: str) -> tuple[str, ...]:
    """Split a dotted TOML key (``a."b.c".d``) into its parts, unquoted."""
    return tuple(p[1:-1] if p[0] in "\"'" else p for p in _PART.findall(raw))


def _header(line: str) -> tuple[str, str] | None:
    """``("[" or "[[", key)`` when ``line`` is a table header (a comment may follow), else None."""
    text = line.strip()
    if not text.startswith("["):
        return None
    opener = "[[" if text.startswith("[[") else "["
    closer = "]]" if opener == "[[" else "]"
    end = text.find(closer, len(opener))
    if end < 0:
        return None
    rest = text[end + len(closer) :].lstrip()
    key = text[len(opener) : end].strip()
    if not key or "]" in key or (rest and not rest.startswith("#")):
        return None
    return opener, key


def _inline_keys(rest: str) -> list[str]:
    """The keys of the inline table ``rest`` starts with (``{ a = 1, b = { c = 2 } }``), in one
    pass over it: strings are skipped, a comment ends the scan."""
    text = rest.lstrip()
    if not text.startswith("{"):
        return []
    found: list[str] = []
    i, n, want_key = 1, len(text), True
    while i < n:
        char = text[i]
        if char in "\"'":
            end = _string_end(text, i)
            if want_key:
                j = end
                while j < n and text[j] in " \t":
                    j += 1
                if j < n and text[j] == "=":
                    found.append(text[i + 1 : end - 1])
                want_key = False
            i = end
            continue
        if char == "#":
            break
        if char in "{,":
            want_key = True
        elif want_key and char in _BARE:
            j = i
            while j < n and text[j] in _BARE:
                j += 1
            k = j
            while k < n and text[k] in " \t":
                k += 1
            if k < n and text[k] == "=":
                found.append(text[i:j])
            want_key = False
            i = j
            continue
        elif char not in " \t":
            want_key = False
        i += 1
    return found


def _string_end(text: str, start: int) -> int:
    """The index just past the string that opens at ``start`` (or the end of the text)."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\" and quote == '"':
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return len(text)


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
        for number, line in enumerate(bounded.lines(text), start=1):
            if in_multiline is not None:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            header = _header(line)
            if header is not None:
                opener, key = header
                table = split_key(key)
                found.setdefault(table, number)
                if opener == "[[":
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
                for inner in _inline_keys(rest):
                    found.setdefault((*path, inner), number)
        return cls(found)

    def line_of(self, path: tuple[str, ...]) -> int:
        """The line of the longest declared prefix of ``path`` (0 when none is declared)."""
        for end in range(len(path), 0, -1):
            number = self.lines.get(path[:end])
            if number is not None:
                return number
        return 0
