"""What each ``twinbuild evidence`` command was asked for, typed where the arguments are parsed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.manifest.model import DEFAULT_PATH, Arch

KEYS = Path("evidence/keys")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordOptions:
    variant: str
    arch: Arch
    report_dir: Path  # holds the smoke report smoke-<variant>-<arch>-<profile>.json
    out: Path  # folder for <variant>-<arch>.statement.json
    commit: str  # the commit the run validated (the trigger check's), 40 hex
    pr: int  # the pull request of validate/pr-<N>
    repo: Path = Path()  # the git repository holding the commit, read as git objects
    manifest: Path = DEFAULT_PATH
    env_file: Path | None = None  # a dry run: the GITHUB_* values a job would have
    repository_id: str | None = None  # a dry run: GITHUB_REPOSITORY_ID


@dataclass(frozen=True, slots=True, kw_only=True)
class SignOptions:
    statements: Path  # folder searched for *.statement.json
    out: Path  # folder for <variant>-<arch>.dsse.json
    commit: str  # the commit the statements must be about, 40 hex
    pr: int  # the pull request of validate/pr-<N>
    key: Path | None = None  # private key file outside the work tree; None: the env secret
    repo: Path = Path()  # the git repository holding the commit, read as git objects
    manifest: Path = DEFAULT_PATH


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOptions:
    paths: tuple[Path, ...]  # envelopes, or folders of *.dsse.json
    keys: Path = KEYS  # trusted public keys
    image: str | None = None  # REPO@sha256:...: verify the evidence stored next to it instead


@dataclass(frozen=True, slots=True, kw_only=True)
class GateOptions:
    head: str  # the PR head commit (40 hex)
    base: str  # the current base commit: what the PR lands on, whose CODEOWNERS judge it
    repo: Path = Path()  # the git repository holding head, base and the evidence ref
    reviews: Path | None = None  # GitHub's list-reviews answer: code owners' approvals
    #: A dry run: GitHub's answers whether each reviewer can write (and team memberships);
    #: None: in Actions GitHub is asked (twinbuild.evidence.permissions)
    permissions: Path | None = None
    evidence_ref: str | None = None  # git ref carrying evidence/<variant>-<arch>.dsse.json
    evidence: tuple[Path, ...] = ()  # evidence files
    keys: Path = KEYS
    manifest: Path = DEFAULT_PATH
    max_age_days: float = 14.0
    same_commit: bool = False  # accept evidence of the head commit only
    default_branch: str = "main"  # when the event payload does not say
    pr: int | None = None  # when the event payload does not say
    summary: Path | None = None  # step summary file to append the verdict to
    env_file: Path | None = None  # a dry run: the GITHUB_* values a job would have
    repository_id: str | None = None  # a dry run: GITHUB_REPOSITORY_ID


@dataclass(frozen=True, slots=True, kw_only=True)
class InputsOptions:
    """``twinbuild evidence inputs``: what the gate computes at one commit."""

    head: str
    format: Literal["text", "json"] = "text"
    manifest: Path = DEFAULT_PATH
    repo: Path = Path()


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckPushOptions:
    """``twinbuild evidence check-push``: may the head be pushed to validate/pr-N?"""

    base: str  # the PR's base branch, e.g. origin/main
    head: str  # the reviewed head, e.g. FETCH_HEAD
    reviewed_workflows: tuple[str, ...] = ()  # exactly the workflow paths the head adds or changes
    repo: Path = Path()


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerOptions:
    """``twinbuild evidence trigger``: is the run that finished the validation build?"""

    workflow: str = ".github/workflows/validate.yml"  # the build workflow's file
    github_output: bool = False  # write commit=, pr=, branch=, run-id= to $GITHUB_OUTPUT
    #: `git ls-remote origin refs/heads/<head_branch>`: the branch must point at the run's head
    branch_tips: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeygenOptions:
    private: Path
    public: Path
