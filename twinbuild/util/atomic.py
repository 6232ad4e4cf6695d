"""Atomic writes: the new file appears whole or not at all, and only ever as a regular file.

Write a temporary file next to the target, flush it to disk, then ``os.replace`` it over the
target (atomic on POSIX within one file system). A full disk, a crash or Ctrl-C before the rename
leaves the previous file untouched and no temporary file behind; SIGKILL leaves one, named
``.NAME.PID.RANDOM.tmp``, which the next write of that file removes (:func:`leftovers`). Every
file twinbuild writes for others to read (the manifest after a bump, drafts, build records,
evidence, keys) goes through here.

A rename replaces whatever has the name, so the target is checked first: a symlink is followed to
the file it names (that file is replaced, in its own folder, and the link is kept, so ``pins bump``
through a linked manifest edits the real one), unless a link inside the repository or the cache
leads out of both (:func:`links_within`); a device, FIFO, socket or directory is refused (a
rename would swap ``/dev/null`` for a regular file). With ``within``, the file (after following
links) must lie inside that folder: generated files never land outside the tree they belong to;
:func:`plain_folder` checks that no link leads out of the folder itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from twinbuild.errors import ConfigError, DiskFull
from twinbuild.util.bounded import kind_of
from twinbuild.util.signals import held
from twinbuild.util.values import encode


def write_atomic(
    path: Path,
    data: bytes | str,
    *,
    mode: int | None = None,
    within: Path | None = None,
    parents: bool = True,
) -> None:
    """Replace ``path`` with ``data`` atomically; ``mode`` is set before the file is visible.

    Without ``mode`` an existing file keeps its mode, and a new one gets 0o644. ``within``, when
    given, is the folder the written file must stay inside. A missing folder is made, unless
    ``parents=False``: a file a person named (``bake --out``, ``import --out``) goes into a folder
    that exists, as docs/errors.md says, or nothing is written.
    """
    target = resolve_target(path, within=within)
    existed = target.exists()
    if isinstance(data, str):
        kept = "the previous file is unchanged" if existed else "nothing was written"
        data = encode(data, target=path, what="file", kept=kept)
    if mode is None:
        mode = target.stat().st_mode & 0o777 if existed else 0o644
    directory = target.parent
    if not parents:
        need_folder(path, directory)
    try:
        if parents:
            directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _error(path, exc, existed=existed) from None
    try:
        temporary(target, data, mode=mode, shown=path, existed=existed).replace(target)
    except BaseException as exc:
        with held():  # a signal may come between the temporary's making and its naming
            discard_own(target)
        if isinstance(exc, OSError):
            raise _error(path, exc, existed=existed) from None
        raise
    _sync_dir(directory)


def discard_own(target: Path) -> None:
    """Remove the temporary files this process made beside ``target`` (a write stopped)."""
    prefix = f".{target.name}.{os.getpid()}."
    with contextlib.suppress(OSError):
        for entry in target.parent.iterdir():
            if entry.name.startswith(prefix) and entry.name.endswith(TEMP_SUFFIX):
                entry.unlink(missing_ok=True)


def temporary(
    target: Path, data: bytes, *, mode: int, shown: Path | None = None, existed: bool = False
) -> Path:
    """``data`` in a new temporary file beside ``target``, flushed to disk, ``mode`` set before
    anything is in it: ``.NAME.PID.RANDOM.tmp``, so a later run knows a killed run's leftover
    (:func:`sweep` removes those first). SIGKILL is the one ending no code can clean up after."""
    sweep(target)
    try:
        fd, name = tempfile.mkstemp(
            prefix=f".{target.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=target.parent
        )
    except OSError as exc:
        raise _error(shown or target, exc, existed=existed) from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise _error(shown or target, exc, existed=existed) from None
        raise
    return tmp


TEMP_SUFFIX = ".tmp"


def leftovers(target: Path) -> list[tuple[Path, int]]:
    """The temporary files beside ``target`` that a run which is gone left (killed, so it could
    not remove them), with that run's process id: ours by name and owner, regular files, and
    no process of that id is alive. A live one (a run writing now) is never among them."""
    found: list[tuple[Path, int]] = []
    prefix = f".{target.name}."
    try:
        names = [entry.name for entry in target.parent.iterdir()]
    except OSError:
        return found
    for name in names:
        if not (name.startswith(prefix) and name.endswith(TEMP_SUFFIX)):
            continue
        pid_text = name[len(prefix) :].partition(".")[0]
        if not (pid_text.isascii() and pid_text.isdigit() and len(pid_text) <= 10):
            continue
        path = target.parent / name
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and _gone(int(pid_text)):
            found.append((path, int(pid_text)))
    return found


def sweep(target: Path) -> None:
    """Remove what :func:`leftovers` finds beside ``target``."""
    for path, _ in leftovers(target):
        with contextlib.suppress(OSError):
            path.unlink()


def _gone(pid: int) -> bool:
    if pid == os.getpid() or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # another user's process, a pid out of range: not ours
        return False
    return False


def need_folder(path: Path, directory: Path) -> None:
    """Refuse a write to ``path`` whose folder ``directory`` is missing (or not a folder)."""
    if not directory.is_dir():
        problem = "is not a folder" if directory.exists() else "does not exist"
        raise ConfigError(
            f"{path}: folder {directory} {problem}; nothing was written; create it or pass "
            "a path in an existing folder"
        )


def plain_folder(path: Path) -> Path:
    """``path`` as a folder to write into that no link leads out of: no part of it, as written,
    is a symlink (a checkout of someone else's branch may commit one where the folder goes).

    Writes into it then pass ``within=path``, so a link inside it cannot lead out either.
    """
    parts = path.parts
    for i in range(1, len(parts) + 1):
        part = Path(*parts[:i])
        if part.is_symlink():
            raise ConfigError(
                f"{path}: {part} is a symlink (to {part.readlink()}); refusing to write through "
                "it, write into a plain folder"
            )
    return folder_to_write(path)


def folder_to_write(path: Path) -> Path:
    """``path`` as a folder to write into (made later where missing): not a file or device."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path}: not a folder; pass a folder to write into")
    return path


@contextlib.contextmanager
def links_within(*folders: Path) -> Iterator[None]:
    """For the block, a link that lies inside one of ``folders`` (the repository, the cache)
    leads a write only into one of them: nothing is written outside them through a link a
    checkout or a cache holds (``pins -> /elsewhere``). ``twinbuild.cli.main`` sets it for every
    command; a path a person names that passes through no such link is written where it says."""
    _FENCE.append(tuple(Path(os.path.realpath(f)) for f in folders))
    try:
        yield
    finally:
        _FENCE.pop()


_FENCE: list[tuple[Path, ...]] = [()]


def _inside(path: Path, folders: tuple[Path, ...]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def _no_link_out(path: Path, existed: bool) -> None:
    """Refuse ``path`` when a link inside a fenced folder leads it out of all of them."""
    folders = _FENCE[-1]
    if not folders:
        return
    absolute = path.absolute()
    real = Path(os.path.realpath(path))
    if real == absolute or _inside(real, folders):
        return
    for part in (absolute, *absolute.parents):
        if part.is_symlink() and _inside(Path(os.path.realpath(part.parent)), folders):
            kept = "the previous file is unchanged" if existed else "nothing was written"
            raise ConfigError(
                f"{path}: the link {part} (to {part.readlink()}) leads to {real}, outside the "
                f"repository and the cache; {kept}: twinbuild writes nothing there through a "
                "link, replace the link with the folder or file itself"
            )


def resolve_target(path: Path, *, within: Path | None = None) -> Path:
    """The regular file (existing or not) a write to ``path`` must replace, or a refusal."""
    _no_link_out(path, existed=os.path.lexists(path))
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if within is not None:
        root = Path(os.path.realpath(within))
        real = Path(os.path.realpath(target))
        if real != root and root not in real.parents:
            raise ConfigError(
                f"{path}: resolves to {real}, outside {within}; refusing to write there "
                "(check the names that built this path)"
            )
    try:
        info = target.stat()
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise _error(path, exc, existed=False) from None
    if not stat.S_ISREG(info.st_mode):
        through = f" (through the link to {target})" if target != path else ""
        raise ConfigError(
            f"{path}: is {kind_of(info.st_mode)}{through}, not a regular file; "
            "twinbuild writes only regular files, pass a file path"
        )
    return target


def _sync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; not every system allows it.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _error(path: Path, exc: OSError, *, existed: bool) -> ConfigError | DiskFull:
    kept = "the previous file is unchanged" if existed else "nothing was written"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"{path}: disk full while writing; {kept}, free space, re-run")
    return ConfigError(
        f"{path}: cannot write: {exc.strerror or exc}; {kept}; "
        "check that the folder exists and is writable, then re-run"
    )
