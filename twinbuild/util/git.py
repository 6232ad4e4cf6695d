"""Running git: one place that never prompts, never hangs, and says what to do without git.

Every git call in twinbuild goes through :func:`run_git`; ``binary=True`` for blobs and archives.
``tree_entries`` and ``read_blobs`` read a commit's files as git objects (``ls-tree`` and
``cat-file --batch``): exactly the committed bytes, with no ``.gitattributes`` (``export-subst``,
``eol``, filters), no checkout and no replace refs in between. The evidence gate judges a PR
head that way.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, TypeVar, overload

from twinbuild.errors import ConfigError
from twinbuild.util import process

GIT_TIMEOUT_S = 60
#: Most entries one ``ls-tree`` may list: far above this repository, far below a memory problem.
MAX_TREE_ENTRIES = 200_000

# Replace refs (refs/replace/*) make git show other objects under an object's name; a fetched ref
# must never change what a commit's tree says.
_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_NO_REPLACE_OBJECTS": "1"}
#: An object id (SHA-1 or SHA-256 repository): what it names never changes (with replace refs off).
OID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Kept(Generic[K, V]):
    """What one process has read of git objects, the least recently used dropped past ``limit``
    (in each value's own units: bytes for blobs, listings for trees); a value larger than a
    quarter of it is never kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: K, value: V, size: int) -> None:
        if size * 4 > self.limit or key in self._items:
            return
        self._items[key] = (value, size)
        self.used += size
        while self.used > self.limit:
            _, (_, dropped) = self._items.popitem(last=False)
            self.used -= dropped


#: Blobs by (repository, id): 64 MiB in all; a repository's image inputs are a few MiB.
BLOBS: Kept[tuple[str, str], bytes] = Kept(64 << 20)
#: ``ls-tree`` listings by (repository, commit id): the last 32.
TREES: Kept[tuple[str, str], tuple[TreeEntry, ...]] = Kept(32)


@overload
def run_git(
    repo: Path, *args: str, binary: Literal[False] = False, stdin: bytes | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]: ...  # fmt: skip
@overload
def run_git(
    repo: Path, *args: str, binary: Literal[True], stdin: bytes | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]: ...  # fmt: skip
def run_git(
    repo: Path, *args: str, binary: bool = False, stdin: bytes | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:  # fmt: skip
    """Run git in ``repo``; never prompts, never raises for a non-zero exit.

    ``binary`` returns stdout and stderr as bytes (a blob, an archive, a ``-z`` listing: not
    text). Text is git's output decoded as UTF-8 with U+FFFD for what is not (a Latin-1 commit
    subject, a file name in another encoding): a file's content is read with ``binary`` and
    decoded by its reader, which names the file and line. ``stdin`` is what git reads
    (``cat-file --batch`` requests); without it git reads nothing, so nothing may wait for an
    answer that never comes. ``timeout``: seconds before git is killed (default
    ``GIT_TIMEOUT_S``; an archive of a whole tree may take longer than a question).
    """
    done = process.run(
        ["git", "-C", str(repo), *args], timeout=GIT_TIMEOUT_S if timeout is None else timeout,
        binary=True, env=_ENV, input=stdin, what=f"git -C {repo} {' '.join(args)}",
    )  # fmt: skip
    if binary:
        return subprocess.CompletedProcess(done.argv, done.code, done.out, done.err)
    out, err = (data.decode("utf-8", "replace") for data in (done.out, done.err))
    return subprocess.CompletedProcess(done.argv, done.code, out, err)


def rev_arg(value: str, *, option: str) -> str:
    """``value`` when it can only be a revision to git; a one-line refusal naming ``option``.

    Every ref a command hands git from outside (a command line, a workflow, an event payload)
    goes through here first: ``--output=DIR`` given as a ref would make ``git show`` or
    ``git diff`` write a file, so a leading ``-`` is refused, and so are names no ref can have.
    """
    if value.startswith("-"):
        raise ConfigError(
            f"{option} {value!r}: not a git revision: it starts with '-', so git would read it "
            "as an option; pass a commit SHA or a ref such as refs/heads/main"
        )
    if not value or any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in value):
        raise ConfigError(
            f"{option} {value!r}: not a git revision (empty, or a space or control character); "
            "pass a commit SHA or a ref such as refs/heads/main"
        )
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeEntry:
    """One entry of a commit's tree, as ``git ls-tree -r -l`` lists it."""

    path: str  # repository-relative, '/'-separated (os.fsdecode of git's bytes)
    mode: str  # 100644, 100755, 120000 (symlink), 160000 (gitlink)
    oid: str
    size: int | None  # None for a gitlink


def tree_entries(repo: Path, commit: str) -> list[TreeEntry]:
    """Every file, symlink and gitlink in ``commit``'s tree (recursively), sorted by path.

    A commit named by its object id lists the same tree every time, so that listing is kept
    (:data:`TREES`); a ref (``HEAD``, a branch) may move and is asked every time.
    """
    rev_arg(commit, option="commit")
    if not OID_RE.fullmatch(commit):
        return _list_tree(repo, commit)
    key = (os.path.realpath(repo), commit)
    kept = TREES.get(key)
    if kept is None:
        kept = tuple(_list_tree(repo, commit))
        TREES.put(key, kept, 1)
    return list(kept)


def _list_tree(repo: Path, commit: str) -> list[TreeEntry]:
    proc = run_git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit, binary=True)
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ConfigError(
            f"{commit}: cannot list its files in {repo} ({why[-1] if why else 'git failed'}); "
            "fetch that commit first"
        )
    records = proc.stdout.split(b"\0")
    if len(records) > MAX_TREE_ENTRIES + 1:
        raise ConfigError(
            f"{commit}: its tree has more than {MAX_TREE_ENTRIES} entries; not a tree to build from"
        )
    entries = []
    for record in records:
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, _kind, oid, size = meta.decode("ascii").split()
        entries.append(
            TreeEntry(
                path=os.fsdecode(raw_path),
                mode=mode,
                oid=oid,
                size=None if size == "-" else int(size),
            )
        )
    return sorted(entries, key=lambda e: e.path)


def read_blobs(repo: Path, oids: Sequence[str]) -> dict[str, bytes]:
    """The raw bytes of each blob in ``oids`` (one ``git cat-file --batch``; no filters).

    A blob's bytes are what its id names, so what was read is kept (:data:`BLOBS`) and only the
    rest is asked for: the gate hashes every image of a commit from one set of blobs.
    """
    where = os.path.realpath(repo)
    found, wanted = {}, []
    for oid in sorted(set(oids)):
        kept = BLOBS.get((where, oid))
        if kept is None:
            wanted.append(oid)
        else:
            found[oid] = kept
    if wanted:
        for oid, body in _cat_blobs(repo, wanted).items():
            BLOBS.put((where, oid), body, len(body))
            found[oid] = body
    return found


def _cat_blobs(repo: Path, wanted: list[str]) -> dict[str, bytes]:
    request = "".join(f"{oid}\n" for oid in wanted).encode("ascii")
    proc = run_git(repo, "cat-file", "--batch", binary=True, stdin=request)
    if proc.returncode != 0:
        raise ConfigError(f"{repo}: git cat-file --batch failed; is it a git repository?")
    out, at, blobs = proc.stdout, 0, {}
    for oid in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].decode("ascii", "replace").split()
        if len(header) != 3 or header[0] != oid or header[1] != "blob":
            raise ConfigError(f"{repo}: object {oid} is not a readable blob ({' '.join(header)})")
        size = int(header[2])
        blobs[oid] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the content is followed by a newline
    return blobs
