"""Text from files, answers and arguments made safe to show: one line on a terminal, one cell of
a markdown table. The one place that decides how a value that could break either is written.

A version, a reason or a path may carry a newline (the rest would start a line of its own: under
GitHub Actions a line starting ``::error`` is a workflow command), an ESC (a terminal would take
what follows as a command: colours, a moved cursor, a rewritten title) or a ``|`` (a new column
in a step summary's table). Here every character that is not printable is written as its
escape (``\\n``, ``\\x1b``, ``\\u2028``), and a cell's ``|`` as ``\\|``.
"""

from __future__ import annotations

from collections.abc import Iterable


def one_line(text: str) -> str:
    """``text`` with every character that is not printable (tab, newline, ESC, C1, U+2028, an
    invisible format character) written as its escape, so it shows as one plain line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or repr(char)[1:-1]


def cell(text: str) -> str:
    """``text`` as one cell of a markdown table row: one line, its ``|`` escaped."""
    return one_line(text).replace("|", "\\|")


def code_cell(text: str) -> str:
    """``text`` as a code span in a cell: as :func:`cell`, a backtick (which would end the
    span) written as ``'``."""
    return "`" + cell(text).replace("`", "'") + "`"


def row(cells: Iterable[str]) -> str:
    """One markdown table row of cells already made safe (:func:`cell`, :func:`code_cell`), or
    markup of twinbuild's own."""
    return "| " + " | ".join(cells) + " |"
