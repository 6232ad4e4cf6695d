"""What the manifest claims about an image is GPU-checked before it lands, like the image itself.

The inputs hash covers the manifest through each platform's rendered slice: the build args and
generated pip files, what decides the image's bytes. But the manifest also says what the image
holds and what the smoke run holds it to: the Python and toolkit versions, the GPU architectures
its kernels must run on (a build arg too: ``GPU_ARCHS``), the modules that must import, the binaries, the all-reduce floors. None of
those reaches the build, so a PR that changed only them passed the gate as "no image input
changed" with no GPU run and, since ``pins/`` is not a trust root, no approval: the default
branch then claimed, say, Blackwell support (``gpu_archs``) or a toolkit no GPU run ever checked.

Each attack is a PR on a real repository (tests/unit/gate_repos.py), judged the way gate.yml runs
the gate.
"""

from __future__ import annotations

import pytest

from tests.helpers import edit
from tests.unit.gate_repos import GateRepo, run_gate, sign_evidence
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.evidence.head import commit_inputs

pytestmark = needs_git

MANIFEST = "pins/manifest.toml"
CUDA = 'vendor = "nvidia"\n'
#: Claims about the CUDA image that change no build arg and no generated file.
CLAIMS = {
    "the toolkit version": ('toolkit = "12.9"', 'toolkit = "13.0"'),
    "the Python version": (
        'python = "3.12"\ntoolkit = "12.9"',
        'python = "3.11"\ntoolkit = "12.9"',
    ),
    "the modules that must import": (CUDA, CUDA + 'imports = ["torch", "flash_attn"]\n'),
    "the binaries": (CUDA, CUDA + 'binaries = ["/usr/local/bin/all_reduce_perf"]\n'),
    "the shared memory the smoke run gives": (CUDA, CUDA + 'shm_size = "16g"\n'),
}
MISSING = [
    "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64)",
    "twinbuild: rocm-amd64: missing: no signed evidence of rocm (linux/amd64)",
]


@pytest.mark.parametrize("what", CLAIMS)
def test_a_change_to_what_the_manifest_claims_needs_evidence(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    old, new = CLAIMS[what]
    edit(attack_repo.root / MANIFEST, old, new)
    head = commit_all(attack_repo.root, f"pins: {what}")
    # The build would make the same image: no build arg, no generated file moved.
    assert commit_inputs(head).inputs == commit_inputs(attack_repo.base).inputs
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert err[0] == (
        "twinbuild: manifest: no build input moved, but pins/manifest.toml changes what it "
        "claims about the cuda-amd64 image (what the smoke run checks), so GPU evidence of those claims "
        "is needed: push the head to validate/pr-42"
    )
    assert [line.split(";")[0] for line in err[1:]] == MISSING
    assert code == 7
    assert not any("no image input changed" in line for line in out)


def test_with_evidence_of_the_new_claims_it_passes(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(attack_repo.root / MANIFEST, *CLAIMS["the toolkit version"])
    head = commit_all(attack_repo.root, "pins: CUDA 13.0")
    sign_evidence(attack_repo.root, head, attack_repo.signer)  # the GPUs checked the new claim
    git(attack_repo.root, "checkout", "-q", "attack")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert (code, err) == (0, [])
    assert [line.split(":")[0] for line in out] == ["cuda-amd64", "rocm-amd64"]


def test_a_why_or_a_comment_in_the_manifest_needs_no_evidence(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pins this rule down: words for people are not claims about the image."""
    path = attack_repo.root / MANIFEST
    edit(path, 'why = "the commit miles tests against"', 'why = "the commit miles CI tests"')
    path.write_text(path.read_text() + "# reviewed again in June\n")
    head = commit_all(attack_repo.root, "pins: words")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert (code, err) == (0, [])
    assert out[0].startswith("no image input changed between the base")
