"""A local build installs its lock and nothing else: the wheelhouse against a real index on
127.0.0.1 (tests/pyindex.py) with the real pip and uv.

A release published after the lock changes nothing; a file whose bytes differ from the lock's
sha256 is refused in one line and nothing of it is kept; a lock older than the pins is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import image, lock_argv, mini_project, with_pins
from tests.pyindex import PyIndex, build_wheel
from twinbuild.builder import wheelhouse
from twinbuild.builder.context import locked_files
from twinbuild.builder.locked import locked_pins
from twinbuild.cli.main import main
from twinbuild.errors import HashMismatch, LockInvalid
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import Rendered, render

PINS = """
[pins.floaty]
kind = "pypi"
range = ""
why = "a floating pin"
floating = "unpinned: the lock decides"

[pins.solid]
kind = "pypi"
version = "1.0"
why = "an exact pin"
"""


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[PyIndex]:
    with PyIndex(tmp_path / "index") as served:
        served.publish("floaty", "1.0")
        served.publish("solid", "1.0")
        # pip asks this index alone: no configuration of the machine it runs on
        for name in list(os.environ):
            if name.startswith("PIP_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        monkeypatch.setenv("PIP_INDEX_URL", served.url)
        yield served


@pytest.fixture
def project(tmp_path: Path, index: PyIndex) -> Path:
    root = mini_project(tmp_path)
    with_pins(root, PINS)
    (root / "pins/lock").mkdir()
    assert main(lock_argv(root, index.url)) == 0
    return root


def _rendered(root: Path) -> Rendered:
    return render(load(root / "pins/manifest.toml"), image("cuda"), "local", local_base="x")


def _fetch(root: Path, cache: Path) -> dict[str, str]:
    rendered = _rendered(root)
    locked = locked_pins(load(root / "pins/manifest.toml"), root, rendered)
    context = cache.parent / "ctx"
    wheelhouse.download_wheels(rendered, context, cache, lambda _: None, locked)
    return {w.name: w.parent.name for w in (context / ".twinbuild/wheels").rglob("*.whl")}


def test_the_layer_files_carry_the_locks_hashes(project: Path, index: PyIndex) -> None:
    rendered = _rendered(project)
    locked = locked_pins(load(project / "pins/manifest.toml"), project, rendered)
    floaty = next((index.root / "files").glob("floaty-1.0-*.whl"))
    import hashlib

    sha = hashlib.sha256(floaty.read_bytes()).hexdigest()
    assert locked["floaty"].line == f"floaty==1.0 --hash=sha256:{sha}"
    files = locked_files(rendered, locked)
    layer = next(p.layer for p in rendered.installed if p.name == "floaty")
    assert f"floaty==1.0 --hash=sha256:{sha}\n" in files[f".twinbuild/pip/{layer}.txt"]


def test_a_newer_release_changes_nothing_until_the_lock_moves(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    index.publish("floaty", "1.1")
    got = _fetch(project, tmp_path / "cache")
    assert sorted(got) == ["floaty-1.0-py3-none-any.whl", "solid-1.0-py3-none-any.whl"]


def test_a_file_of_other_bytes_is_refused_in_one_line_and_not_kept(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    files = index.root / "files"
    next(files.glob("floaty-1.0-*.whl")).unlink()
    build_wheel(files, "floaty", "1.0", ("other-bytes>=0",))  # the same name, other bytes
    index._page("floaty")  # its page now links the new bytes
    with pytest.raises(HashMismatch) as err:
        _fetch(project, tmp_path / "cache")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("pins.floaty: floaty-1.0-py3-none-any.whl has sha256 ")
    assert "twinbuild lock --upgrade floaty" in message
    assert not list((tmp_path / "cache/wheels/amd64").glob("floaty*"))  # nothing kept


def test_a_lock_older_than_the_pins_is_refused(project: Path) -> None:
    manifest = project / "pins/manifest.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace('version = "1.0"', 'version = "2.0"'),
        encoding="utf-8",
    )
    with pytest.raises(LockInvalid) as err:
        locked_pins(load(manifest), project, _rendered(project))
    assert str(err.value) == (
        "pins/lock/local/cuda-amd64.toml: the pins the local profile installs changed: the local "
        "build installs only its lock; run `twinbuild lock` and commit the lock"
    )


def test_a_project_without_locks_builds_from_the_pins(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    assert locked_pins(load(root / "pins/manifest.toml"), root, _rendered(root)) == {}
