"""The tokenizers: shell words for RUN, Docker's blank-split words for ARG/ENV/FROM/COPY."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from twinbuild.recipe.shell import Text, Word, docker_words, simple_commands, tokenize


def _text(*lines: str, first: int = 10) -> Text:
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    return Text("\n".join(lines) + "\n", tuple(starts), tuple(range(first, first + len(lines))))


def test_words_operators_quotes_and_lines() -> None:
    words = tokenize(_text(
        "cd /x && pip install 'a b' \"c$D\" e\\ f \\",
        "  $(echo \"g h\") `uname -m` 2>/dev/null # comment",
        "x=1; echo ok",
    ))  # fmt: skip
    got = [(w.text, w.line, w.op) for w in words]
    assert got == [
        ("cd", 10, False), ("/x", 10, False), ("&&", 10, True), ("pip", 10, False),
        ("install", 10, False), ("a b", 10, False), ("c$D", 10, False), ("e f", 10, False),
        ('$(echo "g h")', 11, False), ("`uname -m`", 11, False), (">", 11, True),
        ("/dev/null", 11, False), (";", 11, True), ("x=1", 12, False), (";", 12, True),
        ("echo", 12, False), ("ok", 12, False), (";", 12, True),
    ]  # fmt: skip
    assert [[w.text for w in c] for c in simple_commands(words)] == [
        ["cd", "/x"], ["pip", "install", "a b", "c$D", "e f", '$(echo "g h")', "`uname -m`"],
        ["x=1"], ["echo", "ok"],
    ]  # fmt: skip


@pytest.mark.parametrize("read", [tokenize, docker_words])
@pytest.mark.parametrize(("body", "error"), [("echo 'x", "single"), ('echo "x', "double")])
def test_unterminated_quotes_are_errors(
    read: Callable[[Text], list[Word]], body: str, error: str
) -> None:
    with pytest.raises(ValueError, match=f"unterminated {error} quote"):
        read(Text.one_line(body, 1))


def test_docker_words_keep_semicolons_and_split_on_blanks_only() -> None:
    words = docker_words(_text('PYTORCH_ROCM_ARCH=gfx90a;gfx942 B="x y" C=a&b \\', "  D=1"))
    assert [(w.text, w.line) for w in words] == [
        ("PYTORCH_ROCM_ARCH=gfx90a;gfx942", 10), ("B=x y", 10), ("C=a&b", 10), ("D=1", 11),
    ]  # fmt: skip


def test_docker_words_take_dollars_backticks_and_escapes_as_written() -> None:
    # Docker's word reader shares the shell's: its plain run takes `$(` and backticks, so they
    # stay literal here, while quotes and escapes are still removed.
    words = docker_words(Text.one_line("A=$(x y) B=`u v` C='p q'\\ r D=a\\\nb", 3))
    assert [(w.text, w.raw) for w in words] == [
        ("A=$(x", "A=$(x"), ("y)", "y)"), ("B=`u", "B=`u"), ("v`", "v`"),
        ("C=p q r", "C='p q'\\ r"), ("D=ab", "D=ab"),  # a line continuation is no character
    ]  # fmt: skip


def test_docker_words_keep_other_blanks_inside_a_word() -> None:
    # A form feed or no-break space is not one of Docker's separators: it stays in the word
    # (it once fell through to the double-quote reader and failed as an unterminated quote).
    assert [w.text for w in docker_words(Text.one_line("A=b\x0cc D=e\xa0f", 1))] == [
        "A=b\x0cc",
        "D=e\xa0f",
    ]
