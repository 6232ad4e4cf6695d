"""A small shell tokenizer for RUN bodies: words that keep their physical line, split into commands.

It knows what a Dockerfile RUN line needs and no more: quoting, backslash line continuations,
comments, `$(...)`/`${...}`/backticks kept whole, the operators that end a command (`&&`, `||`,
`;`, `|`, `&`, newline), redirections (their target is dropped) and `case ... esac` patterns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Word:
    """One word or operator of a command, with the physical line it starts on."""

    text: str  # with quotes removed
    raw: str  # as written
    line: int
    op: bool = False


_OPS = ("&&", "||", ";;", ">>", "&>", "<<", "|", "&", ";", "(", ")", ">", "<")


def tokenize(chars: list[tuple[str, int]]) -> list[Word]:
    """Split a shell command into words and operators, remembering each word's physical line."""
    words: list[Word] = []
    n, i = len(chars), 0

    def at(k: int) -> str:
        return chars[k][0] if k < n else ""

    while i < n:
        c, line = chars[i]
        if c == "\\" and at(i + 1) == "\n":
            i += 2
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "\n":
            words.append(Word(";", ";", line, op=True))
            i += 1
            continue
        if c == "#":
            while i < n and chars[i][0] != "\n":
                i += 1
            continue
        j = i
        while j < n and chars[j][0].isdigit():
            j += 1
        if j > i and at(j) in "<>":
            i = j  # "2>" redirection: the digits belong to the operator
            c = chars[i][0]
        op = next((o for o in _OPS if "".join(at(i + k) for k in range(len(o))) == o), None)
        if op is not None:
            words.append(Word(op, op, line, op=True))
            i += len(op)
            continue
        text: list[str] = []
        raw: list[str] = []
        while i < n:
            c = chars[i][0]
            if c in " \t\r\n" or (c in "&|;()<>"):
                break
            if c == "\\":
                if at(i + 1) == "\n":
                    i += 2
                    continue
                text.append(at(i + 1))
                raw.append(c + at(i + 1))
                i += 2
                continue
            if c == "'":
                k = i + 1
                while k < n and chars[k][0] != "'":
                    k += 1
                if k >= n:
                    raise ValueError("unterminated single quote")
                seg = "".join(ch for ch, _ in chars[i + 1 : k])
                text.append(seg)
                raw.append("'" + seg + "'")
                i = k + 1
                continue
            if c == '"':
                k = i + 1
                seg_t: list[str] = []
                while k < n and chars[k][0] != '"':
                    if chars[k][0] == "\\" and at(k + 1) in '"\\$`\n':
                        if at(k + 1) != "\n":
                            seg_t.append(at(k + 1))
                        k += 2
                        continue
                    seg_t.append(chars[k][0])
                    k += 1
                if k >= n:
                    raise ValueError("unterminated double quote")
                text.append("".join(seg_t))
                raw.append("".join(ch for ch, _ in chars[i : k + 1]))
                i = k + 1
                continue
            if c == "$" and at(i + 1) in "({":
                close = ")" if at(i + 1) == "(" else "}"
                depth, k = 0, i + 1
                while k < n:
                    ch = chars[k][0]
                    if ch == at(i + 1):
                        depth += 1
                    elif ch == close:
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                seg = "".join(ch for ch, _ in chars[i : k + 1]).replace("\\\n", "")
                text.append(seg)
                raw.append(seg)
                i = k + 1
                continue
            if c == "`":
                k = i + 1
                while k < n and chars[k][0] != "`":
                    k += 1
                seg = "".join(ch for ch, _ in chars[i : k + 1])
                text.append(seg)
                raw.append(seg)
                i = k + 1
                continue
            text.append(c)
            raw.append(c)
            i += 1
        words.append(Word("".join(text), "".join(raw), line))
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
