"""Paths that were superlinear stay linear: counted in operations, never in seconds.

Issue 41 measured them: loading and linting 750 variants took 1.5 s of CPU and 3,000 took 12.3 s
(each image asked every group whether it held the variant, and every pin whether it applied:
a scan of a tuple of n variants, n times); a 20,000-stage import took 16.8 s (each stage's chain
asked whether a stage was in it by scanning the chain); a 20,000-pin draft 13.5 s (tomlkit's
cost per item). Here the scans are counted: a tuple or string that counts each element a
membership test or comparison visits, handed to the real code. The timings are in
``nox -s bench`` (tools/bench/growth.py).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from tools.bench.generate import variants_manifest
from twinbuild.manifest import reader
from twinbuild.manifest.loader import loads
from twinbuild.manifest.model import Group, PinManifest

VISITS = [0]


class Counted(tuple[str, ...]):
    """A tuple whose ``in`` counts the elements it looks at (all of them, when absent)."""

    __slots__ = ()

    def __contains__(self, item: object) -> bool:
        for visited, element in enumerate(self, 1):
            if element == item:
                VISITS[0] += visited
                return True
        VISITS[0] += len(self)
        return False


def _counted_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every group the reader makes holds its members in a :class:`Counted`."""

    def group(*, name: str, members: tuple[str, ...], line: int = 0) -> Group:
        return Group(name=name, members=Counted(members), line=line)

    monkeypatch.setattr(reader, "Group", group)


def _visits(n: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Member visits of loading a manifest of ``n`` variants and resolving every image."""
    _counted_groups(monkeypatch)
    VISITS[0] = 0
    manifest = loads(variants_manifest(n, pins=5), Path("pins/manifest.toml"))
    manifest = replace(  # every pin's variants counted too; fresh caches
        manifest,
        pins={k: replace(p, variants=Counted(p.variants)) for k, p in manifest.pins.items()},
        _resolved={}, _groups_of={}, _pins_on={},
    )  # fmt: skip
    for image in manifest.images():
        manifest.resolve(image)
    return VISITS[0]


def test_many_variants_cost_linear_member_visits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: 200 variants cost ~100,000 visits, 400 four times that. Now a few per variant."""
    small, large = _visits(200, monkeypatch), _visits(400, monkeypatch)
    assert large <= 10 * 400, large
    assert large <= 3 * max(small, 1), (small, large)


def test_the_manifest_still_resolves_each_images_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = loads(variants_manifest(6, pins=2), Path("pins/manifest.toml"))
    first = manifest.images()[0]
    assert manifest.selectors(first) == ("nvidia", first.variant, "amd64")
    assert manifest.selectors(manifest.images()[1])[0] == "amd"
    assert isinstance(manifest, PinManifest)


# --- stages -----------------------------------------------------------------------------------


EQ = [0]


class Name(str):
    """A stage name that counts the comparisons made with it."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        EQ[0] += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _comparisons(n: int) -> int:
    from twinbuild.recipe.scan import Recipe

    names: list[str] = [Name(f"s{i}") for i in range(n)]
    recipe = Recipe(
        path=Path("Dockerfile"), pins=[], args=[], used_vars=set(), copies=[], stages=names,
        unrecognised=[], envs={}, parents={names[i]: Name(names[i - 1]) for i in range(1, n)},
    )  # fmt: skip
    EQ[0] = 0
    assert len(recipe.stage_chain(names[-1])) == n
    return EQ[0]


def test_a_chain_of_n_stages_costs_linear_comparisons() -> None:
    """Before: 2,000 stages cost ~2,000,000 comparisons (the chain scanned for each stage)."""
    assert _comparisons(2000) <= 4 * 2000


# --- the draft --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["plain", 'a "quoted" \\ back', "tab\tnew\nline\r", "esc\x1b del\x7f nul\x00", "é ✓ 𝄞", ""],
)
def test_a_drafted_value_reads_back_as_it_was(text: str) -> None:
    """The pins are written without tomlkit now: tomllib, the real parser, reads each string
    (and each key) back as it was; the golden drafts of tests/fixtures compare the bytes."""
    from twinbuild.importer.draft import _key, _string

    doc = f"{_key(text or 'x')} = 1\n[pins.{_key('a-b')}]\nv = {_string(text)}\n"
    parsed = tomllib.loads(doc)
    assert parsed["pins"]["a-b"]["v"] == text
    assert parsed[text or "x"] == 1


def test_a_note_of_several_lines_stays_a_comment() -> None:
    from twinbuild.importer.draft import _comment

    assert tomllib.loads(_comment("one\n\ntwo") + "\nx = 1\n") == {"x": 1}
