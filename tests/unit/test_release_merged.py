"""A release ships only what the default branch holds: evidence of a PR never merged is refused.

A validation push runs the head's own push workflows, and one that asks for ``actions: write``
dispatches the default branch's ``release.yml`` with the digest and the evidence its own
validation just produced. That evidence is sound (the default branch's workflow signed what the
GPUs saw), so checking it proves nothing about a merge. `release` therefore binds to the checkout
it runs from: the evidence's inputs hash and manifest digest must be what this code computes at
the checkout's HEAD, and the validated commit must be in HEAD's history. Everything is real: git
repositories, keys from ``evidence keygen``, the command line, a registry on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests import fake_registry as fake
from tests.helpers import edit, image
from tests.unit.evidence_builders import REPO, REPO_ID, evidence, smoke_report
from tests.unit.gate_repos import GateRepo
from tests.unit.gitrepos import commit_all, git
from twinbuild.cli.main import main
from twinbuild.evidence.head import commit_inputs

RELEASED = b'{"the": "previous release"}'


@pytest.fixture
def registry() -> Iterator[fake.FakeRegistry]:
    with fake.serving() as server:
        server.put_manifest("twinbuild/cuda", "v1", RELEASED)
        yield server


def _signed(repo: GateRepo, registry: fake.FakeRegistry, commit: str) -> tuple[str, Path]:
    """A pushed cuda image and the validation run's evidence for it, about ``commit``."""
    digest, _ = registry.image("twinbuild-ci/cuda")
    ref = f"{registry.address}/twinbuild-ci/cuda@{digest}"
    found = commit_inputs(commit, repo=repo.root)
    report = smoke_report("cuda", manifest_digest=found.manifest_digest)
    report["image"]["inputs_hash"] = found.inputs[image("cuda")]
    report["image"]["digest"] = ref
    out = repo.root.parent / f"signed-{commit[:8]}"
    out.mkdir(exist_ok=True)
    path = evidence(out, repo.signer, "cuda", report=report, now=datetime.now(UTC), commit=commit)
    return ref, path


def _release(
    capsys: pytest.CaptureFixture[str], repo: GateRepo, ref: str, path: Path, *more: str
) -> tuple[int, list[str], list[str]]:
    capsys.readouterr()
    code = main(
        [
            "release", "--variant", "cuda", "--image", ref, "--tag", "v1", "--force",
            "--evidence", str(path), "--keys", str(repo.keys), "--repository", REPO,
            "--repository-id", str(REPO_ID), *more,
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def _main_at_base(repo: GateRepo) -> None:
    """Check out ``main`` as it was before the PR: the PR (branch ``pr-42``) is not merged."""
    git(repo.root, "checkout", "-q", "-B", "main", repo.base)


def _unmoved(registry: fake.FakeRegistry) -> None:
    assert registry.writes() == []
    assert registry.manifest_at("twinbuild/cuda", "v1") == RELEASED


def test_evidence_of_a_pr_never_merged_is_refused_from_the_default_branch(
    gate_repo: GateRepo, registry: fake.FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack: the PR's push workflow dispatches release.yml, which checks out main (the
    base: the PR is not merged) and is handed the PR's fresh, soundly signed evidence."""
    _main_at_base(gate_repo)
    ref, path = _signed(gate_repo, registry, gate_repo.tested)
    head = commit_inputs(gate_repo.base, repo=gate_repo.root)
    tested = commit_inputs(gate_repo.tested, repo=gate_repo.root)
    code, _, err = _release(capsys, gate_repo, ref, path)
    assert code == 9, err
    assert err == [
        f"twinbuild: {path}: build.inputs_hash: the evidence tested cuda-amd64 inputs "
        f"{tested.inputs[image('cuda')]} (commit {gate_repo.tested[:12]}), this checkout's HEAD "
        f"{gate_repo.base[:12]} has {head.inputs[image('cuda')]}; a release ships only what the default "
        "branch holds: merge the PR, then release from a checkout of the default branch"
    ]
    _unmoved(registry)


def test_the_same_evidence_releases_once_the_pr_is_merged(
    gate_repo: GateRepo, registry: fake.FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    _main_at_base(gate_repo)
    git(gate_repo.root, "merge", "-q", "--no-ff", "-m", "Merge pull request #42", "pr-42")
    ref, path = _signed(gate_repo, registry, gate_repo.tested)
    code, out, err = _release(capsys, gate_repo, ref, path)
    assert code == 0, err
    assert any(line.startswith(f"released {registry.address}/twinbuild/cuda:v1 = ") for line in out)
    # A fast-forward merge (the head itself is main's HEAD) counts too.
    git(gate_repo.root, "reset", "-q", "--hard", gate_repo.tested)
    code, _, err = _release(capsys, gate_repo, ref, path)
    assert code == 0, err


def test_a_squash_merge_is_not_the_validated_commit(
    gate_repo: GateRepo, registry: fake.FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same tree under another commit: the inputs match, but the validated commit is not in
    the default branch's history, so what was validated is not what was merged."""
    _main_at_base(gate_repo)
    git(gate_repo.root, "merge", "-q", "--squash", "pr-42")
    squashed = commit_all(gate_repo.root, "the PR, squashed")
    ref, path = _signed(gate_repo, registry, gate_repo.tested)
    code, _, err = _release(capsys, gate_repo, ref, path)
    assert code == 9, err
    assert err == [
        f"twinbuild: {path}: source.commit: the evidence validated {gate_repo.tested}, which is "
        f"not in the history of this checkout's HEAD {squashed[:12]}; a release ships only what "
        "the default branch holds: merge the PR with a merge commit (a squash or rebase writes "
        "commits no validation tested), then release from a checkout of the default branch"
    ]
    _unmoved(registry)


def test_a_default_branch_that_moved_the_inputs_since_is_refused(
    gate_repo: GateRepo, registry: fake.FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    """Merged, then main changed the image: the digest is no longer what main builds."""
    _main_at_base(gate_repo)
    git(gate_repo.root, "merge", "-q", "--no-ff", "-m", "Merge pull request #42", "pr-42")
    edit(gate_repo.root / "images/common/checkout.sh", "checking out", "now checking out")
    moved = commit_all(gate_repo.root, "a later image change")
    ref, path = _signed(gate_repo, registry, gate_repo.tested)
    code, _, err = _release(capsys, gate_repo, ref, path)
    assert code == 9, err
    assert len(err) == 1
    assert f"this checkout's HEAD {moved[:12]} has " in err[0]
    _unmoved(registry)


def test_a_manifest_that_moved_only_in_what_no_build_reads_is_refused(
    gate_repo: GateRepo, registry: fake.FakeRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comment in the manifest moves no inputs hash but the manifest digest, which the
    evidence names as its subject: the release checkout's manifest is not the one tested."""
    _main_at_base(gate_repo)
    git(gate_repo.root, "merge", "-q", "--no-ff", "-m", "Merge pull request #42", "pr-42")
    manifest = gate_repo.root / "pins/manifest.toml"
    manifest.write_text(manifest.read_text() + "# a note\n")
    moved = commit_all(gate_repo.root, "a note in the manifest")
    ref, path = _signed(gate_repo, registry, gate_repo.tested)
    assert commit_inputs(moved, repo=gate_repo.root).inputs == (
        commit_inputs(gate_repo.tested, repo=gate_repo.root).inputs
    )
    code, _, err = _release(capsys, gate_repo, ref, path)
    assert code == 9, err
    assert len(err) == 1
    assert f"{path}: build.manifest_digest: " in err[0]
    assert f"this checkout's HEAD {moved[:12]} has sha256:" in err[0]
    _unmoved(registry)


def test_a_validated_commit_the_checkout_lacks_is_refused(
    gate_repo: GateRepo,
    registry: fake.FakeRegistry,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """A clone of main alone, after a squash merge: the evidence's commit is not even there."""
    _main_at_base(gate_repo)
    git(gate_repo.root, "merge", "-q", "--squash", "pr-42")
    commit_all(gate_repo.root, "the PR, squashed")
    ref, path = _signed(gate_repo, registry, gate_repo.tested)
    clone = tmp_path / "clone"
    source = str(gate_repo.root)
    git(tmp_path, "clone", "-q", "--no-local", "--single-branch", "-b", "main", source, str(clone))
    code, _, err = _release(capsys, gate_repo, ref, path, "--repo", str(clone))
    assert code == 9, err
    assert len(err) == 1
    assert f"source.commit: the evidence validated {gate_repo.tested}, which " in err[0]
    assert "is not in this checkout" in err[0]
    assert "fetch the default branch with its whole history (fetch-depth: 0)" in err[0]
    _unmoved(registry)
