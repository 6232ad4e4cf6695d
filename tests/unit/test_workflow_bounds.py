"""The workflow reader bounds what PyYAML is handed before it parses.

PyYAML's scanner does work per token for every open ``[`` or ``{``: 3,000 of them take seconds
(a fuzz example once ran past its deadline on a loaded runner). A workflow nests a few levels, so
bracket nesting past :data:`~twinbuild.ci.workflows.MAX_FLOW_DEPTH` is refused before parsing,
with the one line a parser out of stack gets; balanced brackets in a script (``[[ -n x ]]``) are not
nesting and read as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from twinbuild.ci import workflows
from twinbuild.errors import ConfigError


def test_brackets_nested_past_the_bound_are_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "deep.yml"
    path.write_text("on: push\njobs:\n  a: " + "[" * 3000 + "\n")
    with pytest.raises(ConfigError) as info:
        workflows.check([path])
    assert str(info.value) == (
        f"{path}: nested too deeply to read (a workflow needs at most 32 levels); is this the "
        "right file?"
    )


def test_a_file_over_the_bound_is_never_handed_to_pyyaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal comes before parsing, not from PyYAML running out of stack seconds later."""
    composed: list[str] = []
    real = yaml.compose

    def compose(text: str, Loader: type[yaml.SafeLoader]) -> object:
        composed.append(text)
        return real(text, Loader=Loader)

    monkeypatch.setattr(yaml, "compose", compose)
    path = tmp_path / "deep.yml"
    path.write_text("on: " + "[" * (workflows.MAX_FLOW_DEPTH + 1) + "\n")
    with pytest.raises(ConfigError, match="nested too deeply to read"):
        workflows.check([path])
    assert composed == []
    path.write_text("on: " + "[" * workflows.MAX_FLOW_DEPTH + "]" * workflows.MAX_FLOW_DEPTH)
    with pytest.raises(ConfigError, match="nested over 32 levels deep"):
        workflows.check([path])
    assert len(composed) == 1


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
