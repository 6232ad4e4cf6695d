"""The commands the lock's strict findings tell a maintainer to run are real commands.

``twinbuild lint --strict`` on this repository lists what could not be resolved here (TB205,
TB206), each with what to run where the source is reachable. Every backticked ``twinbuild ...``
in those findings goes through twinbuild's own argument parser here, so a finding can never
name a command or option that does not exist (the base's finding names the command the running
twinbuild has, not the note the lock was written with).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from twinbuild.cli.main import build_parser
from twinbuild.lint.checks import lint
from twinbuild.manifest.loader import load

REPO = Path(__file__).resolve().parents[2]
COMMAND = re.compile(r"`(twinbuild [^`]+)`")


def strict_findings() -> list[str]:
    report = lint(load(REPO / "pins/manifest.toml"), REPO, strict=True)
    return [str(f) for f in report.findings if f.code in ("TB205", "TB206")]


def parses(command: str) -> bool:
    try:
        build_parser().parse_args(shlex.split(command)[1:])
    except SystemExit:
        return False
    return True


def test_every_command_a_strict_lock_finding_names_exists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = strict_findings()
    named = {c for line in found for c in COMMAND.findall(line)}
    assert "twinbuild lock" in named
    assert any(c.startswith("twinbuild lock --upgrade ") for c in named)
    bad = sorted(c for c in named if not parses(c))
    capsys.readouterr()
    assert bad == []
    # every image's base finding says what to run, by this twinbuild's words
    manifest = load(REPO / "pins/manifest.toml")
    for image in manifest.images():
        base = [
            x
            for x in found
            if x.startswith(f"pins/lock/{image.name}.toml:") and " TB205 base: " in x
        ]
        assert len(base) == 1, image.name
        assert "`twinbuild lock`" in base[0]
        assert manifest.variant(image.variant).base.ref in base[0]


def test_a_command_that_does_not_exist_does_not_parse(capsys: pytest.CaptureFixture[str]) -> None:
    assert parses("twinbuild lock --upgrade ray")
    assert not parses("twinbuild lock --no-such-option")
    assert not parses("twinbuild no-such-command")
    capsys.readouterr()
