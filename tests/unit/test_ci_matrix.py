"""The workflows' matrices come from the manifest (``twinbuild variants --matrix``), and where a
PR's manifest could steer a privileged job, from the default branch's.

validate-gpu.yml computes its GPU matrix with default-branch code from the validated commit's
manifest, with ``--required-by`` the default branch's. The runner a GPU job lands on is not the
PR's to choose: deny by default.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import edit
from twinbuild.ci.matrix import MatrixOptions, matrix_for
from twinbuild.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "pins/manifest.toml"
CU13_GPU = 'gpu = ["self-hosted", "gpu", "cuda"] }\nbuild_args = { ENABLE_CUDA_13 = 1 }'


@pytest.fixture
def pr_manifest(tmp_path: Path) -> Path:
    copy = tmp_path / "pr/pins/manifest.toml"
    copy.parent.mkdir(parents=True)
    shutil.copy2(MANIFEST, copy)
    return copy


def _runners(found: object) -> dict[str, list[str]]:
    return {e["name"]: e["runner"] for e in found.entries}  # type: ignore[attr-defined]


def test_the_pr_matrix_is_the_gated_images_on_their_gpu_runners() -> None:
    found = matrix_for(MatrixOptions(manifest=MANIFEST, job="gpu", scope="pr"))
    runners = _runners(found)
    assert set(runners) == {"cu13-amd64", "cu13-arm64", "rocm720-mi35x-amd64"}
    assert runners["cu13-arm64"] == ["self-hosted", "gpu", "cuda", "arm64"]
    assert runners["rocm720-mi35x-amd64"] == ["self-hosted", "gpu", "rocm", "gfx950", "x64"]


def test_a_pr_cannot_move_a_gpu_job_onto_another_runner(pr_manifest: Path) -> None:
    """The attack: the PR's manifest sends cu13's GPU job to the builder runners (or any label
    set it likes). The default branch's labels for that variant count."""
    edit(pr_manifest, CU13_GPU, CU13_GPU.replace('"gpu", "cuda"', '"builder", "cuda"'))
    found = matrix_for(
        MatrixOptions(manifest=pr_manifest, job="gpu", scope="pr", required_by=MANIFEST)
    )
    assert _runners(found)["cu13-amd64"] == ["self-hosted", "gpu", "cuda", "x64"]


def test_a_new_variant_runs_only_on_runner_labels_the_default_branch_uses(
    pr_manifest: Path,
) -> None:
    text = pr_manifest.read_text()
    start = text.index("[variants.cu13]")
    end = text.index("\n[", start + 1)
    block = text[start:end].replace("[variants.cu13]", "[variants.cu13next]")
    pr_manifest.write_text(text + "\n" + block + "\n")
    found = matrix_for(
        MatrixOptions(manifest=pr_manifest, job="gpu", scope="pr", required_by=MANIFEST)
    )
    assert _runners(found)["cu13next-amd64"] == ["self-hosted", "gpu", "cuda", "x64"]
    odd = block.replace('gpu = ["self-hosted", "gpu", "cuda"]', 'gpu = ["self-hosted", "mine"]')
    pr_manifest.write_text(text + "\n" + odd + "\n")
    with pytest.raises(ConfigError, match=r"cu13next: GPU runner labels \['self-hosted', 'mine'\]"):
        matrix_for(MatrixOptions(manifest=pr_manifest, job="gpu", scope="pr", required_by=MANIFEST))


def test_the_nightly_leaves_out_what_cannot_build_yet_and_says_why() -> None:
    found = matrix_for(MatrixOptions(manifest=MANIFEST, job="build", scope="nightly"))
    names = set(_runners(found))
    assert "cu13-amd64" in names
    assert all(": left out of the nightly: " in line for line in found.left_out)
    assert names.isdisjoint(line.split(":")[0] for line in found.left_out)
