"""What a warm resolver cache may hold back from ``twinbuild lock`` (#38): no index page older
than ``TWINBUILD_LOCK_FRESH`` seconds. A lock made afresh sees a release published before that
window and may miss one published within it (both asserted, so the window is what decides); a
pin moved to a release newer than the cache's copy of its page still resolves; a no-op asks no
index; a window that is not whole seconds is one line. Against the real index on 127.0.0.1 and
the real uv (which calls that index's pages fresh for minutes: they carry a Last-Modified and
no Cache-Control).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import lock_argv, with_pins
from tests.pyindex import PyIndex
from tests.unit.test_lock import index, locks, project, versions
from twinbuild.cli.main import main
from twinbuild.closure import lockfile

__all__ = ["index", "project"]  # the fixtures, shared with test_lock.py


@pytest.mark.parametrize(("window", "seen"), [("0", "1.1"), ("600", "1.0")])
def test_a_fresh_lock_sees_every_release_older_than_the_window(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, window: str, seen: str,
) -> None:  # fmt: skip
    assert main(lock_argv(project, index.url)) == 0  # the cache now holds floaty's page: 1.0
    assert versions(project, "cuda-amd64")["floaty"] == "1.0"
    index.publish("floaty", "1.1")
    lockfile.lock_path(project, "cuda-amd64").unlink()
    before = locks(project)
    capsys.readouterr()
    # the window: 0 s, so the page cached a moment ago is too old; 600 s, so it may answer
    monkeypatch.setenv("TWINBUILD_LOCK_FRESH", window)
    assert main(lock_argv(project, index.url)) == 0
    out = capsys.readouterr().out
    assert "cuda-amd64: created" in out
    assert versions(project, "cuda-amd64")["floaty"] == seen
    assert locks(project)["rocm-amd64.toml"] == before["rocm-amd64.toml"]  # not stale: kept


def test_old_pages_are_forgotten_and_file_metadata_kept(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    from twinbuild.closure import uv
    from twinbuild.util.paths import cache_root

    assert main(lock_argv(project, index.url)) == 0
    cache = cache_root() / "uv"
    pages = [p for p in cache.glob("simple-v*/**/*") if p.is_file()]
    kept = sorted(p for p in cache.rglob("*") if p.is_file() and p not in pages)
    assert pages, "uv keeps no index pages where forget_old_pages looks: its layout moved"
    now = max(p.stat().st_mtime for p in pages)
    assert uv.forget_old_pages(now=now - 3600) == 0  # an hour ago, every page was young
    assert uv.forget_old_pages(now=now + 601) == len(pages)  # 601 s later, all too old
    assert not [p for p in cache.glob("simple-v*/**/*") if p.is_file()]
    assert sorted(p for p in cache.rglob("*") if p.is_file()) == kept


def test_a_pin_moved_past_the_cached_page_resolves(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    index.publish("solid", "1.5", ("dep-a>=1.0",))
    manifest = project / "pins/manifest.toml"
    with_pins(project, manifest.read_text()[manifest.read_text().index("[pins."):]
               .replace('version = "1.0"', 'version = "1.5"'))  # fmt: skip
    capsys.readouterr()
    assert main(lock_argv(project, index.url)) == 0
    assert "  solid: 1.0 -> 1.5" in capsys.readouterr().out
    assert versions(project, "rocm-amd64")["solid"] == "1.5"


def test_a_noop_lock_asks_no_index(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    asked = len(index.served)
    assert asked > 0
    capsys.readouterr()
    assert main(lock_argv(project, index.url)) == 0
    assert "rebuild: nothing" in capsys.readouterr().out
    assert len(index.served) == asked


def test_a_window_that_is_not_whole_seconds_is_one_line(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("TWINBUILD_LOCK_FRESH", "ten")
    assert main(lock_argv(project, index.url)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "$TWINBUILD_LOCK_FRESH" in err
    assert locks(project) == {}
    assert index.served == []


def test_a_noop_lock_starts_no_resolver(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from twinbuild.closure import uv

    assert main(lock_argv(project, index.url)) == 0

    def no_uv() -> str:
        raise AssertionError("a no-op lock looked for uv")

    monkeypatch.setattr(uv, "binary", no_uv)
    capsys.readouterr()
    assert main(lock_argv(project, index.url)) == 0
    assert "rebuild: nothing" in capsys.readouterr().out


def test_the_cache_never_answers_with_a_release_older_than_its_page_lists(
    index: PyIndex,
) -> None:
    """uv from the cache alone skips, without a word at its default level, a release its
    cached page lists but whose metadata it never fetched, and resolves an older one. The
    page of floaty asked afresh on its own (``--no-deps``: no metadata) lists 1.1; the
    resolution must still be 1.1, asked of the index, never the cached 1.0."""
    from twinbuild.closure import uv

    index.publish("floaty-b", "1.0", ("dep-a>=1.0",))
    ask = uv.Ask(requirements=("floaty-b",), python="3.11", platform="x86_64-manylinux_2_28",
                 index_url=index.url)  # fmt: skip
    assert {f.name: f.version for f in uv.resolve(ask)}["floaty-b"] == "1.0"
    index.publish("floaty-b", "1.1", ("dep-a>=1.0",))
    uv._refresh_page(ask, "floaty-b")  # the page now lists 1.1; 1.1's metadata is not cached
    assert {f.name: f.version for f in uv.resolve(ask)}["floaty-b"] == "1.1"
