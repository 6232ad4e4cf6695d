"""Atomic writes: a failure, a full disk or Ctrl-C leaves the previous evidence whole."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from twinbuild.errors import ConfigError, DiskFull
from twinbuild.util.atomic import write_atomic


def test_replaces_the_file_with_the_given_mode(tmp_path: Path) -> None:
    target = tmp_path / "evidence" / "cuda.dsse.json"
    write_atomic(target, b"old")
    write_atomic(target, b"new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["cuda.dsse.json"]


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (
            OSError(errno.ENOSPC, "No space left on device"),
            DiskFull,
            "disk full while writing; the previous file is unchanged, free space, re-run",
        ),
        (
            OSError(errno.EIO, "Input/output error"),
            ConfigError,
            "cannot write: Input/output error; the previous file is unchanged; check that the folder exists and is writable, then re-run",
        ),
    ],
)
def test_a_failed_write_keeps_the_previous_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: OSError,
    kind: type[Exception],
    message: str,
) -> None:
    target = tmp_path / "rocm.dsse.json"
    target.write_bytes(b"previous evidence")

    def fail(fd: int) -> None:
        raise error

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(kind) as info:
        write_atomic(target, b"half")
    assert str(info.value) == f"{target}: {message}"
    assert target.read_bytes() == b"previous evidence"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rocm.dsse.json"]


def test_an_interrupt_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "cuda.dsse.json"
    target.write_bytes(b"previous evidence")

    def interrupt(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, b"half")
    assert target.read_bytes() == b"previous evidence"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cuda.dsse.json"]
