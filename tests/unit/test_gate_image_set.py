"""Which images the gate requires is gate policy: a change to it needs a code owner (#39, attack 5).

The gate asks evidence of every architecture of every gated variant. Removing a whole gated
variant needed an approval; removing one of its architectures did not, so a PR that dropped
``linux/arm64`` from ``cu13`` passed with the head's own evidence of what was left. Any change to
the set of required images (an architecture dropped or added, a variant moved to nightly) is now
judged like a trust root: approved by a code owner at the head, or refused (exit 9). Real
repositories (tests/unit/gate_repos.py), the gate run as gate.yml runs it.
"""

from __future__ import annotations

import pytest

from tests.helpers import edit
from tests.unit.gate_repos import GateRepo, approved, run_gate, sign_evidence
from tests.unit.gitrepos import commit_all, git, needs_git
from tests.unit.reviews import OWNER, reviews_file

pytestmark = needs_git
TWO_ARCHS = 'archs = ["linux/amd64", "linux/arm64"]\nrecipe = "cuda"'
ONE_ARCH = 'archs = ["linux/amd64"]\nrecipe = "cuda"'


def _gated_twice(repo: GateRepo) -> str:
    """main, where cuda is gated on amd64 and arm64; the PR branch ``attack`` starts there."""
    git(repo.root, "checkout", "-q", "main")
    edit(repo.root / "pins/manifest.toml", ONE_ARCH, TWO_ARCHS)
    base = commit_all(repo.root, "cuda on arm64 too")
    git(repo.root, "checkout", "-q", "-B", "attack", base)
    git(repo.root, "update-ref", "-d", "refs/heads/validate/pr-42")
    return base


def _no_reviews(repo: GateRepo) -> str:
    return f"--reviews={reviews_file(repo.root.parent / 'reviews.json')}"


def test_dropping_an_architecture_of_a_gated_variant_needs_an_approval(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack: the PR removes linux/arm64 from cuda and brings the evidence of every image
    the landing tree still gates; without a code owner's approval it is refused."""
    base = _gated_twice(gate_repo)
    edit(gate_repo.root / "pins/manifest.toml", TWO_ARCHS, ONE_ARCH)
    head = commit_all(gate_repo.root, "cuda on amd64 alone")
    sign_evidence(gate_repo.root, head, gate_repo.signer)
    git(gate_repo.root, "checkout", "-q", "attack")
    code, out, err = run_gate(capsys, head, "--base", base, _no_reviews(gate_repo))
    assert (code, out) == (9, []), err
    assert err[0] == (
        "twinbuild: pins/manifest.toml: gate policy: this PR changes which images the gate "
        "requires (no longer: cuda-arm64): that changes what the gate asks of every later PR, "
        f"and automation alone never passes that; no code owner approved it; a code owner "
        f"(@{OWNER}) must approve the head {head[:12]}, then re-run the gate"
    )
    # A code owner's approval of the head lets it pass, on the evidence of what is left.
    code, out, err = run_gate(capsys, head, "--base", base, approved(gate_repo, head))
    assert (code, err) == (0, [])
    assert out[0].startswith("trust roots: 1 changed (pins/manifest.toml); each approved")
    assert [line.split(":")[0] for line in out[1:]] == ["cuda-amd64", "rocm-amd64"]


def test_adding_an_architecture_to_the_required_images_needs_an_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any change to the set, a stricter one too: it decides which runners every later PR's
    images go to and what each must bring."""
    edit(attack_repo.root / "pins/manifest.toml", ONE_ARCH, TWO_ARCHS)
    head = commit_all(attack_repo.root, "another set of gated images")
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, _no_reviews(attack_repo))
    assert code == 9, err
    assert err[0].startswith(
        "twinbuild: pins/manifest.toml: gate policy: this PR changes which images the gate "
        "requires (now also: cuda-arm64): "
    )


def test_a_pin_bump_keeps_the_image_set_and_needs_no_approval(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_gate(capsys, gate_repo.tested, "--base", gate_repo.base)
    assert (code, err) == (0, [])
    assert [line.split(":")[0] for line in out] == ["cuda-amd64", "rocm-amd64"]
