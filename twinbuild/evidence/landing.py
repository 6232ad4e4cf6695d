"""What a pull request would land: its head, or the merge of its head into the current base.

Evidence is about the tree that was built. A head that contains the base lands as itself; one that
lags lands as its merge with the base, which nobody built: two PRs validated on the same base both
pass, and once the first merges the second would land a combination never tested. The gate judges
the tree that would land, so evidence for a lagging head counts only while the base's own changes
leave its inputs alone; otherwise the PR is rebased and validated again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.util.git import run_git


@dataclass(frozen=True, slots=True, kw_only=True)
class Landing:
    base: str
    head: str
    tree: str  # the head commit, or the tree object of its merge with the base
    contains_base: bool

    def describe(self) -> str:
        if self.contains_base:
            return f"the head {self.head[:12]}"
        return f"the merge of the head {self.head[:12]} into the base {self.base[:12]}"


def landing(repo: Path, base: str, head: str, *, pr: str) -> Landing:
    """The tree ``head`` would land on ``base`` (``pr`` names validate/pr-N in advice)."""
    ancestor = run_git(repo, "merge-base", "--is-ancestor", base, head)
    if ancestor.returncode == 0:
        return Landing(base=base, head=head, tree=head, contains_base=True)
    if ancestor.returncode != 1:
        raise ConfigError(
            f"git merge-base {base[:12]} {head[:12]}: {_last(ancestor.stderr)}; fetch both "
            "commits with their history (actions/checkout fetch-depth: 0)"
        )
    merge = run_git(repo, "merge-tree", "--write-tree", "--no-messages", base, head)
    if merge.returncode == 1:
        raise EvidenceRefused(
            f"{head}: merge: the head does not merge cleanly with the base {base[:12]}; rebase "
            f"the PR on the base and push the new head to validate/{pr} to validate it"
        )
    tree = merge.stdout.split("\n", 1)[0].strip()
    if merge.returncode != 0 or not tree:
        raise ConfigError(
            f"git merge-tree {base[:12]} {head[:12]}: {_last(merge.stderr)}; the gate needs git "
            "2.38 or later and both commits with their history"
        )
    return Landing(base=base, head=head, tree=tree, contains_base=False)


def _last(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else "git failed"
