"""The test session's engine keeps one cache folder, whatever HOME a test gives git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.session_engine import pin_cache, warm_root
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


def test_the_kept_data_root_is_one_sessions_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sessions at once (a worktree's and the checkout's) must not share one dockerd data
    root: the second gets None, so a fresh one, until the first lets go."""
    monkeypatch.delenv("TWINBUILD_TEST_ENGINE", raising=False)
    first = warm_root(tmp_path)
    assert first is not None
    assert first.data == tmp_path / "test-engine/data"
    assert first.data.is_dir()
    try:
        assert warm_root(tmp_path) is None
    finally:
        os.close(first.lock)
    again = warm_root(tmp_path)
    assert again is not None
    os.close(again.lock)


def test_fresh_asks_for_a_data_root_of_the_session_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TWINBUILD_TEST_ENGINE", "fresh")
    assert warm_root(tmp_path) is None
    assert not (tmp_path / "test-engine").exists()
