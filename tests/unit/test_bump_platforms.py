"""`pins bump` moves every platform of a symmetric pin, however the pin is written.

A bump that moved only the first platform would turn a symmetric pin into a silent divergence
(the CUDA image gets the fix, the ROCm image keeps the bug). Each shape of a symmetric pin is
bumped, and the result is read back with the manifest model, not with the bump's own report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import mini_project
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import PLATFORMS, load
from twinbuild.pins.bump import BumpRequest, bump

FLA = """[pins.flash-linear-attention]
kind = "pypi"
version = "0.4.2"
why = "Qwen3-Next linear attention kernels"
"""
PER_PLATFORM = """[pins.flash-linear-attention]
kind = "pypi"
why = "Qwen3-Next linear attention kernels"

[pins.flash-linear-attention.cuda]
version = "0.4.2"

[pins.flash-linear-attention.rocm]
version = "0.4.2"
"""
EXPLICIT = """[pins.flash-linear-attention]
kind = "pypi"
version = "0.4.2"
platforms = ["cuda", "rocm"]
why = "Qwen3-Next linear attention kernels"
"""
GIT_PER_PLATFORM = """[pins.apex]
kind = "git"
repo = "https://github.com/NVIDIA/apex"
why = "the commit miles builds"

[pins.apex.cuda]
commit = "1111111111111111111111111111111111111111"

[pins.apex.rocm]
commit = "1111111111111111111111111111111111111111"
"""


def _manifest(tmp_path: Path, pin_text: str) -> Path:
    path = mini_project(tmp_path) / "pins/manifest.toml"
    text = path.read_text()
    start, end = text.index("[pins.flash-linear-attention]"), text.index("[pins.numba]")
    path.write_text(text[:start] + pin_text + "\n" + text[end:])
    return path


def _versions(path: Path, name: str) -> dict[str, str | None]:
    manifest = load(path)
    return {p: {r.name: r for r in manifest.resolve(p)}[name].version for p in PLATFORMS}


@pytest.mark.parametrize(
    "shape", [FLA, PER_PLATFORM, EXPLICIT], ids=["common", "per-platform", "explicit"]
)
def test_a_symmetric_version_moves_on_every_platform(tmp_path: Path, shape: str) -> None:
    path = _manifest(tmp_path, shape)
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.2"}
    result = bump(
        path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3")
    )
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.3", "rocm": "0.4.3"}
    assert sorted(result.rebuild) == ["cuda", "rocm"]
    assert result.moved == {"cuda": ("==0.4.2", "==0.4.3"), "rocm": ("==0.4.2", "==0.4.3")}


def test_a_symmetric_commit_written_per_platform_moves_on_both(tmp_path: Path) -> None:
    path = mini_project(tmp_path) / "pins/manifest.toml"
    path.write_text(path.read_text() + "\n" + GIT_PER_PLATFORM)
    new = "2" * 40
    bump(path, BumpRequest(name="apex", commit=new, why="apex merge commit"))
    manifest = load(path)
    commits = {p: {r.name: r for r in manifest.resolve(p)}["apex"].commit for p in PLATFORMS}
    assert commits == {"cuda": new, "rocm": new}


def test_one_platform_of_a_symmetric_pin_moves_only_with_diverge(tmp_path: Path) -> None:
    path = _manifest(tmp_path, FLA)
    before = path.read_text()
    with pytest.raises(ConfigError):
        bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="w w",
                               platform="rocm"))  # fmt: skip
    assert path.read_text() == before
    bump(
        path,
        BumpRequest(name="flash-linear-attention", version="0.4.3", why="the rocm fix",
                    platform="rocm", diverge=True, reason="ROCm needs the 0.4.3 fix first"),
    )  # fmt: skip
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.3"}
