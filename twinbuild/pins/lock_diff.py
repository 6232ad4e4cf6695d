"""What moved in each image's lock between two revisions: ``pins diff`` and ``plan`` read it.

A revision's lock is read from git's objects (``git show REV:pins/lock/IMAGE.toml``), the
working tree's from the file, each checked as the lock reader checks it (a hand edit at a
revision is named with that revision). Two locks of the same bytes are not parsed at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.closure import lockfile
from twinbuild.closure.lock_command import Moved, moved_between
from twinbuild.closure.lock_model import ImageLock
from twinbuild.util.git import run_git

Status = Literal["added", "removed", "changed"]
#: How many moved packages a one-line summary names before counting the rest.
SHOWN = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class LockChange:
    """One image's lock between two revisions."""

    image: str  # cu13-amd64
    path: str  # pins/lock/cu13-amd64.toml, as git names it
    status: Status
    moved: tuple[Moved, ...]

    def summary(self) -> str:
        """``floaty 1.0 -> 1.1, dep-b (new) -> 2.0``: the first :data:`SHOWN` moves, counted."""
        words = [f"{m.name} {m.old or '(new)'} -> {m.new or '(gone)'}" for m in self.moved]
        more = len(words) - SHOWN
        return ", ".join(words[:SHOWN]) + (f" and {more} more" if more > 0 else "") or (
            "no version moved (its other fields did)"
        )


def _bytes(rev: str | None, path: str, repo: Path) -> bytes | None:
    if rev is None:
        file = repo / path
        return file.read_bytes() if file.is_file() else None
    shown = run_git(repo, "show", f"{rev}:./{path}", binary=True)
    return shown.stdout if shown.returncode == 0 else None


def _names(rev: str | None, folder: str, repo: Path) -> set[str]:
    """The lock files (``IMAGE.toml``) directly in ``folder`` at ``rev``; the base captures in
    ``base/`` are not locks."""
    if rev is None:
        return {p.name for p in (repo / folder).glob("*.toml") if p.is_file()}
    listed = run_git(repo, "ls-tree", "--name-only", rev, "--", f"{folder}/")
    return {
        Path(line).name
        for line in listed.stdout.splitlines()
        if line.endswith(".toml") and Path(line).parent.as_posix() == folder
    }


def _read(data: bytes | None, source: str) -> ImageLock | None:
    if data is None:
        return None
    return lockfile.parse(data.decode("utf-8", "replace"), source)


def lock_change(rev_a: str, rev_b: str | None, path: str, *, repo: Path) -> LockChange | None:
    """The lock at ``path`` from ``rev_a`` to ``rev_b`` (None: the working tree); None where
    its bytes are the same."""
    a, b = _bytes(rev_a, path, repo), _bytes(rev_b, path, repo)
    if a == b:
        return None
    old = _read(a, f"{rev_a}:{path}")
    new = _read(b, path if rev_b is None else f"{rev_b}:{path}")
    image = Path(path).name.removesuffix(".toml")
    if new is None:
        gone = tuple(Moved(name=d.name, old=d.version, new="") for d in old.dists) if old else ()
        return LockChange(image=image, path=path, status="removed", moved=gone)
    status: Status = "added" if old is None else "changed"
    return LockChange(image=image, path=path, status=status, moved=moved_between(old, new))


def lock_changes(
    rev_a: str, rev_b: str | None, *, folder: str, repo: Path
) -> tuple[LockChange, ...]:
    """Every image's lock in ``folder`` (``pins/lock``) that differs from ``rev_a`` to
    ``rev_b`` (None: the working tree), by image name."""
    names = sorted(_names(rev_a, folder, repo) | _names(rev_b, folder, repo))
    found = (lock_change(rev_a, rev_b, f"{folder}/{name}", repo=repo) for name in names)
    return tuple(c for c in found if c is not None)
