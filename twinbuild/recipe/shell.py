"""A small shell tokenizer for RUN bodies: words that keep their physical line, split into commands.

It knows what a Dockerfile RUN line needs and no more: quoting, backslash line continuations,
comments, `$(...)`/`${...}`/backticks kept whole, the operators that end a command (`&&`, `||`,
`;`, `|`, `&`, newline), redirections (their target is dropped) and `case ... esac` patterns.
:func:`docker_words` splits the other instructions (ARG, ENV, FROM, COPY ...) the way Docker does:
on blanks only, so ``ENV ARCHS=gfx90a;gfx942`` is one word.

Both walk a :class:`Text` (the instruction as one string plus where each physical line starts)
and jump over plain runs of characters with a regular expression, so a recipe is read in time
linear in its length with a small constant.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple


class Word(NamedTuple):
    """One word or operator of a command, with the physical line it starts on.

    A named tuple, not a dataclass: a recipe makes one per word, and tuples are built fastest.
    """

    text: str  # with quotes removed
    raw: str  # as written
    line: int
    op: bool = False


@dataclass(frozen=True, slots=True)
class Text:
    """Characters of an instruction and the physical line each one came from."""

    s: str
    starts: tuple[int, ...]  # offset in ``s`` where each physical line begins, ascending
    lines: tuple[int, ...]  # that physical line's number in the file

    @classmethod
    def one_line(cls, s: str, line: int) -> Text:
        return cls(s, (0,), (line,))

    def line_at(self, offset: int) -> int:
        return self.lines[max(bisect_right(self.starts, offset) - 1, 0)]


_PLAIN = re.compile(r"[^\s'\"\\$`&|;()<>]+")
_DQ_PLAIN = re.compile(r'[^"\\]+')
_DOCKER_PLAIN = re.compile(r"[^\s'\"\\]+")
_SHELL_STOPS = " \t\r\n&|;()<>"  # where _PLAIN stops and a shell word ends
_DOCKER_STOPS = " \t\r\n"  # Docker splits on blanks only


# One token per match: blanks, a newline, a comment, an operator (with a redirection's fd
# digits), or a word made of plain runs, complete quotes and escapes. What it cannot take whole
# ($(...), ${...}, backticks, an unterminated quote) is read by hand in _word.
_TOKEN = re.compile(
    r"""(?:[ \t\r]|\\\n)*
    (?:(?P<nl>\n)
    |(?P<comment>\#[^\n]*)
    |(?P<op>\d*(?:>>|&>|<<|[<>])|&&|\|\||;;|[|&;()])
    |(?P<word>(?:[^\s'"\\$`&|;()<>]+|'[^']*'|"(?:[^"\\]|\\.)*"|\\.|\$(?![({]))+)
    )?""",
    re.VERBOSE | re.DOTALL,
)
_HARD = frozenset("$`'\"\\")  # after a word: what only _word reads ($(, `, a lone quote)


def tokenize(text: Text) -> list[Word]:
    """Split a shell command into words and operators, remembering each word's physical line."""
    s = text.s
    n = len(s)
    starts, numbers = text.starts, text.lines
    last = len(starts) - 1
    li = 0
    words: list[Word] = []
    append = words.append
    match = _TOKEN.match
    plain = _PLAIN.match
    i = 0
    while i < n:
        m = match(s, i)
        if m is None:  # never: every part of _TOKEN is optional, so it matches everywhere
            break
        kind = m.lastgroup
        e = m.end()
        at = m.start(kind) if kind else e
        while li < last and starts[li + 1] <= at:  # offsets only grow: walk the line table
            li += 1
        if kind == "word" and (e >= n or s[e] not in _HARD):
            raw = m.group(kind)
            if "'" in raw or '"' in raw or "\\" in raw:
                e, word_text, raw = _word(s, at, plain, _SHELL_STOPS)
                append(Word(word_text, raw, numbers[li]))
            else:
                append(Word(raw, raw, numbers[li]))
            i = e
        elif kind == "nl":
            append(Word(";", ";", numbers[li], True))
            i = e
        elif kind == "op":
            op = m.group(kind).lstrip("0123456789")
            append(Word(op, op, numbers[li], True))
            i = e
        elif kind == "comment":
            i = e
        elif at >= n:
            break
        else:
            end, word_text, raw = _word(s, at, plain, _SHELL_STOPS)
            if end == at:  # not a word after all: one character the shell ignores here
                i = at + 1
                continue
            append(Word(word_text, raw, numbers[li]))
            i = end
    return words


def _word(
    s: str, i: int, plain: Callable[[str, int], re.Match[str] | None], stops: str
) -> tuple[int, str, str]:
    """One word starting at ``i``, for both readers: (end, text without quotes, text as written).

    ``plain`` matches a run that needs no care; ``stops`` are the characters that end a word.
    Docker's plain run takes ``$`` and backticks too, so only the shell ever reaches those branches.
    """
    n = len(s)
    out: list[str] = []
    raw: list[str] = []
    while i < n:
        m = plain(s, i)
        if m:
            out.append(m.group())
            raw.append(m.group())
            i = m.end()
            continue
        c = s[i]
        if c in stops:
            break
        if c == "\\":
            if s.startswith("\n", i + 1):
                i += 2
                continue
            nxt = s[i + 1 : i + 2]
            out.append(nxt)
            raw.append(c + nxt)
            i += 2
        elif c == "'":
            k = s.find("'", i + 1)
            if k < 0:
                raise ValueError("unterminated single quote")
            out.append(s[i + 1 : k])
            raw.append(s[i : k + 1])
            i = k + 1
        elif c == '"':
            i = _double_quoted(s, i, out, raw)
        elif c == "$" and s[i + 1 : i + 2] in ("(", "{"):
            k = _closing(s, i + 1)
            seg = s[i : k + 1].replace("\\\n", "")
            out.append(seg)
            raw.append(seg)
            i = k + 1
        elif c == "`":
            k = s.find("`", i + 1)
            k = n - 1 if k < 0 else k
            out.append(s[i : k + 1])
            raw.append(s[i : k + 1])
            i = k + 1
        else:  # a lone "$"
            out.append(c)
            raw.append(c)
            i += 1
    return i, "".join(out), "".join(raw)


def _double_quoted(s: str, i: int, out: list[str], raw: list[str]) -> int:
    n = len(s)
    k = i + 1
    seg: list[str] = []
    while k < n and s[k] != '"':
        m = _DQ_PLAIN.match(s, k)
        if m:
            seg.append(m.group())
            k = m.end()
            continue
        if s[k] == "\\" and s[k + 1 : k + 2] in ('"', "\\", "$", "`", "\n"):
            if s[k + 1] != "\n":
                seg.append(s[k + 1])
            k += 2
            continue
        seg.append(s[k])
        k += 1
    if k >= n:
        raise ValueError("unterminated double quote")
    out.append("".join(seg))
    raw.append(s[i : k + 1])
    return k + 1


def _closing(s: str, k: int) -> int:
    """Where the bracket opened at ``k`` closes (nesting counted); the last index if never."""
    open_, close = s[k], ")" if s[k] == "(" else "}"
    depth = 0
    n = len(s)
    while k < n:
        ch = s[k]
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return k
        k += 1
    return n - 1


def docker_words(text: Text) -> list[Word]:
    """Words of a non-RUN instruction, split as Docker splits them: on blanks, quotes removed.

    A `;` or `&` is part of a value here (``ENV ARCHS=gfx90a;gfx942``), unlike in a shell.
    """
    s = text.s
    n = len(s)
    words: list[Word] = []
    docker_plain = _DOCKER_PLAIN.match
    i = 0
    while i < n:
        c = s[i]
        if c in " \t\r\n":
            i += 1
            continue
        if c == "\\" and s.startswith("\n", i + 1):
            i += 2
            continue
        m = docker_plain(s, i)
        if m and (m.end() >= n or s[m.end()] in _DOCKER_STOPS):  # most words: one plain run
            words.append(Word(m.group(), m.group(), text.line_at(i)))
            i = m.end()
            continue
        start = i
        i, word_text, raw = _word(s, i, docker_plain, _DOCKER_STOPS)
        words.append(Word(word_text, raw, text.line_at(start)))
    return words


def simple_commands(words: list[Word]) -> Iterator[list[Word]]:
    """Simple commands: words between operators, without redirections and `case` patterns."""
    cmd: list[Word] = []
    skip_next = False
    for w in words:
        if skip_next and not w.op:
            skip_next = False
            continue
        if w.op and w.text in (">", ">>", "<", "&>", "<<"):
            skip_next = True
            continue
        if w.op:
            if w.text == ")" and cmd and cmd[0].text == "case":
                cmd = []  # `case X in pat)`: what follows the pattern is the command
            elif w.text == ")" and len(cmd) <= 2:
                cmd = []  # `pat)` or `a|b)` inside a case
            if cmd:
                yield cmd
            cmd = []
            continue
        cmd.append(w)
    if cmd:
        yield cmd
