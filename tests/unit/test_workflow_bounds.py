"""The workflow reader bounds what PyYAML is handed before it parses.

PyYAML's scanner does work per token for every open ``[`` or ``{``: 3,000 of them take seconds
(a fuzz example once ran past its deadline on a loaded runner). A workflow nests a few levels, so
bracket nesting past :data:`~twinbuild.ci.workflows.MAX_FLOW_DEPTH` is refused before parsing,
with one line naming the file and line; balanced brackets in a script (``[[ -n x ]]``) are not
nesting and read as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from twinbuild.ci import workflows
from twinbuild.errors import ConfigError


def test_brackets_nested_past_the_bound_are_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "deep.yml"
    path.write_text("on: push\njobs:\n  a: " + "[" * 3000 + "\n")
    with pytest.raises(ConfigError) as info:
        workflows.check([path])
    assert str(info.value) == (
        f"{path}:3: [ and {{ nested over {workflows.MAX_FLOW_DEPTH} levels deep (every bracket "
        "counts, quoted ones too); a workflow needs a few: is this the right file?"
    )


def test_nesting_at_the_bound_is_parsed_and_judged(tmp_path: Path) -> None:
    path = tmp_path / "at.yml"
    depth = workflows.MAX_FLOW_DEPTH
    path.write_text("on: push\nx: " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(ConfigError, match="nested over 32 levels deep"):
        workflows.check([path])  # parsed: the shape check after parsing still holds at 32


def test_balanced_brackets_in_scripts_are_not_nesting(tmp_path: Path) -> None:
    script = '          [[ -n "${{ github.sha }}" ]] && echo {} [ ]\n' * 500
    path = tmp_path / "ci.yml"
    path.write_text(
        "on: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n"
        "    steps:\n      - run: |\n" + script
    )
    assert workflows.check([path]) == []
