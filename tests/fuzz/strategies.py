"""Inputs a careless user or a hostile file would give: real files, mutated, and raw bytes.

Mutating real inputs (our manifest, recipes, workflows, evidence) reaches deep into each reader;
random text alone mostly stops at the first syntax error. The fragments are the ones that broke
something once: nesting, a BOM, a look-alike letter, a continued last line, huge numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

FRAGMENTS: tuple[str, ...] = (
    "\n", "\r\n", "\\", "\\\n", "[", "]", "{", "}", "[[", '"', "'", '"""', "=", ",", ":", "#",
    "\ufeff", "\u0430", "\u200b", "..", "../", "/", "\x00", "\t", " ", "9" * 30, "9" * 4400,
    "-1", "1e999", "NaN", "Infinity", "true", "null", "[" * 60, "{a=" * 40, "[" * 3000,
    "${X}", "$(", "<<EOF\n", "&a ", "*a", "- ", "%0A", "::error ", "RUN ", "FROM ", "ARG X=",
    "pip install a==1 ", "git clone ", "@", "sha256:", "a" * 40, "A" * 40, "|", "\\u0000",
    "\\ud800", "\\udfff", "\u0085", "\u2028",
)  # fmt: skip

fragment = st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=12))


@st.composite
def mutated(draw: st.DrawFn, seeds: Sequence[str], *, max_steps: int = 6) -> str:
    """One of ``seeds`` after a few inserts, deletes, duplications and swaps."""
    text = draw(st.sampled_from(seeds))
    for _ in range(draw(st.integers(0, max_steps))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 80)))
        op = draw(st.sampled_from(("insert", "delete", "duplicate", "replace", "truncate")))
        if op == "insert":
            text = text[:i] + draw(fragment) + text[i:]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        elif op == "replace":
            text = text[:i] + draw(fragment) + text[j:]
        else:
            text = text[:i]
    return text


def as_bytes(texts: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Texts as UTF-8, plus raw bytes (not UTF-8, binary, BOMs)."""
    return st.one_of(
        texts.map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.binary(max_size=512),
        texts.map(lambda t: b"\xef\xbb\xbf" + t.encode("utf-8", "surrogatepass")),
    )


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@st.composite
def json_edit(draw: st.DrawFn, document: Any) -> Any:
    """``document`` (JSON-like) with one value somewhere in it replaced, dropped or added."""
    doc = json.loads(json.dumps(document))
    node = doc
    for _ in range(draw(st.integers(0, 6))):
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
            if isinstance(node[key], dict | list) and draw(st.booleans()):
                node = node[key]
                continue
            action = draw(st.sampled_from(("replace", "drop", "add")))
            if action == "replace":
                node[key] = draw(json_values)
            elif action == "drop":
                del node[key]
            else:
                node[draw(st.text(max_size=8))] = draw(json_values)
            break
        if isinstance(node, list) and node:
            index = draw(st.integers(0, len(node) - 1))
            if isinstance(node[index], dict | list) and draw(st.booleans()):
                node = node[index]
                continue
            node[index] = draw(json_values)
            break
        break
    return doc


depths = st.sampled_from((1, 31, 32, 33, 64, 500, 3000)) | st.integers(0, 80)


@st.composite
def nested(draw: st.DrawFn, seeds: Sequence[str], prefix: str, opener: str, closer: str) -> str:
    """A seed with a value nested ``depth`` deep at a line start (parsers recurse on it)."""
    depth = draw(depths)
    inner = draw(st.sampled_from(("", "1", "9" * 5000, '"x"')))
    tail = prefix + opener * depth + inner + closer * depth
    seed = draw(st.sampled_from([*seeds, ""]))
    lines = seed.splitlines(keepends=True)
    at = draw(st.integers(0, len(lines)))
    return "".join(lines[:at]) + tail + "\n" + "".join(lines[at:])


def hostile(
    seeds: Sequence[str], *, prefix: str, opener: str = "[", closer: str = "]"
) -> st.SearchStrategy[str]:
    """Mutated seeds, and seeds carrying a deeply nested value (one in four examples)."""
    return st.one_of(
        mutated(seeds),
        mutated(seeds),
        mutated(seeds),
        nested(seeds, prefix, opener, closer),
    )
