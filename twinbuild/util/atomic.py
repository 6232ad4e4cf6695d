"""Atomic writes: the new file appears whole or not at all.

Write a temporary file next to the target, flush it to disk, then ``os.replace`` it over the
target (atomic on POSIX within one file system). A full disk, a crash or Ctrl-C before the rename
leaves the previous file untouched and no temporary file behind. Every file twinbuild writes for
others to read (the manifest after a bump, drafts, build records, evidence, keys) goes through here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from twinbuild.errors import ConfigError, DiskFull


def write_atomic(path: Path, data: bytes | str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` atomically; ``mode`` is set before the file is visible.

    Without ``mode`` an existing file keeps its mode, and a new one gets 0o644.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    if mode is None:
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    directory = path.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise _error(path, exc) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise _error(path, exc) from None
        raise
    _sync_dir(directory)


def _sync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk; not every system allows it.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _error(path: Path, exc: OSError) -> ConfigError | DiskFull:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(
            f"{path}: disk full while writing; the previous file is unchanged, free space, re-run"
        )
    return ConfigError(
        f"{path}: cannot write: {exc.strerror or exc}; the previous file is unchanged"
    )
