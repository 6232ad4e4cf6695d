"""The evidence commands end to end through ``twinbuild.cli.main.main``, with real files and git.

keygen -> record -> sign -> verify -> gate, the way validate.yml and gate.yml chain them: a key
pair on disk, smoke reports, a real git repository holding the PR head and a validate/ branch
with the signed evidence. The gate reads the PR head from git objects, so these tests also prove
that the handler hands the policy the manifest digest and the inputs hashes of that head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from tests.helpers import MINI_VARIANTS, edit, image, mini_project
from tests.unit.evidence_builders import REPO, REPO_ID, github_env, smoke_report, write_json
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.image import plan_image
from twinbuild.cli.main import main
from twinbuild.engine.client import Engine
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.loader import load

pytestmark = needs_git
MANIFEST = Path("pins/manifest.toml")


class Chain:
    """One repository (a base and a PR head that bumps a pin), one key pair, and the steps of the
    validation run, each the command the workflows run."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        isolate_git(monkeypatch, tmp_path / "home")
        self.tmp = tmp_path
        self.monkeypatch = monkeypatch
        self.repo = mini_project(tmp_path)
        git(self.repo, "init", "-q", "-b", "main")
        self.base = commit_all(self.repo, "the base")
        edit(self.repo / MANIFEST, 'version = "0.4.2"', 'version = "0.4.3"')
        self.head = commit_all(self.repo, "the PR head")
        self.keys = tmp_path / "trusted-keys"  # the default branch's evidence/keys/
        self.private = tmp_path / "secret/evidence.key"
        manifest = load(self.repo / MANIFEST)
        self.digest = manifest.digest()
        options = BuildOptions(root=self.repo, profile="production")
        no_engine = cast(Engine, None)  # the production profile hashes without an engine
        self.inputs = {
            image(p): plan_image(manifest, no_engine, image(p), options, lambda _: None).inputs_hash
            for p in MINI_VARIANTS
        }
        monkeypatch.chdir(self.repo)
        for key in ("GITHUB_EVENT_PATH", "GITHUB_ACTIONS", "TWINBUILD_EVIDENCE_KEY"):
            monkeypatch.delenv(key, raising=False)
        for key, value in github_env().items():
            monkeypatch.setenv(key, value)

    def keygen(self) -> int:
        self.private.parent.mkdir()
        return main(
            ["evidence", "keygen", "--private", str(self.private), "--public",
             str(self.keys / "ci.pub")]
        )  # fmt: skip

    def record(self, platform: str, *, commit: str) -> int:
        """validate-gpu.yml's record step, after a smoke run of ``commit``'s manifest."""
        folder = self.tmp / "reports" / platform
        folder.mkdir(parents=True, exist_ok=True)
        report = smoke_report(platform, manifest_digest=commit_inputs(commit).manifest_digest)
        write_json(folder / f"smoke-{platform}-amd64-production.json", report)
        return main(
            ["evidence", "record", "--variant", platform, "--arch", "linux/amd64", "--report-dir", str(folder),
             "--out", str(self.tmp / "statements"), "--commit", commit, "--pr", "42"]
        )  # fmt: skip

    def sign(self, commit: str) -> int:
        return main(
            ["evidence", "sign", "--in", str(self.tmp / "statements"), "--out",
             str(self.repo / "evidence"), "--key", str(self.private), "--commit", commit,
             "--pr", "42"]
        )  # fmt: skip

    def validate(self, commit: str) -> None:
        for platform in MINI_VARIANTS:
            assert self.record(platform, commit=commit) == 0
        assert self.sign(commit) == 0
        self.publish(commit)

    def publish(self, commit: str) -> None:
        """Commit the signed evidence on validate/pr-42, as validate-gpu.yml does, and go back."""
        git(self.repo, "checkout", "-q", "-b", "validate/pr-42", commit)
        commit_all(self.repo, "evidence")
        git(self.repo, "checkout", "-q", "main")

    def move_head(self, path: str, old: str | None, new: str) -> None:
        """The contributor pushes again: one more commit on the PR head."""
        git(self.repo, "checkout", "-q", "-B", "pr", self.head)
        if old is None:
            (self.repo / path).write_text(new)
        else:
            edit(self.repo / path, old, new)
        self.head = commit_all(self.repo, f"edit {path}")
        git(self.repo, "checkout", "-q", "main")

    def gate(self, *extra: str) -> int:
        self.monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
        self.monkeypatch.setenv("GITHUB_REPOSITORY_ID", str(REPO_ID))
        return main(
            ["evidence", "gate", "--head", self.head, "--base", self.base, "--evidence-ref",
             "validate/pr-42", "--keys", str(self.keys), "--pr", "42", "--summary",
             str(self.tmp / "summary.md"), *extra]
        )  # fmt: skip


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Chain:
    return Chain(tmp_path, monkeypatch)


def test_keygen_record_sign_verify_gate(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    assert chain.keygen() == 0
    out = capsys.readouterr().out
    assert out.startswith("keyid ")
    assert f"store {chain.private} as the secret TWINBUILD_EVIDENCE_KEY" in out
    assert (chain.private.stat().st_mode & 0o777) == 0o600
    for platform in MINI_VARIANTS:
        assert chain.record(platform, commit=chain.head) == 0
    assert capsys.readouterr().out == (
        f"cuda (linux/amd64): verdict passed -> {chain.tmp / 'statements/cuda-amd64.statement.json'}\n"
        f"rocm (linux/amd64): verdict passed -> {chain.tmp / 'statements/rocm-amd64.statement.json'}\n"
    )
    assert chain.sign(chain.head) == 0
    signed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in signed] == [
        str(chain.repo / "evidence/cuda-amd64.dsse.json"),
        str(chain.repo / "evidence/rocm-amd64.dsse.json"),
    ]
    assert (
        main(["evidence", "verify", str(chain.repo / "evidence"), "--keys", str(chain.keys)]) == 0
    )
    verified = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 1)[1].split(" signed")[0] for line in verified] == [
        "cuda (linux/amd64)",
        "rocm (linux/amd64)",
    ]
    assert all(line.endswith(", verdict passed") for line in verified)
    chain.publish(chain.head)

    assert chain.gate() == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["cuda-amd64", "rocm-amd64"]
    assert lines[0].startswith(
        "cuda-amd64: 2 passed, 0 skipped on 1x NVIDIA H200 (driver 570.86, 12.9);"
    )
    assert f"commit {chain.head[:12]}, " in lines[0]
    summary = (chain.tmp / "summary.md").read_text()
    assert summary.startswith("## Evidence gate: accepted\n- cuda-amd64: 2 passed")


def test_the_gate_compares_the_manifest_digest_of_the_pr_head(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evidence gate` must hand the policy the head's manifest digest, or this passes: a comment
    in the manifest moves no image input, but the evidence is about those exact pins."""
    chain.keygen()
    chain.validate(chain.head)
    tested = chain.digest
    chain.move_head(str(MANIFEST), None, "# a comment\n" + (chain.repo / MANIFEST).read_text())
    moved = commit_inputs(chain.head).manifest_digest
    capsys.readouterr()
    assert chain.gate() == 7
    err = capsys.readouterr().err
    assert err == "".join(
        f"twinbuild: validate/pr-42:evidence/{p}-amd64.dsse.json: manifest: evidence tested "
        f"pins/manifest.toml {tested}, the PR head has {moved}; validate the PR head\n"
        for p in MINI_VARIANTS
    )
    assert (chain.tmp / "summary.md").read_text().startswith("## Evidence gate: refused\n- ")


def test_the_gate_matches_another_commit_by_the_head_inputs_hash(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """Evidence of an earlier commit counts when the PR head builds the same images."""
    chain.keygen()
    earlier = chain.head
    chain.validate(earlier)
    chain.move_head("README.md", None, "# words, no image\n")
    capsys.readouterr()
    assert chain.gate() == 0
    out = capsys.readouterr().out
    assert out.count("with the same inputs as the PR head") == 2
    assert chain.gate("--same-commit") == 7
    err = capsys.readouterr().err
    assert (
        f"evidence is for commit {earlier}, the PR head is {chain.head}, and --same-commit counts "
        "the PR head's own evidence only; push the new head to validate/pr-42 to validate it" in err
    )


def test_the_gate_refuses_evidence_when_the_head_moved_a_pin(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """The head's inputs come from the head commit: a rocm pin moved there voids rocm's evidence."""
    chain.keygen()
    earlier = chain.head
    chain.validate(earlier)
    chain.move_head(str(MANIFEST), 'version = "0.65.1"', 'version = "0.66.0"')  # numba: rocm only
    now = commit_inputs(chain.head)
    capsys.readouterr()
    assert chain.gate() == 7
    err = capsys.readouterr().err.splitlines()
    where = {p: f"twinbuild: validate/pr-42:evidence/{p}-amd64.dsse.json" for p in MINI_VARIANTS}
    assert [line.split(": ")[2] for line in err] == ["manifest", "inputs", "manifest"]
    assert err[0].startswith(f"{where['cuda']}: manifest: ")
    assert err[0].endswith(f"the PR head has {now.manifest_digest}; validate the PR head")
    assert err[1] == (
        f"{where['rocm']}: inputs: evidence tested inputs {chain.inputs[image('rocm')]} (commit "
        f"{earlier[:12]}); the PR head {chain.head[:12]} has {now.inputs[image('rocm')]}; push the new "
        "head to validate/pr-42 to validate it"
    )


def test_no_evidence_on_the_ref_refuses_both_platforms(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    chain.keygen()
    git(chain.repo, "branch", "validate/pr-42")
    capsys.readouterr()
    assert chain.gate() == 7
    err = capsys.readouterr().err.splitlines()
    assert [line.split(":")[1] for line in err] == [" cuda-amd64", " rocm-amd64"]
    assert err[0] == (
        "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64); the gate requires "
        'every architecture of every variant with validate = "pr": add '
        "evidence/cuda-amd64.dsse.json from the validation run"
    )


def test_a_head_that_is_not_in_the_repository_is_a_usage_error(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    chain.keygen()
    chain.head = "e" * 40
    capsys.readouterr()
    assert chain.gate() == 2
    assert capsys.readouterr().err == (
        f"twinbuild: git merge-base {chain.base[:12]} eeeeeeeeeeee: fatal: Not a valid commit "
        f"name {'e' * 40}; fetch both commits with their history (actions/checkout "
        "fetch-depth: 0)\n"
    )


def test_the_gate_needs_the_repository_id(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    chain.monkeypatch.delenv("GITHUB_REPOSITORY_ID", raising=False)
    code = main(
        [
            "evidence",
            "gate",
            "--head",
            chain.head,
            "--base",
            chain.base,
            "--keys",
            str(chain.keys),
            "--pr",
            "42",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        "twinbuild: evidence gate: GITHUB_REPOSITORY_ID is unset; run it in GitHub Actions\n"
    )


def test_the_pr_number_comes_from_the_event(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """The PR gated is the event's pull request, not --pr: evidence of validate/pr-42 is not
    evidence for PR 7."""
    chain.keygen()
    event = write_json(chain.tmp / "event.json", {"pull_request": {"number": 7}})
    chain.validate(chain.head)
    chain.monkeypatch.setenv("GITHUB_EVENT_PATH", str(event))
    capsys.readouterr()
    assert chain.gate() == 7
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert all(
        line.endswith("push the reviewed PR head to refs/heads/validate/pr-7") for line in err
    )


def test_record_refuses_a_report_of_the_other_platform(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = chain.tmp / "reports/mixed"
    folder.mkdir(parents=True)
    digest = commit_inputs(chain.head).manifest_digest
    write_json(folder / "report.json", smoke_report("rocm", manifest_digest=digest))
    code = main(
        ["evidence", "record", "--variant", "cuda", "--arch", "linux/amd64", "--report-dir", str(folder), "--out",
         str(chain.tmp / "out"), "--commit", chain.head, "--pr", "42"]
    )  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        f"twinbuild: {folder / 'report.json'}: the report is for rocm (linux/amd64), not cuda (linux/amd64)\n"
    )


def test_sign_and_verify_refuse_empty_folders(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    chain.keygen()
    empty = chain.tmp / "empty"
    empty.mkdir()
    capsys.readouterr()
    assert main(["evidence", "sign", "--in", str(empty), "--out", str(empty),
                 "--key", str(chain.private), "--commit", chain.head, "--pr", "42"]) == 2  # fmt: skip
    assert capsys.readouterr().err == (
        f"twinbuild: {empty}: no *.statement.json to sign; run `evidence record` first\n"
    )
    assert main(["evidence", "verify", str(empty), "--keys", str(chain.keys)]) == 2
    assert capsys.readouterr().err == f"twinbuild: {empty}: no *.dsse.json evidence found\n"


def test_verify_refuses_a_statement_signed_by_an_untrusted_key(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    chain.keygen()
    chain.record("cuda", commit=chain.head)
    chain.sign(chain.head)
    other = chain.tmp / "other-keys"
    other.mkdir()
    capsys.readouterr()
    assert main(["evidence", "verify", str(chain.repo / "evidence/cuda-amd64.dsse.json"),
                 "--keys", str(other)]) == 7  # fmt: skip
    err = capsys.readouterr().err
    assert f"signature: no trusted keys in {other}/;" in err  # the folder it read, not the default
    envelope = json.loads((chain.repo / "evidence/cuda-amd64.dsse.json").read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"


def test_evidence_inputs_prints_what_the_build_hashes(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """The head's hashes from git objects equal the build's over the working tree."""
    code = main(
        ["evidence", "inputs", "--head", chain.head, "--repo", str(chain.repo), "--format", "json"]
    )
    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "inputs": {i.variant: {i.arch: h} for i, h in chain.inputs.items()},
        "required": ["cuda", "rocm"],
        "manifest_digest": chain.digest,
    }


def test_trigger_outside_a_workflow_run_is_refused(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """The full check is tests/unit/test_evidence_trigger.py; here: one line, exit 7."""
    chain.monkeypatch.setenv("GITHUB_EVENT_NAME", "push")
    capsys.readouterr()
    assert main(["evidence", "trigger"]) == 7
    assert capsys.readouterr().err.startswith("twinbuild: $GITHUB_EVENT_NAME: 'push' is not ")


def test_check_push_before_a_validation_push(
    chain: Chain, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chain's PR bumps a pin and adds no workflow: the maintainer may push it as it is
    (the refusals are in tests/unit/test_check_push.py)."""
    capsys.readouterr()
    assert main(["evidence", "check-push", "--base", chain.base, "--head", chain.head]) == 0
    out = capsys.readouterr().out
    assert "no workflow or action added or changed against the base" in out
