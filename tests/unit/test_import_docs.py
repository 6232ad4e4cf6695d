"""The `twinbuild import` example in docs/pins.md runs as written and prints what it shows."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _example() -> list[tuple[list[str], list[str]]]:
    """(command words, shown output lines) of each `$ twinbuild ...` in the Adopting section."""
    text = (REPO / "docs/pins.md").read_text()
    section = text[text.index("## Adopting twinbuild") :]
    block = re.search(r"```console\n(.*?)```", section, re.DOTALL)
    assert block is not None
    steps: list[tuple[list[str], list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((shlex.split(line[2:]), []))
        else:
            steps[-1][1].append(line)
    return steps


def _shown_in_order(shown: list[str], out: list[str]) -> None:
    """Every shown line is printed, in order; `...` stands for lines left out of the docs."""
    k = 0
    for want in shown:
        if want == "...":
            continue
        while k < len(out) and out[k] != want:
            k += 1
        assert k < len(out), f"docs/pins.md shows {want!r}, which the command does not print"
        k += 1


def test_adopting_example_runs_as_written(tmp_path: Path) -> None:
    cwd = REPO
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ran = 0
    for words, shown in _example():
        if words[0] == "cd":
            cwd = cwd / words[1]
            continue
        assert words[0] == "twinbuild"
        # The one change: the draft goes to a fresh folder, not /tmp (which a rerun would find).
        args = [str(tmp_path / "draft.toml") if w == "/tmp/draft.toml" else w for w in words[1:]]
        proc = subprocess.run(
            [sys.executable, "-m", "twinbuild", *args],
            cwd=cwd, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr  # 1: unrecognised pins, listed
        _shown_in_order(shown, proc.stdout.splitlines())
        ran += 1
    assert ran == 2
    assert (tmp_path / "draft.toml").exists()
