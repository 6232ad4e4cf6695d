"""The recipe scanner (lint and import read every Dockerfile through it) on any text."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given

from tests.fuzz.conftest import outcome
from tests.fuzz.strategies import as_bytes, mutated
from tests.helpers import FIXTURES, MINI
from twinbuild.recipe.scan import Recipe, parse

SEEDS = [
    p.read_text()
    for p in sorted(
        [*(FIXTURES / "recipes").glob("*.Dockerfile"), *MINI.glob("images/*/Dockerfile")]
    )
]


@given(data=as_bytes(mutated(SEEDS)))
@example(data=b"\x1eARG BASE\nFROM ${BASE}\n")  # found by the deep profile: an IndexError
def test_any_recipe_ends_in_a_recipe_or_our_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "Dockerfile"
    path.write_bytes(data)
    result = outcome(lambda: parse(path), folder=tmp_path)
    assert isinstance(result, Recipe) or str(result).startswith(str(path))
