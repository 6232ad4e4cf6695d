"""The production recipes carry upstream's steps: patches as sha256-pinned inputs fetched at build
time, applied for real (or the build fails), and settings that must agree with the manifest."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import repo_image
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import render

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load(ROOT / "pins/manifest.toml")
APPLY = ROOT / "images/common/apply-patch.sh"
PATCHES = {
    "cuda": ["te-patch-dequantized-backward-override", "te-patch-fa2-sm103-whitelist"],
    "rocm": ["megatron-amd-patch", "tile-kernels-amd-patch", "tilelang-hip-fp8-patch"],
}


def _upstream_commit() -> str:
    header = (ROOT / "pins/manifest.toml").read_text(encoding="utf-8").split("schema", 1)[0]
    m = re.search(r"radixark/miles at ([0-9a-f]{40})", header)
    assert m is not None, "the manifest header cites the upstream commit"
    return m.group(1)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_every_upstream_patch_is_a_pinned_input_at_the_cited_commit(platform: str) -> None:
    commit = _upstream_commit()
    args = render(MANIFEST, repo_image(platform), "production").args
    recipe = (ROOT / f"images/{platform}/Dockerfile").read_text(encoding="utf-8")
    for name in PATCHES[platform]:
        pin = next(p for p in MANIFEST.resolve(repo_image(platform)) if p.name == name)
        assert pin.values.url is not None
        assert pin.values.url.startswith(
            f"https://raw.githubusercontent.com/radixark/miles/{commit}/docker/"
        )
        prefix = pin.arg_prefix()
        assert args[f"{prefix}_URL"] == pin.values.url
        assert re.fullmatch(r"[0-9a-f]{64}", args[f"{prefix}_SHA256"])
        # fetched with the sha256 check, to the path the smoke suite hashes, then applied
        assert f'fetch-verified.sh "${{{prefix}_URL}}" "${{{prefix}_SHA256}}"' in recipe
        assert pin.values.path is not None
        assert pin.values.path in recipe
        assert recipe.count(Path(pin.values.path).name) >= 2, f"{name} is fetched but never applied"
    other = "rocm" if platform == "cuda" else "cuda"
    for name in PATCHES[other]:
        assert not any(k.startswith(name.upper().replace("-", "_")) for k in args)


def test_docs_table_lists_every_patch() -> None:
    doc = (ROOT / "docs/upstream-parity.md").read_text(encoding="utf-8")
    for name in PATCHES["cuda"] + PATCHES["rocm"]:
        assert f"`pins.{name}`" in doc


def test_recipe_archs_come_from_the_manifest() -> None:
    """No recipe names a GPU target: each takes GPU_ARCHS, which render sets to the variant's
    gpu_archs (the rocm recipe builds gfx950 for one variant and gfx942 for another)."""
    for recipe in ("cuda", "rocm"):
        text = (ROOT / f"images/{recipe}/Dockerfile").read_text(encoding="utf-8")
        assert "\nARG GPU_ARCHS\n" in text
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        assert not re.search(r"(gfx9[0-9]{2}|sm_[0-9]{2})", code)
    for variant in MANIFEST.variants.values():
        args = render(MANIFEST, variant.images()[0], "production").args
        assert args["GPU_ARCHS"].split(";") == list(variant.gpu_archs), variant.name


def test_flashinfer_marker_follows_the_pin() -> None:
    cuda = (ROOT / "images/cuda/Dockerfile").read_text(encoding="utf-8")
    assert "ENV FLASHINFER_VERSION=${FLASHINFER_PYTHON_VERSION}" in cuda
    pin = MANIFEST.find("flashinfer-python")
    assert pin is not None
    args = render(MANIFEST, repo_image("cuda"), "production").args
    assert (
        args["FLASHINFER_PYTHON_VERSION"]
        == pin.values_on(MANIFEST.selectors(repo_image("cuda"))).version
        == "0.6.15.post1"
    )


# -- apply-patch.sh, with the real patch(1) -------------------------------------------------------

ORIGINAL = "def f():\n    return 1\n"
PATCH = """--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
"""


def _apply(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(APPLY), str(tmp_path / "site"), str(tmp_path / "fix.patch")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
def test_apply_patch_applies_once_and_fails_loudly_after(tmp_path: Path) -> None:
    mod = tmp_path / "site/pkg/mod.py"
    mod.parent.mkdir(parents=True)
    mod.write_text(ORIGINAL, encoding="utf-8")
    (tmp_path / "fix.patch").write_text(PATCH, encoding="utf-8")
    first = _apply(tmp_path)
    assert first.returncode == 0, first.stderr
    assert mod.read_text(encoding="utf-8") == "def f():\n    return 2\n"
    again = _apply(tmp_path)  # already applied, or a file upstream changed: never silent
    assert again.returncode == 1
    assert "apply-patch: fix.patch did not apply cleanly in" in again.stderr


def test_apply_patch_refuses_missing_inputs(tmp_path: Path) -> None:
    result = _apply(tmp_path)
    assert result.returncode == 2
    assert "DIR and PATCH must exist" in result.stderr
