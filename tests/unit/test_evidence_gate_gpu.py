"""The gate's GPU check, both ways: evidence counts only from a GPU of its platform's vendor.

CUDA evidence from an AMD GPU and ROCm evidence from an NVIDIA GPU are the same mistake (the job
ran on the wrong runner); a check written for one direction only lets the other through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.evidence_builders import (
    GPUS,
    HEAD,
    NOW,
    REPO,
    REPO_ID,
    REQUIRED,
    VENDORS,
    Signer,
    evidence,
    smoke_report,
)
from twinbuild.evidence import GateRefused, Policy, gate

POLICY = Policy(
    base_repository=REPO, base_repository_id=REPO_ID, head_commit=HEAD, pr=42, required=REQUIRED
)
OTHER: dict[str, str] = {"cuda": "rocm", "rocm": "cuda"}


def _refusals(tmp_path: Path, signer: Signer, platform: str, gpu: Any) -> list[str]:
    wrong = evidence(tmp_path, signer, platform, report=smoke_report(platform, gpu=gpu))
    right = evidence(tmp_path, signer, OTHER[platform])
    with pytest.raises(GateRefused) as info:
        gate([wrong, right], policy=POLICY, trusted=signer.trusted, now=NOW)
    return [r.removeprefix(f"{wrong}: ") for r in info.value.refusals]


def test_cuda_evidence_from_an_amd_gpu_is_refused(tmp_path: Path, signer: Signer) -> None:
    assert _refusals(tmp_path, signer, "cuda", GPUS["rocm"]) == [
        "gpu: cuda (linux/amd64) evidence ran on a amd GPU (AMD Instinct MI300X); cuda needs "
        "nvidia: run its job on a nvidia runner"
    ]


def test_rocm_evidence_from_an_nvidia_gpu_is_refused(tmp_path: Path, signer: Signer) -> None:
    assert _refusals(tmp_path, signer, "rocm", GPUS["cuda"]) == [
        "gpu: rocm (linux/amd64) evidence ran on a nvidia GPU (NVIDIA H200); rocm needs amd: run "
        "its job on a amd runner"
    ]


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_an_unknown_vendor_is_refused(tmp_path: Path, signer: Signer, platform: str) -> None:
    gpu = {**GPUS[platform], "vendor": "intel", "model": "Arc"}
    want = VENDORS[platform]
    assert _refusals(tmp_path, signer, platform, gpu) == [
        f"gpu: {platform} (linux/amd64) evidence ran on a intel GPU (Arc); {platform} needs "
        f"{want}: run its job on a {want} runner"
    ]


@pytest.mark.parametrize(("platform", "vendor"), [("cuda", "nvidia"), ("rocm", "amd")])
def test_zero_gpus_of_the_right_vendor_is_no_gpu(
    tmp_path: Path, signer: Signer, platform: str, vendor: str
) -> None:
    gpu = {**GPUS[platform], "count": 0}
    assert _refusals(tmp_path, signer, platform, gpu) == [
        f"gpu: the smoke run saw no GPU; run it on a {vendor} GPU runner"
    ]


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_one_gpu_of_the_right_vendor_counts(tmp_path: Path, signer: Signer, platform: str) -> None:
    gpu = {**GPUS[platform], "count": 1}
    paths = [
        evidence(tmp_path, signer, platform, report=smoke_report(platform, gpu=gpu)),
        evidence(tmp_path, signer, OTHER[platform]),
    ]
    result = gate(paths, policy=POLICY, trusted=signer.trusted, now=NOW)
    assert [a.image for a in result.accepted] == list(REQUIRED)
