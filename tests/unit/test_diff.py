"""twinbuild.pins.diff: pin changes between two revisions of the manifest, and the images to rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import edit
from tests.unit.gitrepos import commit_all, commit_file, needs_git
from twinbuild.errors import ConfigError
from twinbuild.pins.diff import diff_revs

pytestmark = [pytest.mark.git, needs_git]

MANIFEST = "pins/manifest.toml"
TMS = "https://github.com/fzyzcjy/torch_memory_saver"
OLD_SHA = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"
NEW_SHA = "1234567890abcdef1234567890abcdef12345678"

NEW_PIN = """
[pins.tilelang]
kind = "pypi"
version = "0.1.8"
variants = ["cuda"]
asymmetry = "the ROCm base ships its own tilelang"
why = "FA4 kernels"
"""


def test_moved_shared_pin_text_and_markdown(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, OLD_SHA, NEW_SHA)
    commit_all(mini_repo, "bump tms")
    result = diff_revs("HEAD~1", "HEAD", repo=mini_repo)
    assert result.text() == (
        f"pins diff HEAD~1..HEAD ({MANIFEST})\n"
        "changed torch_memory_saver\n"
        f"  cuda, rocm: {TMS}@{OLD_SHA} -> {TMS}@{NEW_SHA}\n"
        "rebuild: cuda, rocm (production, local)\n"
    )
    assert result.markdown() == (
        "### Pin changes `HEAD~1`..`HEAD`\n\n"
        "| pin | change | variants | old | new |\n"
        "|---|---|---|---|---|\n"
        f"| `torch_memory_saver` | changed | cuda, rocm | `{TMS}@{OLD_SHA}` | `{TMS}@{NEW_SHA}` |\n"
        "\n"
        "**Images to rebuild:** cuda, rocm (production, local)\n"
    )


def test_added_removed_and_rocm_only(mini_repo: Path) -> None:
    text = (mini_repo / MANIFEST).read_text()
    start = text.index("[pins.numba]")
    end = text.index("[pins.numpy]")
    edit_text = text[:start] + text[end:] + NEW_PIN
    edit_text = edit_text.replace('range = "<2"', 'range = "<1.27"')
    commit_file(mini_repo, MANIFEST, edit_text, "drop numba, add tilelang, narrow numpy")
    result = diff_revs("HEAD~1", "HEAD", repo=mini_repo)
    assert result.text() == (
        f"pins diff HEAD~1..HEAD ({MANIFEST})\n"
        "removed numba\n"
        "  rocm: ==0.65.1 -> (absent)\n"
        "changed numpy\n"
        "  rocm: <2 -> <1.27\n"
        "added tilelang\n"
        "  cuda: (absent) -> ==0.1.8\n"
        "rebuild: cuda, rocm (production, local)\n"
    )
    assert "| `numba` | removed | rocm | `==0.65.1` | — |" in result.markdown()


def test_why_only_change_rebuilds_nothing(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, 'why = "ROCm base fix"', 'why = "ROCm base fix (#12)"')
    commit_all(mini_repo, "why")
    result = diff_revs("HEAD~1", "HEAD", repo=mini_repo)
    assert result.text() == (
        f"pins diff HEAD~1..HEAD ({MANIFEST})\n"
        "changed numba: why/floating only (no image change)\n"
        "rebuild: none\n"
    )


def test_settings_and_layer_changes(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, 'toolkit = "12.9"', 'toolkit = "13.0"')
    edit(mini_repo / MANIFEST, 'layer = "late"\n', "")
    commit_all(mini_repo, "cuda 13, tms in the pins layer")
    result = diff_revs("HEAD~1", "HEAD", repo=mini_repo)
    assert result.text() == (
        f"pins diff HEAD~1..HEAD ({MANIFEST})\n"
        "setting variants.cuda.toolkit: 12.9 -> 13.0\n"
        "changed torch_memory_saver\n"
        "  cuda, rocm: layer='late' -> layer='pins'\n"
        "rebuild: cuda, rocm (production, local)\n"
    )


def test_no_change(mini_repo: Path) -> None:
    commit_file(mini_repo, "README.md", "docs\n", "docs")
    result = diff_revs("HEAD~1", "HEAD", repo=mini_repo)
    assert result.text() == (
        f"pins diff HEAD~1..HEAD ({MANIFEST})\nno pin changes\nrebuild: none\n"
    )
    assert result.markdown() == (
        "### Pin changes `HEAD~1`..`HEAD`\n\nNo pin changes.\n\n**Images to rebuild:** none\n"
    )


def test_unknown_revision_and_missing_manifest(mini_repo: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        diff_revs("nope", "HEAD", repo=mini_repo)
    assert (
        str(caught.value)
        == f"pins diff: unknown revision 'nope' in {mini_repo}; fetch it or check the name"
    )
    with pytest.raises(ConfigError) as caught:
        diff_revs("HEAD", "HEAD", repo=mini_repo, manifest=Path("pins/other.toml"))
    assert str(caught.value) == (
        "HEAD:pins/other.toml: no manifest at that revision; pick a later one"
    )


def test_invalid_manifest_at_revision_names_revision(mini_repo: Path) -> None:
    commit_file(mini_repo, MANIFEST, "schema = 1\n[pins\n", "break it")
    with pytest.raises(ConfigError) as caught:
        diff_revs("HEAD~1", "HEAD", repo=mini_repo)
    assert str(caught.value).startswith(f"HEAD:{MANIFEST}:2:")


def test_uncommitted_bump_against_head_like_git_diff(
    mini_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pins diff` with no revision: HEAD against the working tree, from a subdirectory too."""
    from twinbuild.cli.main import main

    edit(mini_repo / MANIFEST, OLD_SHA, NEW_SHA)  # not committed
    monkeypatch.chdir(mini_repo / "images")
    assert main(["pins", "diff"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        f"pins diff HEAD..working tree ({MANIFEST})\nchanged torch_memory_saver\n"
    )
    assert f"  cuda, rocm: {TMS}@{OLD_SHA} -> {TMS}@{NEW_SHA}\n" in out
    commit_all(mini_repo, "bump tms")
    assert main(["pins", "diff"]) == 0  # committed: the working tree is HEAD again
    assert "no pin changes\n" in capsys.readouterr().out
    assert main(["pins", "diff", "HEAD~1"]) == 0  # one revision: it against the working tree
    assert capsys.readouterr().out.startswith(
        f"pins diff HEAD~1..working tree ({MANIFEST})\nchanged"
    )
