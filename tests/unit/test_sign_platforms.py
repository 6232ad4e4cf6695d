"""The signer signs one statement per platform, each from a file named for its platform.

``validate-gpu.yml``'s sign job downloads every ``evidence-*`` artifact of the run into one folder
and signs each ``*.statement.json`` in it; the file name chose the envelope's name. The GPU jobs
run an image the PR built, so each runner is only as trusted as that image's container: a ROCm
runner that uploaded a CUDA statement as ``evidence-rocm/cuda.statement.json`` had it signed over
the CUDA runner's own (sorted later, written last), and a statement in a file named for the
other platform was signed under that name. Real repository, real key, the command as the sign
job runs it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.unit.evidence_builders import github_env, smoke_report, write_json
from tests.unit.gate_repos import PR, GateRepo
from tests.unit.gitrepos import needs_git
from twinbuild.cli.main import main
from twinbuild.evidence import record, save
from twinbuild.evidence.head import validated
from twinbuild.manifest.model import Platform

pytestmark = needs_git


@pytest.fixture
def repo(gate_repo: GateRepo, monkeypatch: pytest.MonkeyPatch) -> GateRepo:
    for key, value in github_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return gate_repo


def _save(repo: GateRepo, platform: Platform, path: Path) -> None:
    """A statement of ``platform`` for the tested commit, as a GPU job records it, at ``path``."""
    about = validated(repo.tested, PR, repo=repo.root)
    report = write_json(
        repo.root.parent / f"smoke-{path.parent.name}.json",
        smoke_report(platform, manifest_digest=about.manifest_digest),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    save(record(report, env=github_env(), now=datetime.now(UTC), validated=about), path)


def _sign(repo: GateRepo, statements: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> int:
    capsys.readouterr()
    return main(
        ["evidence", "sign", "--in", str(statements), "--out", str(out), "--key",
         str(repo.root.parent / "secret" / "ci.key"), "--commit", repo.tested, "--pr", str(PR),
         "--repo", str(repo.root)]
    )  # fmt: skip


def test_a_second_statement_for_one_platform_is_refused(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned, out = repo.root.parent / "unsigned", repo.root.parent / "sign-out"
    _save(repo, "cuda", unsigned / "evidence-cuda/cuda.statement.json")
    _save(repo, "cuda", unsigned / "evidence-rocm/cuda.statement.json")  # the ROCm runner's
    assert _sign(repo, unsigned, out, capsys) == 7
    assert capsys.readouterr().err.splitlines() == [
        f"twinbuild: {unsigned}/evidence-rocm/cuda.statement.json: a second cuda statement (the "
        f"first is {unsigned}/evidence-cuda/cuda.statement.json); each platform's GPU job records "
        "one, so sign none of them: re-run the validation"
    ]
    assert not out.exists() or not list(out.iterdir())  # nothing signed, not even the first


def test_a_statement_in_a_file_named_for_another_platform_is_refused(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned, out = repo.root.parent / "unsigned", repo.root.parent / "sign-out"
    _save(repo, "cuda", unsigned / "evidence-rocm/rocm.statement.json")
    assert _sign(repo, unsigned, out, capsys) == 7
    assert capsys.readouterr().err.splitlines() == [
        f"twinbuild: {unsigned}/evidence-rocm/rocm.statement.json: predicate.platform: 'cuda', "
        "but the file is named for rocm; sign only what each platform's GPU job recorded: re-run "
        "the validation"
    ]
    assert not out.exists() or not list(out.iterdir())


def test_one_statement_per_platform_is_signed(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned, out = repo.root.parent / "unsigned", repo.root.parent / "sign-out"
    _save(repo, "cuda", unsigned / "evidence-cuda/cuda.statement.json")
    _save(repo, "rocm", unsigned / "evidence-rocm/rocm.statement.json")
    assert _sign(repo, unsigned, out, capsys) == 0
    assert sorted(p.name for p in out.iterdir()) == ["cuda.dsse.json", "rocm.dsse.json"]
