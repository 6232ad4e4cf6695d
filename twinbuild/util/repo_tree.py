"""A repository's files at one state: the working tree (what a build copies) or a commit (what the
evidence gate judges).

Both answer the same four questions, so the inputs hash is one function over either: which files
the state holds (what a commit of it would hold), which entries lie under a path, what kind each
is, and what bytes a file holds. A commit is read as git
objects (``ls-tree``, ``cat-file --batch``), never through ``git archive`` or a checkout, whose
``.gitattributes`` (``export-subst``, ``eol``, filters) would rewrite the bytes.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from twinbuild.errors import ConfigError
from twinbuild.inputs_rule import WORK_OUTPUTS
from twinbuild.util.git import TreeEntry, read_blobs, run_git, tree_entries

Kind = Literal["file", "executable", "symlink", "gitlink", "special"]
#: What a refusal calls each kind that is not a plain file.
KIND_NAMES = {
    "symlink": "a symlink (mode 120000)",
    "gitlink": "a gitlink, i.e. a submodule (mode 160000)",
    "special": "not a regular file",
}
#: Most bytes one hash reads from a commit: a repository's image inputs are a few MiB.
MAX_READ_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    path: str  # repository-relative, '/'-separated
    kind: Kind


class Tree(Protocol):
    """The files of a repository at one state."""

    @property
    def name(self) -> str:
        """How messages name this state: the folder, or the commit."""
        ...

    def entries(self, top: str) -> list[Entry]:
        """``top`` itself when it is not a folder, else every entry below it; [] when absent.

        ``top`` is '/'-separated and relative; ``""`` is the whole tree.
        """
        ...

    def listing(self) -> list[Entry]:
        """Every file (symlink, gitlink) a commit of this state holds, sorted by path."""
        ...

    def read(self, paths: Sequence[str], *, max_bytes: int = MAX_READ_BYTES) -> dict[str, bytes]:
        """The bytes of each file in ``paths``; more than ``max_bytes`` in all is refused."""
        ...


def _under(path: str, top: str) -> bool:
    return not top or path == top or path.startswith(top + "/")


class WorkTree:
    """The working tree at ``root``: what ``twinbuild build`` copies into the context."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def name(self) -> str:
        return str(self.root)

    def entries(self, top: str) -> list[Entry]:
        start = self.root / top if top else self.root
        try:
            info = start.lstat()
        except FileNotFoundError:
            return []
        if not stat.S_ISDIR(info.st_mode):
            return [Entry(path=top, kind=_kind(info.st_mode))]
        return sorted(self._walk(start), key=lambda e: e.path)

    def listing(self) -> list[Entry]:
        """What ``git add -A`` would commit: tracked files and untracked ones git does not ignore,
        less what twinbuild writes (:data:`~twinbuild.inputs_rule.WORK_OUTPUTS`). Outside git: every
        file but those, ``.git`` and ``__pycache__``."""
        names = self._git_files()
        if names is None:
            found = self._walk(self.root, skip_outputs=True)
            return sorted(found, key=lambda e: e.path)
        out, root = [], str(self.root)
        outputs = tuple(WORK_OUTPUTS)
        bare = {o.rstrip("/") for o in WORK_OUTPUTS}
        for name in names:
            rel = name.rstrip("/")
            if rel.startswith(outputs) or rel in bare:
                continue
            try:  # strings rather than Paths: this runs for each file of every hash
                info = os.lstat(f"{root}/{rel}")
            except FileNotFoundError:
                continue  # tracked, deleted in the working tree: a commit now would not hold it
            # A folder here is a submodule (tracked) or a nested repository (untracked).
            kind: Kind = "gitlink" if stat.S_ISDIR(info.st_mode) else _kind(info.st_mode)
            out.append(Entry(path=rel, kind=kind))
        return sorted(out, key=lambda e: e.path)

    def _git_files(self) -> list[str] | None:
        """Tracked files, and untracked ones git does not ignore, less the caches Python writes
        (a committed ``__pycache__`` file still counts: Python may load it). One ``ls-files``:
        ``-t`` tags each name, ``?`` for an untracked one."""
        if shutil.which("git") is None:
            return None
        proc = run_git(
            self.root, "ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard",
            binary=True,
        )  # fmt: skip
        if proc.returncode != 0:
            return None  # not a git work tree
        names = set()
        for record in proc.stdout.split(b"\0"):
            tag, _, raw = record.partition(b" ")
            name = os.fsdecode(raw)
            if name and not (tag == b"?" and "__pycache__" in name.split("/")):
                names.add(name)
        return sorted(names)

    def _walk(self, start: Path, *, skip_outputs: bool = False) -> Iterator[Entry]:
        root = os.fspath(self.root)
        for here, dirs, files in os.walk(start, followlinks=False):
            at_root = here == root
            if at_root:  # git's own data (a folder, or a worktree's file), never an input
                dirs[:] = [d for d in dirs if d != ".git"]
                if skip_outputs:
                    dirs[:] = [d for d in dirs if f"{d}/" not in WORK_OUTPUTS]
            if skip_outputs:  # nor anyone's caches, nor a nested repository's git data
                dirs[:] = [d for d in dirs if d not in ("__pycache__", ".git")]
            rel_here = os.path.relpath(here, root).replace(os.sep, "/")
            prefix = "" if rel_here == "." else rel_here + "/"
            for name in [*dirs, *files]:
                if at_root and name == ".git":
                    continue
                info = os.lstat(f"{here}/{name}")
                if stat.S_ISDIR(info.st_mode):
                    continue
                yield Entry(path=prefix + name, kind=_kind(info.st_mode))
            dirs[:] = [d for d in dirs if not stat.S_ISLNK(os.lstat(f"{here}/{d}").st_mode)]

    def read(self, paths: Sequence[str], *, max_bytes: int = MAX_READ_BYTES) -> dict[str, bytes]:
        out, total, root = {}, 0, os.fspath(self.root)
        for rel in paths:
            try:  # a string rather than a Path: this runs for each file of every hash
                with open(f"{root}/{rel}", "rb") as handle:  # noqa: PTH123
                    out[rel] = handle.read(max_bytes - total + 1)
            except OSError as exc:
                raise ConfigError(f"{self.root / rel}: cannot read: {exc.strerror}") from None
            total += len(out[rel])
            if total > max_bytes:
                raise ConfigError(_too_large(self.name, rel, max_bytes))
        return out


def _kind(mode: int) -> Kind:
    if stat.S_ISLNK(mode):
        return "symlink"
    if not stat.S_ISREG(mode):
        return "special"
    # git records one bit (100755 or 100644); the build normalises modes to match it.
    return "executable" if mode & stat.S_IXUSR else "file"


_GIT_KINDS: dict[str, Kind] = {
    "100644": "file",
    "100755": "executable",
    "120000": "symlink",
    "160000": "gitlink",
}


class CommitTree:
    """A commit's files as git objects in ``repo``: the exact committed bytes."""

    def __init__(self, repo: Path, commit: str) -> None:
        self.repo = repo
        self.commit = commit
        self._entries: dict[str, TreeEntry] = {e.path: e for e in tree_entries(repo, commit)}

    @property
    def name(self) -> str:
        return self.commit

    def entries(self, top: str) -> list[Entry]:
        return [
            Entry(path=e.path, kind=_GIT_KINDS.get(e.mode, "special"))
            for e in self._entries.values()
            if _under(e.path, top)
        ]

    def listing(self) -> list[Entry]:
        return self.entries("")

    def read(self, paths: Sequence[str], *, max_bytes: int = MAX_READ_BYTES) -> dict[str, bytes]:
        found = [self._blob(p) for p in paths]
        total = 0
        for entry in found:
            total += entry.size or 0
            if total > max_bytes:  # sizes come from ls-tree: nothing is read before this check
                raise ConfigError(_too_large(self.commit, entry.path, max_bytes))
        blobs = read_blobs(self.repo, [e.oid for e in found])
        return {e.path: blobs[e.oid] for e in found}

    def _blob(self, path: str) -> TreeEntry:
        entry = self._entries.get(path)
        if entry is None or _GIT_KINDS.get(entry.mode) not in ("file", "executable"):
            raise ConfigError(f"{self.commit}:{path}: not a regular file at that commit")
        return entry


def _too_large(where: str, path: str, max_bytes: int) -> str:
    return (
        f"{where}:{path}: over the {max_bytes}-byte limit of what is read here; "
        "is this the right file?"
    )
