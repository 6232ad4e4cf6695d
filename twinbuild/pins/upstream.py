"""Is a commit really upstream? Checked against a local clone or mirror, never the network.

A bump should point at a commit on the upstream default branch, ideally the merge commit of the PR
that brought the change in: a commit that lives only on a side branch or in a fork can vanish, and
a merge commit names one reviewed unit of change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from twinbuild.errors import ConfigError, UpstreamRefused
from twinbuild.util.git import run_git


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamCheck:
    """What the upstream clone says about one commit."""

    upstream: str
    commit: str
    default_branch: str  # short name, e.g. "main"
    parents: tuple[str, ...]
    subject: str
    merged_by: str | None = None  # first merge commit on the default branch that contains it

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    def describe(self) -> str:
        short = self.commit[:12]
        if self.is_merge:
            parents = ", ".join(p[:12] for p in self.parents)
            return (
                f"{short} is on {self.default_branch}: merge commit of {parents} "
                f"({self.subject}); the recommended minimal bump"
            )
        hint = (
            f"; the merge commit that brought it in is {self.merged_by}, prefer pinning that"
            if self.merged_by
            else ""
        )
        return f"{short} is on {self.default_branch}: a single commit ({self.subject}){hint}"


def local_path(upstream: str) -> Path:
    """``file://`` URL or path -> path; any other URL is refused (no network)."""
    parsed = urlparse(upstream)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if (parsed.scheme and len(parsed.scheme) > 1) or upstream.startswith("git@"):
        raise ConfigError(
            f"--upstream {upstream}: only a local clone or mirror is read (a path or file:// URL); "
            "clone it first, e.g. git clone --mirror URL /tmp/upstream.git"
        )
    return Path(upstream)


def default_branch(repo: Path) -> str:
    """The upstream default branch as a ref: origin/HEAD of a clone, else HEAD (bare mirror)."""
    for args in (
        ("symbolic-ref", "-q", "refs/remotes/origin/HEAD"),
        ("symbolic-ref", "-q", "HEAD"),
    ):
        proc = run_git(repo, *args)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    raise ConfigError(
        f"--upstream {repo}: cannot tell the default branch (no origin/HEAD and HEAD is detached); "
        "run git remote set-head origin --auto in the clone"
    )


def _short(ref: str) -> str:
    for prefix in ("refs/remotes/origin/", "refs/heads/"):
        if ref.startswith(prefix):
            return ref[len(prefix) :]
    return ref


def check_commit(upstream: str, commit: str, *, pin: str) -> UpstreamCheck:
    """Refuse (:class:`UpstreamRefused`) a commit that is not on the upstream default branch."""
    repo = local_path(upstream)
    if not repo.exists():
        raise ConfigError(f"--upstream {upstream}: no such directory; pass a local clone or mirror")
    if run_git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise ConfigError(f"--upstream {upstream}: not a git repository; pass a clone or mirror")
    branch_ref = default_branch(repo)
    branch = _short(branch_ref)
    if run_git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise UpstreamRefused(
            f"pins.{pin}: commit {commit} is not in {upstream} (a fork, or a clone that needs "
            f"git fetch); pin a commit on {branch}"
        )
    if run_git(repo, "merge-base", "--is-ancestor", commit, branch_ref).returncode != 0:
        raise UpstreamRefused(
            f"pins.{pin}: commit {commit} is not on {upstream}'s default branch {branch} "
            f"(a side branch or an unmerged PR); pin the merge commit on {branch}"
        )
    shown = run_git(repo, "show", "-s", "--format=%P%n%s", commit).stdout.split("\n", 1)
    parents = tuple(shown[0].split())
    subject = shown[1].strip() if len(shown) > 1 else ""
    merged_by = None
    if len(parents) <= 1:
        merges = run_git(
            repo, "rev-list", "--ancestry-path", "--merges", "--reverse", f"{commit}..{branch_ref}"
        ).stdout.split()
        merged_by = merges[0] if merges else None
    return UpstreamCheck(
        upstream=upstream,
        commit=commit,
        default_branch=branch,
        parents=parents,
        subject=subject,
        merged_by=merged_by,
    )
