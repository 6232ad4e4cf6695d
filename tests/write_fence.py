"""The write fence: an audit hook that sees every write a test's Python makes and fails the ones
outside the folders it may write in.

``sys.addaudithook`` reports each ``open`` with its mode and flags and each path-changing call
(``os.rename``, ``os.mkdir``, ``shutil.rmtree``, ...) before it happens. While a fence is up, a
write outside its folders is recorded and, with ``refuse``, stopped there by raising
:class:`WroteOutside` (so nothing lands in the repository even where the code under test swallows
the error); when the fence comes down, any recorded write fails the test. Python's own bytecode
cache (``__pycache__``, or the folder ``PYTHONPYCACHEPREFIX`` names: ``nox -s tests`` keeps it
outside the checkout) is not the test's doing and passes. Child processes are not seen: a test
that runs one gives it a working folder of its own.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


class WroteOutside(AssertionError):
    """A write outside the fenced folders."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.chmod": (0,), "os.chown": (0,),
    "os.truncate": (0,), "os.utime": (0,), "shutil.rmtree": (0,), "os.rename": (0, 1),
    "os.replace": (0, 1), "os.symlink": (1,), "os.link": (1,),
}  # fmt: skip
_SKIP = os.sep + "__pycache__" + os.sep
_PYCACHE = (os.path.realpath(sys.pycache_prefix) + os.sep) if sys.pycache_prefix else None


@dataclass(slots=True)
class Fence:
    folders: tuple[str, ...]  # real, absolute paths
    refuse: bool  # stop the write at once (raise in the hook), not only fail afterwards
    seen: list[str] = field(default_factory=list)

    def allows(self, path: str) -> bool:
        if _SKIP in path or (_PYCACHE is not None and path.startswith(_PYCACHE)):
            return True
        return any(path == f or path.startswith(f + os.sep) for f in self.folders)


_active: list[Fence] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    # Every audit event of the process comes here (attribute reads during a traceback, imports,
    # ...), deep recursion included: leave at once, in this one frame, unless it may write.
    if not _active or (event != "open" and event not in _PATH_EVENTS):
        return
    fence = _active[-1]
    if event == "open":
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, None)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
        )
        paths = [args[0]] if writing else []
    else:
        paths = [args[i] for i in _PATH_EVENTS[event] if i < len(args)]
    for path in paths:
        if isinstance(path, int) or path is None:
            continue  # a descriptor: its opening was checked
        name = os.fsdecode(path) if isinstance(path, str | bytes) else str(path)
        absolute = os.path.abspath(name)  # noqa: PTH100 (no syscalls inside an audit hook)
        if fence.allows(absolute):
            continue
        fence.seen.append(f"{event} {absolute}")
        if fence.refuse:
            raise WroteOutside(f"{event} {absolute}: outside {', '.join(fence.folders)}")


sys.addaudithook(_audit)


@contextlib.contextmanager
def fenced(*folders: Path, refuse: bool = False) -> Iterator[Fence]:
    """Record every write outside ``folders`` while the block runs; fail if there was one."""
    fence = Fence(folders=tuple(os.path.realpath(f) for f in folders), refuse=refuse)
    _active.append(fence)
    try:
        yield fence
    finally:
        _active.remove(fence)
    if fence.seen:
        shown = ", ".join(str(f) for f in folders)
        raise WroteOutside(f"wrote outside {shown}: {fence.seen[:5]}")
