"""Shared test helpers: a copy of the mini project that a test can edit."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
MINI = FIXTURES / "mini"


def mini_project(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/mini (pins/ and images/)."""
    root = tmp_path / "proj"
    shutil.copytree(MINI, root, ignore=shutil.ignore_patterns("build", ".twinbuild"))
    return root


def edit(path: Path, old: str, new: str) -> None:
    """Replace one exact occurrence of ``old`` (fails loudly when it is not there exactly once)."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    path.write_text(text.replace(old, new))
