"""The manifest loader (and the lint and render over what it loads) on any bytes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given

from tests.fuzz.conftest import outcome
from tests.fuzz.strategies import as_bytes, hostile
from tests.helpers import MINI, image
from twinbuild.lint.checks import lint_manifest
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import PinManifest
from twinbuild.manifest.rendered import render
from twinbuild.manifest.table import markdown

REPO = Path(__file__).resolve().parents[2]
SEEDS = [(REPO / "pins/manifest.toml").read_text(), (MINI / "pins/manifest.toml").read_text()]


def _load_lint_render(path: Path) -> PinManifest:
    manifest = load(path)
    lint_manifest(manifest)
    markdown(manifest)
    render(manifest, image("rocm"), "production")
    return manifest


@given(data=as_bytes(hostile(SEEDS, prefix="zz = ")))
def test_any_manifest_bytes_end_in_a_manifest_or_our_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "manifest.toml"
    path.write_bytes(data)
    result = outcome(lambda: _load_lint_render(path), folder=tmp_path)
    assert isinstance(result, PinManifest) or str(result).startswith(str(path))
