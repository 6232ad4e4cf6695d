"""Appending to files others own: the step summary and ``$GITHUB_OUTPUT``.

These paths come from a flag or the environment, so they may name a folder, a missing folder or a
special file. Each case is refused with one line naming the path and what to pass instead; the
file is opened without blocking (a FIFO with no reader would hang) and only a regular file is
written.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from twinbuild.errors import ConfigError, DiskFull
from twinbuild.util.bounded import kind_of
from twinbuild.util.values import encode


def append_text(path: Path, text: str, *, what: str) -> None:
    """Append ``text`` to the regular file ``path`` (created if its folder exists).

    The text is encoded before the file is opened: what cannot be written leaves no empty file.
    """
    data = encode(text, target=path, what=what)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise _error(path, exc, what) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(
                f"{path}: is {kind_of(mode)}, not a regular file; pass a file for the {what}"
            )
        os.set_blocking(fd, True)
        while data:
            written = os.write(fd, data)
            data = data[written:]
    except OSError as exc:
        raise _error(path, exc, what) from None
    finally:
        os.close(fd)


def _error(path: Path, exc: OSError, what: str) -> ConfigError | DiskFull:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull(f"{path}: disk full while writing the {what}; free space, re-run")
    if exc.errno == errno.EISDIR:
        return ConfigError(
            f"{path}: is a directory, not a regular file; pass a file for the {what}"
        )
    if exc.errno == errno.ENOENT:
        return ConfigError(
            f"{path}: folder {path.parent} does not exist; create it or pass a file in an "
            f"existing folder for the {what}"
        )
    if exc.errno == errno.ENXIO:  # a FIFO nobody reads
        return ConfigError(
            f"{path}: is a FIFO (named pipe) with no reader, not a regular file; "
            f"pass a file for the {what}"
        )
    return ConfigError(
        f"{path}: cannot write the {what}: {exc.strerror or exc}; check the path and re-run"
    )
