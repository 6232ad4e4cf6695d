"""Which run started the validation workflow: the check before any GPU job or the key.

``validate-gpu.yml`` runs on ``workflow_run``, so GitHub runs the default branch's copy of it,
with this repository's privileges, after *any* run of a workflow named ``validate`` completes: a
fork's pull_request run of a file it named so, another file of this repository, a failed build.
Its first job runs :func:`check` (``twinbuild evidence trigger``) on the event payload and stops
the workflow unless the run that finished is the validation build: the file
``.github/workflows/validate.yml``, started by a ``push`` to ``validate/pr-<N>`` of this very
repository (by numeric id: a fork or a re-created namesake differs), finished with success. The
commit and PR it hands on are the only source the record and sign steps take them from.

The payload's ``head_branch`` holds a tag's name for a tag push: a tag named ``validate/pr-42``
at an intermediate PR commit ran the build and passed as the branch. So the trigger also needs
where ``refs/heads/validate/pr-<N>`` points (``--branch-tips``: the trigger job's ``git ls-remote
origin refs/heads/<head_branch>``), and goes on only when that branch exists and points at the
run's head commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.evidence.statement import COMMIT_RE
from twinbuild.util import bounded, environ, values

#: The workflow file whose push runs build the images the GPU jobs test.
BUILD_WORKFLOW = ".github/workflows/validate.yml"
_BRANCH = re.compile(r"validate/pr-([1-9][0-9]{0,18})")
MAX_TIPS_BYTES = 64 * 1024  # ls-remote of one ref pattern: a few lines


@dataclass(frozen=True, slots=True, kw_only=True)
class Triggered:
    """The validation build that finished: what the later jobs validate."""

    commit: str
    pr: int
    branch: str
    run_id: int

    def outputs(self) -> dict[str, str]:
        return {
            "commit": self.commit,
            "pr": str(self.pr),
            "branch": self.branch,
            "run-id": str(self.run_id),
        }

    def line(self) -> str:
        return (
            f"validation build of {self.branch} at {self.commit} (run {self.run_id}) finished: "
            "GPU smoke, record and sign follow, on default-branch code"
        )


def read_tips(path: Path) -> dict[str, str]:
    """``git ls-remote`` output (``SHA<TAB>REF`` lines): each ref's commit."""
    tips: dict[str, str] = {}
    text = bounded.read_text(path, limit=MAX_TIPS_BYTES, what="git ls-remote output")
    for number, line in enumerate(bounded.lines(text), start=1):
        sha, tab, ref = line.partition("\t")
        if not line:
            continue
        if not tab or not COMMIT_RE.fullmatch(sha) or not ref.startswith("refs/"):
            raise ConfigError(
                f"{path}:{number}: {line[:80]!r} is not a `git ls-remote` line (SHA, a tab, "
                "the ref); write it with git ls-remote origin refs/heads/BRANCH"
            )
        tips[ref] = sha
    return tips


def check(
    payload: Mapping[str, object],
    *,
    env: Mapping[str, str],
    workflow: str = BUILD_WORKFLOW,
    tips: Mapping[str, str] | None = None,
) -> Triggered:
    """The build run in a ``workflow_run`` payload, or every reason it is not ours (exit 7);
    ``tips``: where the branches point (``git ls-remote``), the run's branch among them."""
    if env.get("GITHUB_EVENT_NAME") != "workflow_run":
        raise EvidenceRefused(
            f"$GITHUB_EVENT_NAME: {env.get('GITHUB_EVENT_NAME')!r} is not workflow_run; the "
            "validation workflow starts only when the validation build finishes"
        )
    repo_id = environ.whole("GITHUB_REPOSITORY_ID", low=1, high=values.MAX_ID, env=env)
    if repo_id is None:
        raise ConfigError("$GITHUB_REPOSITORY_ID is unset; run it in GitHub Actions")
    run = payload.get("workflow_run")
    if not isinstance(run, dict):
        raise ConfigError("the event payload has no workflow_run object; is this workflow_run?")
    refusals: list[str] = []

    def refuse(field: str, message: str) -> None:
        refusals.append(f"workflow_run.{field}: {message}")

    repository = str(env.get("GITHUB_REPOSITORY", ""))
    path = run.get("path")
    if not _is_build(path, workflow, repository):
        refuse("path", f"{path!r} is not {workflow}; only the validation build starts GPU jobs")
    if run.get("event") != "push":
        refuse(
            "event",
            f"{run.get('event')!r} is not push; only a maintainer's push to validate/pr-N "
            "starts a validation",
        )
    if run.get("conclusion") != "success":
        refuse(
            "conclusion",
            f"{run.get('conclusion')!r}: the build did not succeed; fix it and push again",
        )
    for key in ("repository", "head_repository"):
        found = _id(run.get(key))
        if found != repo_id:
            refuse(
                f"{key}.id",
                f"{found!r} is not this repository's id {repo_id}; a fork's or another "
                "repository's run is never validated here",
            )
    branch = run.get("head_branch")
    match = _BRANCH.fullmatch(branch) if isinstance(branch, str) else None
    if match is None:
        refuse("head_branch", f"{branch!r} is not validate/pr-<N>; push the PR head there")
    commit = run.get("head_sha")
    if not isinstance(commit, str) or not COMMIT_RE.fullmatch(commit):
        refuse("head_sha", f"{commit!r} is not a full 40-hex commit")
    elif match is not None:
        _check_tip(f"refs/heads/{match.group(0)}", commit, tips, refuse)
    run_id = run.get("id")
    if not isinstance(run_id, int) or isinstance(run_id, bool) or run_id < 1:
        refuse("id", f"{run_id!r} is not a run id")
    if refusals or match is None or not isinstance(commit, str) or not isinstance(run_id, int):
        raise EvidenceRefused("\n".join(refusals))
    return Triggered(commit=commit, pr=int(match.group(1)), branch=match.group(0), run_id=run_id)


def _check_tip(
    ref: str, commit: str, tips: Mapping[str, str] | None, refuse: Callable[[str, str], None]
) -> None:
    """The branch exists and points at the run's head: a tag of its name is no branch."""
    branch = ref.removeprefix("refs/heads/")
    if tips is None:
        refuse(
            "head_branch",
            f"where {ref} points is unknown (a tag named {branch} runs the build too): pass "
            f"--branch-tips with `git ls-remote origin {ref}`",
        )
        return
    tip = tips.get(ref)
    if tip is None:
        refuse(
            "head_branch",
            f"{ref} does not exist: the run that finished was no push to the branch {branch} (a "
            "tag of that name is no branch); push the PR head to the branch",
        )
    elif tip != commit:
        refuse(
            "head_sha",
            f"{ref} points at {tip}, not the run's head {commit}: only a run of the branch's own "
            f"head is validated (a tag named {branch} is no branch; a newer push is validated by "
            "its own run)",
        )


def _is_build(path: object, workflow: str, repository: str) -> bool:
    """GitHub names the file ``.github/workflows/x.yml``, or ``owner/repo/.github/...@ref``."""
    if path == workflow:
        return True
    if not isinstance(path, str) or "@" not in path:
        return False
    full = path.rpartition("@")[0]
    owner_repo = full.removesuffix("/" + workflow)
    return (
        owner_repo != full and bool(repository) and owner_repo.casefold() == repository.casefold()
    )


def _id(repo: object) -> object:
    return repo.get("id") if isinstance(repo, dict) else None
