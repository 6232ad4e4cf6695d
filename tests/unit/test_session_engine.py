"""The test session's engine keeps one cache folder, whatever HOME a test gives git."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.session_engine import pin_cache
from tests.unit.gitrepos import isolate_git
from twinbuild.util.paths import cache_root


def test_the_cache_stays_the_users_after_a_test_moves_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("TWINBUILD_CACHE", "")  # registered, so the pin is undone afterwards
    assert pin_cache() == tmp_path / "user/.cache/twinbuild"
    isolate_git(monkeypatch, tmp_path / "home")  # what the Docker tests' projects do
    assert cache_root() == tmp_path / "user/.cache/twinbuild"


def test_a_cache_already_chosen_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TWINBUILD_CACHE", str(tmp_path / "ci-cache"))
    assert pin_cache() == tmp_path / "ci-cache"
