"""The write fence: an audit hook that sees every write a test's Python makes and fails the ones
outside the folders it may write in.

``sys.addaudithook`` reports each ``open`` with its mode and flags and each path-changing call
(``os.rename``, ``os.mkdir``, ``shutil.rmtree``, ...) before it happens. While a fence is up, a
write outside its folders is recorded and, with ``refuse``, stopped there by raising
:class:`WroteOutside` (so nothing lands in the repository even where the code under test swallows
the error); when the fence comes down, any recorded write fails the test. Python's own bytecode
cache (``__pycache__``, or the folder ``PYTHONPYCACHEPREFIX`` names: ``nox -s tests`` keeps it
outside the checkout) is not the test's doing and passes. Child processes' own writes are not
seen: a test that runs one gives it a working folder of its own.

The fence keeps the machine too: while one is up, a program that changes this machine
(:data:`HOST_PROGRAMS`: package installs, mounts, binfmt registration, an engine or a registry)
never starts, however it is wrapped (``sh -c``, ``env -i``, ``timeout``), and the call raises
:class:`RanOnHost`. A stand-in of that name in a fenced folder runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
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


class RanOnHost(RuntimeError):
    """A program that changes this machine, started from a fenced test (never caught as one of
    twinbuild's own errors: reaching it means the input was accepted)."""


#: Programs that change the machine a test runs on; each is what some twinbuild command runs for
#: real as root (``engine up``, ``registry up``, ``binfmt``, ``base``, ``buildx`` installs).
HOST_PROGRAMS = frozenset({
    "apt-get", "apt", "dpkg", "mount", "umount", "update-binfmts", "mmdebstrap", "dockerd",
    "containerd", "docker-registry", "systemctl", "modprobe",
})  # fmt: skip
_PROCESS_EVENTS = {"subprocess.Popen": 1, "os.posix_spawn": 1, "os.exec": 1, "os.system": 0}
#: Where one word of a shell script ends (``sh -c "cd x && exec apt-get ..."``).
_WORD_END = re.compile(r"[\s;&|()<>`'\"]+")
#: Programs that run the command after their own options (``timeout`` a duration first).
_WRAPPERS = {"env": 0, "nice": 0, "nohup": 0, "setsid": 0, "sudo": 0, "timeout": 1, "unshare": 0}
_SHELLS = frozenset({"sh", "bash", "dash"})


def _commands(words: list[str], spared: frozenset[str] = frozenset()) -> Iterator[str]:
    """The programs ``words`` runs, through wrappers and ``sh -c`` (a shell script's every word,
    and what it is handed to ``exec "$@"``), less ``spared``: ``mount`` inside ``unshare -m``
    mounts in a namespace of its own."""
    if not words:
        return
    name = os.path.basename(words[0])  # noqa: PTH119 (no syscalls inside an audit hook)
    if name in _SHELLS and "-c" in words:
        at = words.index("-c")
        for word in (*_WORD_END.split(" ".join(words[at + 1 : at + 2])), *words[at + 2 :]):
            if os.path.basename(word) not in spared:  # noqa: PTH119
                yield word
        return
    if name not in spared:
        yield words[0]
    if name in _WRAPPERS:
        rest = words[1:]
        if name == "unshare" and any(w == "--mount" or re.fullmatch(r"-\w*m\w*", w) for w in rest):
            spared |= {"mount", "umount"}
        while rest and (rest[0].startswith("-") or (name == "env" and "=" in rest[0])):
            rest = rest[1:]
        yield from _commands(rest[_WRAPPERS[name] :], spared)


def _program(word: str, path: str | None, fence: Fence) -> str | None:
    """``word`` when it names a machine-changing program outside ``fence``'s folders."""
    if os.path.basename(word) not in HOST_PROGRAMS:  # noqa: PTH119
        return None
    found = word if os.sep in word else shutil.which(word, path=path)
    if found is not None and fence.allows(os.path.realpath(found)):
        return None  # a stand-in the test made
    return word


def _process(event: str, args: tuple[object, ...], fence: Fence) -> None:
    argv = args[_PROCESS_EVENTS[event]]
    raw_words = [argv] if isinstance(argv, str | bytes) else list(argv or ())  # type: ignore[call-overload]
    words = [os.fsdecode(w) for w in raw_words if isinstance(w, str | bytes | os.PathLike)]
    if event == "os.system":
        words = ["sh", "-c", *words]
    env = args[-1] if event != "os.system" and isinstance(args[-1], dict) else {}
    raw = env.get("PATH", env.get(b"PATH"))  # the child's PATH; None: this process's
    path = os.fsdecode(raw) if isinstance(raw, str | bytes) else None
    for word in _commands(words):
        found = _program(word, path, fence)
        if found is not None:
            raise RanOnHost(
                f"{event} {' '.join(words)[:200]}: {found} changes this machine; "
                "a test runs a stand-in of its own, or is marked docker"
            )


def _audit(event: str, args: tuple[object, ...]) -> None:
    # Every audit event of the process comes here (attribute reads during a traceback, imports,
    # ...), deep recursion included: leave at once, in this one frame, unless it may write.
    if not _active or (
        event != "open" and event not in _PATH_EVENTS and event not in _PROCESS_EVENTS
    ):
        return
    fence = _active[-1]
    if event in _PROCESS_EVENTS:
        _process(event, args, fence)
        return
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
