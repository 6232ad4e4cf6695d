"""The lint keeps every pin where Renovate's managers read it (TB013) and the frontend pinned
(TB106): a pin laid out otherwise is one Renovate silently never moves."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import edit, mini_project
from twinbuild.lint.checks import lint
from twinbuild.manifest.loader import load

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = mini_project(tmp_path)
    (project / ".github").mkdir()
    shutil.copy(ROOT / ".github/renovate.json", project / ".github/renovate.json")
    return project


def _codes(root: Path, code: str) -> list[str]:
    report = lint(load(root / "pins/manifest.toml"), root)
    return [f"{f.line}: {f.message}" for f in report.findings if f.code == code]


def test_the_mini_project_and_this_repository_are_laid_out_for_renovate(root: Path) -> None:
    assert _codes(root, "TB013") == []
    assert _codes(ROOT, "TB013") == []


def test_a_pypi_pin_whose_version_does_not_follow_its_kind(root: Path) -> None:
    manifest = root / "pins/manifest.toml"
    edit(
        manifest,
        'kind = "pypi"\nversion = "0.4.2"\n',
        'kind = "pypi"\nlayer = "late"\nversion = "0.4.2"\n',
    )
    text = manifest.read_text()
    assert text.count('layer = "late"\nversion = "0.4.2"') == 1
    found = _codes(root, "TB013")
    line = load(manifest).line_of("pins", "flash-linear-attention")
    assert found == [
        f"{line}: pins.flash-linear-attention: open the table with kind, version, in that order, "
        "so Renovate's managers (.github/renovate.json) find it"
    ]


def test_without_the_renovate_config_the_layout_is_free(root: Path) -> None:
    (root / ".github/renovate.json").unlink()
    edit(
        root / "pins/manifest.toml",
        'kind = "pypi"\nversion = "0.4.2"\n',
        'version = "0.4.2"\nkind = "pypi"\n',
    )
    assert _codes(root, "TB013") == []


def test_a_variant_table_with_its_version_alone_is_read_after_its_pins_kind(root: Path) -> None:
    manifest = root / "pins/manifest.toml"
    edit(
        manifest,
        'kind = "pypi"\nversion = "0.4.2"\n',
        'kind = "pypi"\n',
    )
    text = manifest.read_text()
    start = text.index("[pins.flash-linear-attention]")
    end = text.index("\n[", start + 1)
    manifest.write_text(
        text[:end]
        + '\ndivergence = { rocm = "rocm first" }\n\n[pins.flash-linear-attention.cuda]\n'
        'version = "0.4.2"\n\n[pins.flash-linear-attention.rocm]\nversion = "0.4.3"\n' + text[end:]
    )
    assert _codes(root, "TB013") == []


def test_a_tracked_git_pin_keeps_repo_commit_and_track_together(root: Path) -> None:
    manifest = root / "pins/manifest.toml"
    text = manifest.read_text()
    commit = 'commit = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"\n'
    manifest.write_text(text.replace(commit, commit + 'track = "main"\n', 1))
    assert _codes(root, "TB013") == []
    late = 'layer = "late"\n'
    manifest.write_text(text.replace(commit + late, commit + late + 'track = "main"\n', 1))
    found = _codes(root, "TB013")
    assert len(found) == 1
    assert "pins.torch_memory_saver: open the table with kind, repo, commit, track" in found[0]


def test_a_base_written_in_another_order(root: Path) -> None:
    manifest = root / "pins/manifest.toml"
    text = manifest.read_text()
    start = text.index("base = { repository = ")
    line = text[start : text.index("\n", start)]
    repository = line.split('repository = "')[1].split('"')[0]
    tag = line.split('tag = "')[1].split('"')[0]
    digest = line.split('digest = "')[1].split('"')[0]
    manifest.write_text(
        text.replace(
            line, f'base = {{ tag = "{tag}", repository = "{repository}", digest = "{digest}" }}', 1
        )
    )
    found = _codes(root, "TB013")
    assert len(found) == 1
    assert "variants.cuda.base: write it as base = { repository" in found[0]


def test_an_unpinned_frontend_fails_the_lint(root: Path) -> None:
    recipe = root / "images/cuda/Dockerfile"
    recipe.write_text("# syntax=docker/dockerfile:1.7\n" + recipe.read_text())
    assert _codes(root, "TB106") == [
        "1: # syntax=docker/dockerfile:1.7: the frontend BuildKit pulls and runs is not pinned by "
        "digest; write # syntax=IMAGE:TAG@sha256:<64 hex> (Renovate moves it)"
    ]
    recipe.write_text(
        "# syntax=docker/dockerfile:1.7@sha256:"
        + "a" * 64
        + "\n"
        + recipe.read_text().split("\n", 1)[1]
    )
    assert _codes(root, "TB106") == []
