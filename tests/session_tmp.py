"""The session's temporary folder in memory: pytest's ``--basetemp`` on a tmpfs of its own.

The tests make some 50,000 files a run (git repositories, project copies, build contexts). On
this machine's disk (ext4 with ``discard``) an unlink costs a third of a millisecond, and pytest
deletes the oldest of the runs it keeps when a session ends: 17.7 s of a 33 s run of one test
module went to deleting an earlier run's folder, and the tests' own git work ran at half speed.
Where we may mount (root), the controlling process mounts a tmpfs (``session_engine.scratch``,
as the engines' folders) and points ``--basetemp`` into it; the xdist workers get folders
inside it from xdist itself. The mount goes when the session ends; one a killed session left
is taken away by the next. Where ``--basetemp`` is given, or we may not mount, nothing changes.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.session_engine import SCRATCH_ROOT, remove, scratch

PREFIX = "tb-pytest-"
_FOLDER = pytest.StashKey[Path]()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale() -> None:
    """Folders of sessions that are gone (``tb-pytest-<pid>-...``, that pid not running)."""
    for folder in SCRATCH_ROOT.glob(f"{PREFIX}*"):
        pid = folder.name.removeprefix(PREFIX).partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(Exception):
                remove(folder)


def in_memory(config: pytest.Config) -> None:
    """Point ``--basetemp`` into a fresh tmpfs (controller only, root only, none given)."""
    if config.option.basetemp or hasattr(config, "workerinput") or os.geteuid() != 0:
        return
    _remove_stale()
    folder = scratch(f"{PREFIX}{os.getpid()}-")
    config.stash[_FOLDER] = folder
    config.option.basetemp = str(folder / "run")  # pytest empties basetemp: not the mount point


def release(config: pytest.Config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        remove(folder)
