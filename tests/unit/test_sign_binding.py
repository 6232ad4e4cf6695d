"""The signer vouches only for what its own code computes: `evidence record` and `evidence sign`
take the commit and PR from the trigger check and the inputs hash and manifest digest from the
commit's git objects, never from the statement or the image; and they never write through a link.

Real repositories (tests/unit/gate_repos.py), a real key, the commands run as validate-gpu.yml
runs them.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import image
from tests.unit.evidence_builders import github_env, smoke_report, write_json
from tests.unit.gate_repos import PR, GateRepo
from tests.unit.gitrepos import needs_git
from twinbuild.cli.main import main
from twinbuild.evidence import record, save
from twinbuild.evidence.head import commit_inputs, validated
from twinbuild.evidence.statement import Validated

pytestmark = needs_git


@pytest.fixture
def repo(gate_repo: GateRepo, monkeypatch: pytest.MonkeyPatch) -> GateRepo:
    """``gate_repo``, with the variables the default branch's validation run sees."""
    for key, value in github_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return gate_repo


def _statement(repo: GateRepo, out: Path, about: Validated) -> Path:
    """A statement for ``about`` as a recorder would write it (the attacker's, if ``about`` lies)."""
    report = smoke_report("cuda", manifest_digest=about.manifest_digest)
    path = write_json(repo.root.parent / "smoke.json", report)
    statement = record(path, env=github_env(), now=datetime.now(UTC), validated=about)
    out.mkdir(parents=True, exist_ok=True)
    save(statement, out / "cuda-amd64.statement.json")
    return out


def _sign(repo: GateRepo, statements: Path, out: Path, commit: str, *extra: str) -> int:
    key = repo.root.parent / "secret" / "ci.key"
    return main(
        ["evidence", "sign", "--in", str(statements), "--out", str(out), "--key", str(key),
         "--commit", commit, "--pr", str(PR), "--repo", str(repo.root), *extra]
    )  # fmt: skip


def _about(commit: str, root: Path, **change: object) -> Validated:
    found = commit_inputs(commit, repo=root)
    fields: dict[str, object] = {
        "commit": commit, "pr": PR, "inputs": found.inputs, "vendors": found.vendors,
        "manifest_digest": found.manifest_digest,
    }  # fmt: skip
    fields.update(change)
    return Validated(**fields)  # type: ignore[arg-type]


def test_the_signer_refuses_an_inputs_hash_that_is_not_its_commits(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tested commit's recorder (the PR's code, before this change) wrote the inputs hash of
    # another commit, whose recipes were never built: the gate would accept it for that commit.
    other = commit_inputs(repo.base, repo=repo.root)
    forged = _about(repo.tested, repo.root, inputs=other.inputs)
    statements = _statement(repo, repo.root.parent / "unsigned", forged)
    out = repo.root.parent / "out"
    capsys.readouterr()
    assert _sign(repo, statements, out, repo.tested) == 7
    err = capsys.readouterr().err.splitlines()
    tested = commit_inputs(repo.tested, repo=repo.root)
    assert err == [
        f"twinbuild: {statements}/cuda-amd64.statement.json: predicate.build.inputs_hash: "
        f"{other.inputs[image('cuda')]!r} is not the cuda (linux/amd64) inputs hash of {repo.tested[:12]}, computed "
        f"here from its git objects ({tested.inputs[image('cuda')]!r}); sign only what the validation "
        f"of {repo.tested[:12]} recorded"
    ]
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"commit": "base"}, "source.commit"),
        ({"pr": PR + 1}, "source.ref"),  # validate/pr-43: the first field that differs
        ({"manifest_digest": "sha256:" + "e" * 64}, "build.manifest_digest"),
    ],
)
def test_the_signer_refuses_a_statement_about_anything_else(
    repo: GateRepo, capsys: pytest.CaptureFixture[str], change: dict[str, object], field: str
) -> None:
    commit = repo.tested
    change = dict(change)  # the parameter is shared; keep it whole
    if change.pop("commit", None) == "base":  # the base, with the tested commit's inputs
        commit = repo.base
        change["inputs"] = commit_inputs(repo.tested, repo=repo.root).inputs
    about = _about(commit, repo.root, **change)
    statements = _statement(repo, repo.root.parent / "unsigned", about)
    capsys.readouterr()
    assert _sign(repo, statements, repo.root.parent / "out", repo.tested) == 7
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert f"cuda-amd64.statement.json: predicate.{field}: " in err[0]


def test_a_statement_of_the_validated_commit_is_signed(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    statements = _statement(repo, repo.root.parent / "unsigned", _about(repo.tested, repo.root))
    out = repo.root.parent / "out"
    assert _sign(repo, statements, out, repo.tested) == 0
    assert sorted(p.name for p in out.iterdir()) == ["cuda-amd64.dsse.json"]


def test_the_signer_does_not_write_through_a_linked_folder(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    # The validated branch commits evidence/ as a link to the trusted keys of the tool checkout.
    tool_keys = repo.root.parent / "tool" / "evidence" / "keys"
    tool_keys.mkdir(parents=True)
    (tool_keys / "cuda-amd64.dsse.json").write_text("a trusted file\n")
    branch = repo.root.parent / "branch"
    branch.mkdir()
    (branch / "evidence").symlink_to(tool_keys)
    statements = _statement(repo, repo.root.parent / "unsigned", _about(repo.tested, repo.root))
    capsys.readouterr()
    assert _sign(repo, statements, branch / "evidence", repo.tested) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"twinbuild: {branch / 'evidence'}: {branch / 'evidence'} is a symlink (to {tool_keys}); "
        "refusing to write through it, write into a plain folder"
    ]
    assert (tool_keys / "cuda-amd64.dsse.json").read_text() == "a trusted file\n"


def test_the_signer_does_not_write_through_a_linked_file(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = repo.root.parent / "tool-key.pub"
    outside.write_text("a trusted key\n")
    out = repo.root.parent / "out"
    out.mkdir()
    (out / "cuda-amd64.dsse.json").symlink_to(outside)
    statements = _statement(repo, repo.root.parent / "unsigned", _about(repo.tested, repo.root))
    capsys.readouterr()
    assert _sign(repo, statements, out, repo.tested) == 2
    err = capsys.readouterr().err
    assert f"resolves to {outside}, outside {out}; refusing to write there" in err
    assert outside.read_text() == "a trusted key\n"


def _record(repo: GateRepo, report: dict[str, object], out: Path) -> int:
    folder = repo.root.parent / "reports"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    write_json(folder / "smoke-cuda-amd64-production.json", report)
    return main(
        ["evidence", "record", "--variant", "cuda", "--arch", "linux/amd64", "--report-dir", str(folder), "--out",
         str(out), "--commit", repo.tested, "--pr", str(PR), "--repo", str(repo.root)]
    )  # fmt: skip


def test_record_takes_the_inputs_hash_from_git_objects_not_the_image_label(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    found = commit_inputs(repo.tested, repo=repo.root)
    report = smoke_report("cuda", manifest_digest=found.manifest_digest)
    report["image"]["inputs_hash"] = "sha256:" + "f" * 64  # what the PR's build labelled
    out = repo.root.parent / "statements"
    assert _record(repo, report, out) == 0
    statement = json.loads((out / "cuda-amd64.statement.json").read_text())
    assert statement["predicate"]["build"]["inputs_hash"] == found.inputs[image("cuda")]
    assert statement["predicate"]["source"]["commit"] == repo.tested
    assert statement["predicate"]["source"]["ref"] == f"refs/heads/validate/pr-{PR}"
    assert statement["predicate"]["source"]["pr"] == PR


def test_record_refuses_a_smoke_run_of_another_manifest(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    found = commit_inputs(repo.tested, repo=repo.root)
    report = smoke_report("cuda", manifest_digest="sha256:" + "e" * 64)
    capsys.readouterr()
    assert _record(repo, report, repo.root.parent / "statements") == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].endswith(
        f"report.manifest_digest: the smoke run checked pins/manifest.toml sha256:{'e' * 64}, "
        f"commit {repo.tested} has {found.manifest_digest}; smoke the image against the "
        "validated commit's manifest"
    )


def test_record_does_not_write_through_a_linked_folder(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    found = commit_inputs(repo.tested, repo=repo.root)
    elsewhere = repo.root.parent / "elsewhere"
    elsewhere.mkdir()
    link = repo.root.parent / "statements"
    link.symlink_to(elsewhere)
    report = smoke_report("cuda", manifest_digest=found.manifest_digest)
    capsys.readouterr()
    assert _record(repo, report, link) == 2
    assert "is a symlink" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []


# One statement per image, each from a file named for its image. The sign job downloads every
# evidence-* artifact of the run into one folder, and the GPU jobs run an image the PR built: a
# ROCm runner that uploaded a CUDA statement as evidence-rocm/cuda-amd64.statement.json had it
# signed over the CUDA runner's own (sorted later, written last), and a statement in a file
# named for another image was signed under that name.


def _save(repo: GateRepo, variant: str, path: Path) -> None:
    """A statement of ``variant`` (amd64) for the tested commit, as a GPU job records it."""
    about = validated(repo.tested, PR, repo=repo.root)
    report = write_json(
        repo.root.parent / f"smoke-{path.parent.name}.json",
        smoke_report(variant, manifest_digest=about.manifest_digest),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    save(record(report, env=github_env(), now=datetime.now(UTC), validated=about), path)


def test_a_second_statement_for_one_image_is_refused(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned, out = repo.root.parent / "unsigned", repo.root.parent / "sign-out"
    _save(repo, "cuda", unsigned / "evidence-cuda/cuda-amd64.statement.json")
    _save(repo, "cuda", unsigned / "evidence-rocm/cuda-amd64.statement.json")  # the ROCm runner's
    capsys.readouterr()
    assert _sign(repo, unsigned, out, repo.tested) == 7
    assert capsys.readouterr().err.splitlines() == [
        f"twinbuild: {unsigned}/evidence-rocm/cuda-amd64.statement.json: a second cuda "
        f"(linux/amd64) statement (the first is {unsigned}/evidence-cuda/cuda-amd64.statement.json)"
        "; each image's GPU job records one, so sign none of them: re-run the validation"
    ]
    assert not out.exists() or not list(out.iterdir())  # nothing signed, not even the first


def test_a_statement_in_a_file_named_for_another_image_is_refused(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned, out = repo.root.parent / "unsigned", repo.root.parent / "sign-out"
    _save(repo, "cuda", unsigned / "evidence-rocm/rocm-amd64.statement.json")
    capsys.readouterr()
    assert _sign(repo, unsigned, out, repo.tested) == 7
    assert capsys.readouterr().err.splitlines() == [
        f"twinbuild: {unsigned}/evidence-rocm/rocm-amd64.statement.json: predicate.image: cuda "
        "(linux/amd64), but the file is named for rocm-amd64; sign only what each image's GPU job "
        "recorded: re-run the validation"
    ]
    assert not out.exists() or not list(out.iterdir())


def test_one_statement_per_image_is_signed(
    repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    unsigned, out = repo.root.parent / "unsigned", repo.root.parent / "sign-out"
    _save(repo, "cuda", unsigned / "evidence-cuda/cuda-amd64.statement.json")
    _save(repo, "rocm", unsigned / "evidence-rocm/rocm-amd64.statement.json")
    assert _sign(repo, unsigned, out, repo.tested) == 0
    assert sorted(p.name for p in out.iterdir()) == ["cuda-amd64.dsse.json", "rocm-amd64.dsse.json"]
