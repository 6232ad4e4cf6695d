"""`evidence check-push`: which of its own workflows a validation push of the head would run.

``git push origin FETCH_HEAD:refs/heads/validate/pr-N`` runs every ``push`` workflow the head
holds, its own copy, with this repository's token, before any code of ours judges anything. So a
maintainer runs this first: every file under ``.github/workflows/`` or ``.github/actions/`` that
the head holds with other bytes or mode than the base as it is now (added, changed or renamed) is
refused, one line each (exit 9), unless ``--reviewed-workflows`` names exactly those paths. The
diff is against the current base, not the merge base: a head branched from an old base keeps that
base's old copy of a workflow the base has since fixed, and a push runs that copy. A link there
(``.github`` or either folder itself included) is refused whatever is named: what it points at
can change in a push that touches no file under ``.github/``. Deleted files are listed; they run
nothing. Read from git objects only; nothing is checked out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.errors import ConfigError, TrustRootRefused
from twinbuild.evidence.command_options import CheckPushOptions
from twinbuild.util.activity import Say
from twinbuild.util.git import rev_arg, run_git, tree_entries

WORKFLOW_FOLDERS = (".github/workflows", ".github/actions")
LINK_MODES = ("120000", "160000")

What = Literal["added", "changed", "renamed", "deleted"]


def runs_on_push(path: str) -> bool:
    """Is ``path`` a workflow or local action file (or a link standing in for their folders)?"""
    return path == ".github" or any(path == d or path.startswith(d + "/") for d in WORKFLOW_FOLDERS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    path: str
    what: What
    renamed_from: str | None = None

    def line(self) -> str:
        since = f" (from {self.renamed_from})" if self.renamed_from else ""
        return f"  {self.what:<8} {self.path}{since}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PushCheck:
    base: str  # the base commit the head's workflows are compared with
    head: str  # as given
    changes: tuple[Change, ...]
    links: tuple[str, ...]  # links among the head's workflow paths

    @property
    def to_review(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.what != "deleted")

    def text(self) -> str:
        """The diff paths, then how many need a review."""
        mb, lines = self.base[:12], []
        if self.changes:
            lines.append(
                f"workflow and action files the head {self.head} holds unlike the base {mb}:"
            )
            lines += [c.line() for c in self.changes]
        if self.to_review:
            lines.append(
                f"{len(self.to_review)} workflow paths added, changed or renamed against the base "
                f"{mb}"
            )
        else:
            lines.append(
                f"no workflow or action added or changed against the base {mb}: the push "
                "runs only workflows the base has"
            )
        return "\n".join(lines) + "\n"


def _print(found: PushCheck) -> None:
    print(found.text(), end="")


def diff(repo: Path, base: str, head: str) -> PushCheck:
    """The head's workflow and action files that differ from ``base`` as it is now."""
    rev_arg(base, option="--base")
    rev_arg(head, option="--head")
    found = run_git(repo, "rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}")
    base_commit = found.stdout.strip()
    if found.returncode != 0 or not base_commit:
        why = found.stderr.strip().splitlines()
        raise ConfigError(
            f"--base {base}: not a commit in {repo} "
            f"({why[-1] if why else 'unknown'}); fetch the base first"
        )
    before = {e.path: e for e in tree_entries(repo, base_commit) if runs_on_push(e.path)}
    after = {e.path: e for e in tree_entries(repo, head) if runs_on_push(e.path)}
    gone = {p: e.oid for p, e in before.items() if p not in after}
    changes: list[Change] = []
    for path, entry in after.items():
        old = before.get(path)
        if old is None:
            source = next((p for p, oid in gone.items() if oid == entry.oid), None)
            if source is not None:
                del gone[source]
                changes.append(Change(path=path, what="renamed", renamed_from=source))
            else:
                changes.append(Change(path=path, what="added"))
        elif (old.mode, old.oid) != (entry.mode, entry.oid):
            changes.append(Change(path=path, what="changed"))
    changes += [Change(path=p, what="deleted") for p in gone]
    links = tuple(p for p, e in after.items() if e.mode in LINK_MODES)
    return PushCheck(
        base=base_commit, head=head, links=links,
        changes=tuple(sorted(changes, key=lambda c: c.path)),
    )  # fmt: skip


def check_push(
    options: CheckPushOptions, say: Say = print, show: Callable[[PushCheck], None] = _print
) -> PushCheck:
    """``show`` the head's workflow changes (refused or not); refuse (exit 9) each one
    ``--reviewed-workflows`` does not name, each name it does not change, and every link."""
    found = diff(options.repo, options.base, options.head)
    show(found)
    mb = found.base[:12]
    reviewed = set(options.reviewed_workflows)
    wanted = {c.path for c in found.to_review}
    refusals = [
        f"{path}: a symlink in the head; a push runs what it points at, which no diff of "
        ".github/ shows: ask for the file itself instead of a link"
        for path in found.links
    ]
    refusals += [
        f"{c.path}: {c.what} in the head against the base {mb}; a push to validate/ runs the "
        f"head's own workflows with this repository's token: read `git diff {mb} "
        f"{options.head} -- {c.path}`, then pass --reviewed-workflows naming exactly the paths "
        "listed"
        for c in found.to_review
        if c.path not in reviewed and c.path not in found.links
    ]
    refusals += [
        f"--reviewed-workflows {path}: the head does not add or change it; name exactly the "
        "added and changed paths listed"
        for path in sorted(reviewed - wanted)
        if path not in found.links
    ]
    if refusals:
        raise TrustRootRefused("\n".join(refusals))
    if wanted:
        say(f"each named by --reviewed-workflows: push {options.head} to validate/pr-N")
    return found
