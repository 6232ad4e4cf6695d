"""`evidence trigger`: validate-gpu.yml starts after any run of a workflow named "validate"; only
the validation build of validate/pr-<N> in this repository may lead to GPU jobs and the key.

The payloads are workflow_run events in the shape GitHub sends (octokit's webhook schema: the
completed run with its path, event, conclusion, head branch and sha, and both repositories).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.evidence_builders import REPO, REPO_ID
from tests.unit.github_runner import runner_outputs
from twinbuild.cli.main import main

SHA = "8f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e"
FORK_ID = 8000001


def _repo(full_name: str, repo_id: int) -> dict[str, Any]:
    owner = full_name.split("/", maxsplit=1)[0]
    return {
        "id": repo_id,
        "node_id": f"R_kgDO{repo_id}",
        "name": full_name.split("/")[1],
        "full_name": full_name,
        "private": False,
        "owner": {"login": owner, "id": repo_id + 1, "type": "Organization"},
        "html_url": f"https://github.com/{full_name}",
        "url": f"https://api.github.com/repos/{full_name}",
    }


def payload(**run: Any) -> dict[str, Any]:
    """A workflow_run 'completed' event for the push build of validate/pr-42, with ``run`` set."""
    base: dict[str, Any] = {
        "id": 13379001,
        "name": "validate",
        "node_id": "WFR_kwLOAAAB",
        "head_branch": "validate/pr-42",
        "head_sha": SHA,
        "path": ".github/workflows/validate.yml",
        "display_title": "bump flash-linear-attention",
        "run_number": 311,
        "event": "push",
        "status": "completed",
        "conclusion": "success",
        "workflow_id": 161335,
        "check_suite_id": 42111,
        "url": f"https://api.github.com/repos/{REPO}/actions/runs/13379001",
        "html_url": f"https://github.com/{REPO}/actions/runs/13379001",
        "pull_requests": [],
        "created_at": "2025-06-01T10:00:00Z",
        "updated_at": "2025-06-01T11:30:00Z",
        "run_attempt": 1,
        "run_started_at": "2025-06-01T10:00:05Z",
        "actor": {"login": "maintainer", "id": 9000001, "type": "User"},
        "triggering_actor": {"login": "maintainer", "id": 9000001, "type": "User"},
        "head_commit": {"id": SHA, "message": "bump", "author": {"name": "Contributor"}},
        "repository": _repo(REPO, REPO_ID),
        "head_repository": _repo(REPO, REPO_ID),
    }
    base.update(run)
    return {
        "action": "completed",
        "workflow_run": base,
        "workflow": {"id": 161335, "name": "validate", "path": ".github/workflows/validate.yml"},
        "repository": _repo(REPO, REPO_ID),
        "sender": {"login": "maintainer", "id": 9000001, "type": "User"},
    }


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    event: dict[str, Any],
    *,
    event_name: str = "workflow_run",
    tips: str = f"{SHA}\trefs/heads/validate/pr-42\n",
) -> tuple[int, list[str], list[str], dict[str, str]]:
    """The trigger job's check; ``tips``: what its `git ls-remote origin refs/heads/BRANCH`
    step wrote (by default: the branch at the run's head)."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    listed = tmp_path / "branch-tips"
    listed.write_text(tips)
    outputs = tmp_path / "outputs"
    outputs.write_text("")
    for key, value in {
        "GITHUB_EVENT_PATH": str(path),
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_REPOSITORY_ID": str(REPO_ID),
        "GITHUB_OUTPUT": str(outputs),
    }.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(["evidence", "trigger", "--github-output", f"--branch-tips={listed}"])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines(), runner_outputs(outputs.read_text())


def test_the_validation_build_of_a_pr_branch_hands_on_its_commit_and_pr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err, outputs = _run(tmp_path, monkeypatch, capsys, payload())
    assert (code, err) == (0, [])
    assert out == [
        f"validation build of validate/pr-42 at {SHA} (run 13379001) finished: GPU smoke, "
        "record and sign follow, on default-branch code"
    ]
    assert outputs == {"commit": SHA, "pr": "42", "branch": "validate/pr-42", "run-id": "13379001"}


def test_the_full_path_form_names_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    event = payload(path=f"{REPO}/.github/workflows/validate.yml@refs/heads/validate/pr-42")
    assert _run(tmp_path, monkeypatch, capsys, event)[0] == 0


def test_a_forks_pull_request_run_of_a_file_it_named_validate_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    event = payload(
        event="pull_request",
        head_branch="validate/pr-42",  # a fork chooses its branch names too
        head_repository=_repo("mallory/twinbuild", FORK_ID),
    )
    code, out, err, outputs = _run(tmp_path, monkeypatch, capsys, event)
    assert (code, out, outputs) == (7, [], {})
    assert err == [
        "twinbuild: workflow_run.event: 'pull_request' is not push; only a maintainer's push to "
        "validate/pr-N starts a validation",
        f"twinbuild: workflow_run.head_repository.id: {FORK_ID} is not this repository's id "
        f"{REPO_ID}; a fork's or another repository's run is never validated here",
    ]


@pytest.mark.parametrize(
    ("run", "line"),
    [
        ({"path": ".github/workflows/other.yml"}, "workflow_run.path: '.github/workflows/"
         "other.yml' is not .github/workflows/validate.yml; only the validation build starts "
         "GPU jobs"),
        ({"path": "mallory/twinbuild/.github/workflows/validate.yml@refs/heads/x"},
         "workflow_run.path: 'mallory/twinbuild/.github/workflows/validate.yml@refs/heads/x' is "
         "not .github/workflows/validate.yml; only the validation build starts GPU jobs"),
        ({"conclusion": "failure"}, "workflow_run.conclusion: 'failure': the build did not "
         "succeed; fix it and push again"),
        ({"head_branch": "validate/pr-42;id"}, "workflow_run.head_branch: 'validate/pr-42;id' "
         "is not validate/pr-<N>; push the PR head there"),
        ({"head_branch": "feature"}, "workflow_run.head_branch: 'feature' is not "
         "validate/pr-<N>; push the PR head there"),
        ({"head_sha": "HEAD"}, "workflow_run.head_sha: 'HEAD' is not a full 40-hex commit"),
        ({"repository": _repo("other/repo", 5)}, "workflow_run.repository.id: 5 is not this "
         f"repository's id {REPO_ID}; a fork's or another repository's run is never validated "
         "here"),
    ],
)  # fmt: skip
def test_any_other_run_is_refused_naming_the_field(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    run: dict[str, Any],
    line: str,
) -> None:
    code, _, err, outputs = _run(tmp_path, monkeypatch, capsys, payload(**run))
    assert (code, err, outputs) == (7, [f"twinbuild: {line}"], {})


def test_another_event_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err, _ = _run(tmp_path, monkeypatch, capsys, payload(), event_name="push")
    assert code == 7
    assert err == [
        "twinbuild: $GITHUB_EVENT_NAME: 'push' is not workflow_run; the validation workflow "
        "starts only when the validation build finishes"
    ]


OTHER = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("tips", "said"),
    [
        (
            f"{OTHER}\trefs/heads/validate/pr-42\n{SHA}\trefs/tags/validate/pr-42\n",
            f"workflow_run.head_sha: refs/heads/validate/pr-42 points at {OTHER}, not the run's "
            f"head {SHA}: only a run of the branch's own head is validated (a tag named "
            "validate/pr-42 is no branch; a newer push is validated by its own run)",
        ),
        (
            f"{SHA}\trefs/remotes/x/refs/heads/validate/pr-42\n",
            "workflow_run.head_branch: refs/heads/validate/pr-42 does not exist: the run that "
            "finished was no push to the branch validate/pr-42 (a tag of that name is no "
            "branch); push the PR head to the branch",
        ),
        (
            "",
            "workflow_run.head_branch: refs/heads/validate/pr-42 does not exist: the run that "
            "finished was no push to the branch validate/pr-42 (a tag of that name is no "
            "branch); push the PR head to the branch",
        ),
    ],
)
def test_a_run_whose_head_is_not_the_branch_tip_is_refused_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tips: str,
    said: str,
) -> None:
    """#39: a tag named validate/pr-42 runs the build, and head_branch then holds the tag's
    name; only the branch refs/heads/validate/pr-42 at the run's head counts."""
    code, out, err, outputs = _run(tmp_path, monkeypatch, capsys, payload(), tips=tips)
    assert (code, out, outputs) == (7, [], {})
    assert err == [f"twinbuild: {said}"]


def test_branch_tips_that_are_not_ls_remote_output_are_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err, _ = _run(tmp_path, monkeypatch, capsys, payload(), tips="main 1234\n")
    assert code == 2
    assert err == [
        f"twinbuild: {tmp_path / 'branch-tips'}:1: 'main 1234' is not a `git ls-remote` line "
        "(SHA, a tab, the ref); write it with git ls-remote origin refs/heads/BRANCH"
    ]
