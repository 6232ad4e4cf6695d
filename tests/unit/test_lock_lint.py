"""The lock lint (TB201-TB206) on locks the real ``twinbuild lock`` made against a local index:
each finding names the lock file; TB205 and TB206 fail only with ``--strict``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import lock_argv, mini_project, with_pins
from tests.pyindex import PyIndex
from tests.unit.test_lock import PINS
from twinbuild.cli.main import main
from twinbuild.closure import lockfile
from twinbuild.closure.lock_model import LockedDist
from twinbuild.closure.resolve import NO_FILE_NOTE
from twinbuild.lint.checks import lint
from twinbuild.lint.locks import lint_locks
from twinbuild.manifest.loader import load


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The test project, locked once per module; each test works on a copy."""
    import shutil

    home = tmp_path_factory.mktemp("locked")
    root = mini_project(home)
    with_pins(root, PINS)
    with PyIndex(home / "index") as index:
        index.publish("floaty", "1.0")
        index.publish("dep-a", "1.0")
        index.publish("solid", "1.0", ("dep-a>=1.0",))
        assert main(lock_argv(root, index.url)) == 0
    yield root
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def project(locked: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "proj"
    shutil.copytree(locked, copy)
    return copy


def codes(root: Path) -> list[tuple[str, str, int]]:
    manifest = load(root / "pins/manifest.toml")
    return [(f.code, f.path, f.line) for f in lint_locks(manifest, root)]


def lock_findings(root: Path, *, strict: bool) -> list[str]:
    """What the whole lint fails on that is about a lock (the test project's recipes are the
    mini project's, written for other pins)."""
    report = lint(load(root / "pins/manifest.toml"), root, strict=strict)
    return [str(f) for f in report.findings if f.path.startswith("pins/lock/")]


def test_fresh_locks_leave_only_what_cannot_be_resolved_here(project: Path) -> None:
    assert {c for c, _, _ in codes(project)} == {"TB205"}  # the bases: no capture here
    assert lock_findings(project, strict=False) == []
    found = lock_findings(project, strict=True)
    assert len(found) == 2
    assert found[0].startswith("pins/lock/cuda-amd64.toml:")
    assert "TB205 base:" in found[0]
    assert "twinbuild base capture --variant cuda --arch linux/amd64" in found[0]
    assert "(it writes pins/lock/base/cuda-amd64.toml)" in found[0]


def test_a_floating_pin_with_no_lock(project: Path) -> None:
    lockfile.lock_path(project, "cuda-amd64").unlink()
    assert ("TB201", "pins/lock/cuda-amd64.toml", 0) in codes(project)
    assert lock_findings(project, strict=False) == [
        "pins/lock/cuda-amd64.toml: TB201 pins.floaty (floaty) floats and cuda-amd64 has no "
        "lock; run `twinbuild lock` and commit pins/lock/"
    ]


def test_a_lock_older_than_the_manifest(project: Path) -> None:
    manifest = project / "pins/manifest.toml"
    manifest.write_text(manifest.read_text().replace('version = "1.0"', 'version = "1.1"'))
    found = [c for c in codes(project) if c[0] == "TB203"]
    assert {p for _, p, _ in found} == {
        "pins/lock/cuda-amd64.toml", "pins/lock/rocm-amd64.toml",
        "pins/lock/local/cuda-amd64.toml", "pins/lock/local/rocm-amd64.toml",  # solid moved
    }  # fmt: skip
    assert all(line > 0 for _, _, line in found)


def test_a_hand_edit_is_named(project: Path) -> None:
    path = lockfile.lock_path(project, "rocm-amd64")
    path.write_text(path.read_text().replace('version = "1.0"', 'version = "0.9"', 1))
    (found,) = lock_findings(project, strict=False)
    assert found.startswith("pins/lock/rocm-amd64.toml: TB204")
    assert "dist dep-a" in found
    assert "edited by hand" in found


def test_an_entry_nothing_explains(project: Path) -> None:
    path = lockfile.lock_path(project, "cuda-amd64")
    lock = lockfile.read(path)
    stray = LockedDist(name="stray", version="1.0", via=("nothing-locked",))
    lockfile.write(project, dataclasses.replace(lock, dists=(*lock.dists, stray)))
    found = [c for c in codes(project) if c[0] == "TB202"]
    assert len(found) == 1
    assert found[0][1] == "pins/lock/cuda-amd64.toml"
    assert found[0][2] > 0


def test_a_pin_with_no_file_for_the_platform_fails_strict_only(project: Path) -> None:
    path = lockfile.lock_path(project, "rocm-amd64")
    lock = lockfile.read(path)
    missing = LockedDist(name="solid", version="1.0", pins=("solid",),
                         note=f"{NO_FILE_NOTE} x86_64-manylinux_2_28 (Python 3.12): fix it")  # fmt: skip
    lockfile.write(project, dataclasses.replace(
        lock, dists=tuple(missing if d.name == "solid" else d for d in lock.dists)))  # fmt: skip
    assert lock_findings(project, strict=False) == []
    assert any(
        f.startswith("pins/lock/rocm-amd64.toml:") and "TB206 dist solid==1.0" in f
        for f in lock_findings(project, strict=True)
    )


def test_a_floating_pin_the_locks_resolve_floats_no_more(project: Path) -> None:
    def tb010(root: Path) -> list[str]:
        report = lint(load(root / "pins/manifest.toml"), root, strict=True)
        return [f.message for f in report.findings if f.code == "TB010"]

    assert tb010(project) == []  # floaty: every image that takes it has it locked
    lockfile.lock_path(project, "cuda-amd64").unlink()
    assert [m.split(":")[0] for m in tb010(project)] == ["pins.floaty"]


def test_the_local_locks_are_linted_by_the_same_rules(project: Path) -> None:
    """pins/lock/local/<image>.toml: clean when fresh; a hand edit is TB204, a changed local
    pin TB203, a missing local lock with a floating pin TB201, each naming the local file."""
    local = "pins/lock/local/cuda-amd64.toml"
    assert [c for c in codes(project) if c[1].startswith("pins/lock/local/")] == []
    path = project / local
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('version = "1.0"', 'version = "0.9"', 1), encoding="utf-8")
    assert ("TB204", local, 0) in codes(project)
    path.write_text(text, encoding="utf-8")
    manifest = project / "pins/manifest.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace('range = ""', 'range = ">=1.0"'),
        encoding="utf-8",
    )
    assert [c[0] for c in codes(project) if c[1] == local] == ["TB203"]
    path.unlink()
    assert [c[0] for c in codes(project) if c[1] == local] == ["TB201"]  # floaty floats
