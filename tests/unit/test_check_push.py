"""`evidence check-push`: what a validation push would run of the head's own workflows.

``git push origin FETCH_HEAD:refs/heads/validate/pr-N`` runs every ``push`` workflow the head
holds, its own copy, with this repository's token; no code of ours runs before they do. So the
maintainer asks first: which files under ``.github/workflows/`` and ``.github/actions/`` does the
head hold unlike the base as it is now (not the merge base: an old head keeps old workflows)? Each is refused (exit 9, one line) unless
``--reviewed-workflows`` names exactly those paths; a link there is refused whatever is named.
Real git repositories, the real command line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.gitrepos import commit_all, commit_file, git, init, isolate_git
from twinbuild.cli.main import main

PUSH = "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: env\n"
PR = "on: pull_request\njobs: {}\n"
ACTION = "runs:\n  using: composite\n  steps: []\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``main`` with a workflow and a local action; the PR branch ``head`` from it, unchanged."""
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(tmp_path / "repo")
    commit_file(root, ".github/workflows/pr.yml", PR, "pr workflow")
    commit_file(root, ".github/actions/setup/action.yml", ACTION, "an action")
    commit_file(root, "docs/index.md", "# docs\n", "docs")
    git(root, "checkout", "-q", "-b", "head")
    monkeypatch.chdir(root)
    return root


def _check(
    capsys: pytest.CaptureFixture[str], *more: str, base: str = "main", head: str = "head"
) -> tuple[int, list[str], list[str]]:
    capsys.readouterr()
    code = main(["evidence", "check-push", f"--base={base}", f"--head={head}", *more])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def _base(root: Path) -> str:
    return git(root, "rev-parse", "main")[:12]


def _refused(path: str, what: str, root: Path) -> str:
    mb = _base(root)
    return (
        f"twinbuild: {path}: {what} in the head against the base {mb}; a push to validate/ "
        f"runs the head's own workflows with this repository's token: read `git diff {mb} head "
        f"-- {path}`, then pass --reviewed-workflows naming exactly the paths listed"
    )


def test_an_added_push_workflow_is_refused_and_listed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit_file(repo, ".github/workflows/exfiltrate.yml", PUSH, "a push workflow")
    code, out, err = _check(capsys)
    assert code == 9, err
    assert "  added    .github/workflows/exfiltrate.yml" in out
    assert err == [_refused(".github/workflows/exfiltrate.yml", "added", repo)]


def test_a_changed_action_and_a_mode_change_are_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit_file(repo, ".github/actions/setup/action.yml", ACTION + "# more\n", "edit the action")
    (repo / ".github/workflows/pr.yml").chmod(0o755)
    commit_all(repo, "mode")
    code, out, err = _check(capsys)
    assert code == 9, err
    assert err == [
        _refused(".github/actions/setup/action.yml", "changed", repo),
        _refused(".github/workflows/pr.yml", "changed", repo),
    ]
    assert "  changed  .github/actions/setup/action.yml" in out


def test_a_renamed_workflow_is_refused_under_its_new_name(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "mv", ".github/workflows/pr.yml", ".github/workflows/ci.yml")
    commit_all(repo, "rename")
    code, out, err = _check(capsys)
    assert code == 9, err
    assert "  renamed  .github/workflows/ci.yml (from .github/workflows/pr.yml)" in out
    assert err == [_refused(".github/workflows/ci.yml", "renamed", repo)]


def test_a_deleted_workflow_runs_nothing_and_passes_listed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "rm", "-q", ".github/workflows/pr.yml")
    commit_all(repo, "delete")
    code, out, err = _check(capsys)
    assert code == 0, err
    assert "  deleted  .github/workflows/pr.yml" in out
    assert out[-1].startswith("no workflow or action added or changed against the base")


def test_exactly_the_reviewed_paths_pass_and_any_other_set_is_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commit_file(repo, ".github/workflows/push.yml", PUSH, "a push workflow")
    commit_file(repo, ".github/actions/setup/action.yml", ACTION + "# x\n", "edit")
    both = (".github/workflows/push.yml", ".github/actions/setup/action.yml")
    code, out, err = _check(capsys, "--reviewed-workflows", *both)
    assert code == 0, err
    assert out[-1] == (f"2 workflow paths added, changed or renamed against the base {_base(repo)}")
    assert err == ["each named by --reviewed-workflows: push head to validate/pr-N"]
    code, _, err = _check(capsys, "--reviewed-workflows", both[0])
    assert code == 9
    assert err == [_refused(both[1], "changed", repo)]
    code, _, err = _check(capsys, "--reviewed-workflows", *both, ".github/workflows/pr.yml")
    assert code == 9
    assert err == [
        "twinbuild: --reviewed-workflows .github/workflows/pr.yml: the head does not add or "
        "change it; name exactly the added and changed paths listed"
    ]


def test_a_symlinked_workflow_is_refused_whoever_reviewed_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link's target can change in a later push that touches only docs/: no diff of
    .github/ would show it, so a link among the workflows is refused even when named."""
    commit_file(repo, "docs/ci.yml", PUSH, "a workflow in docs")
    (repo / ".github/workflows/ci.yml").symlink_to("../../docs/ci.yml")
    commit_all(repo, "link it")
    code, _, err = _check(capsys, "--reviewed-workflows", ".github/workflows/ci.yml")
    assert code == 9, err
    assert err == [
        "twinbuild: .github/workflows/ci.yml: a symlink in the head; a push runs what it points "
        "at, which no diff of .github/ shows: ask for the file itself instead of a link"
    ]
    # Merged once, it stays refused when only its target changes.
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "head")
    git(repo, "checkout", "-q", "head")
    commit_file(repo, "docs/ci.yml", PUSH + "# now it does more\n", "only docs change")
    code, _, err = _check(capsys)
    assert code == 9, err
    assert len(err) == 1
    assert "ci.yml: a symlink in the head" in err[0]


def test_the_workflows_folder_as_a_link_is_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo, "rm", "-q", "-r", ".github/workflows")
    commit_file(repo, "docs/wf/push.yml", PUSH, "workflows in docs")
    (repo / ".github/workflows").symlink_to("../docs/wf")
    commit_all(repo, "the folder is a link")
    code, _, err = _check(capsys, "--reviewed-workflows", ".github/workflows")
    assert code == 9, err
    assert err[0].startswith("twinbuild: .github/workflows: a symlink in the head;")


def test_a_workflow_only_the_base_has_runs_nothing_and_passes_listed(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base moved on (a new workflow on main) after the head branched: the head lacks it, so
    a push runs nothing of it (listed as deleted); changes elsewhere (docs, CODEOWNERS) need no
    review here."""
    commit_file(repo, "docs/index.md", "# more docs\n", "docs")
    commit_file(repo, ".github/CODEOWNERS", "* @maintainer\n", "owners")
    git(repo, "checkout", "-q", "main")
    commit_file(repo, ".github/workflows/nightly.yml", PUSH, "main's own new workflow")
    git(repo, "checkout", "-q", "head")
    code, out, err = _check(capsys)
    assert code == 0, err
    assert out == [
        f"workflow and action files the head head holds unlike the base {_base(repo)}:",
        "  deleted  .github/workflows/nightly.yml",
        f"no workflow or action added or changed against the base {_base(repo)}: the push runs "
        "only workflows the base has",
    ]


def test_refs_that_are_options_or_unknown_are_bad_input(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _check(capsys, head="--output=x")
    assert code == 2
    assert len(err) == 1
    assert "--head" in err[0]
    code, _, err = _check(capsys, head="no-such-branch")
    assert code == 2
    assert len(err) == 1
    assert "no-such-branch" in err[0]
    assert "fetch" in err[0]


def test_a_head_on_an_old_base_keeps_the_old_workflow_and_is_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 6 of #39: main fixed pr.yml after the head branched; the head never touched it, so
    against the merge base it changes nothing, yet a push of it runs the old, unfixed copy. The
    check diffs against the current base: that copy is one the maintainer must read."""
    git(repo, "checkout", "-q", "main")
    commit_file(repo, ".github/workflows/pr.yml", PR + "# fixed on main\n", "main fixes pr.yml")
    git(repo, "checkout", "-q", "head")
    commit_file(repo, "docs/index.md", "# more docs\n", "the head's own change")
    code, out, err = _check(capsys)
    assert code == 9, err
    assert "  changed  .github/workflows/pr.yml" in out
    assert err == [_refused(".github/workflows/pr.yml", "changed", repo)]
