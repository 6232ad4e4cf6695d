"""Every external command twinbuild runs goes through here: what environment the program gets,
how long it may take, and the one line said when it cannot start or does not end.

A command runs without a shell, stdin closed (or fed ``input``), its output captured (a build's
appended to its log file as it writes: :func:`run_to_log`). Its environment is this process's
with ``env`` on top; :func:`scrubbed` empties it instead, down to a named few (a root
filesystem's maintainer scripts get nothing else of ours). A ``timeout``
kills it, and whatever it started, when it passes: each command runs in a process group of its
own, so a shell's children cannot keep its output open once it is gone. A program that cannot
be started and a command that outlives its timeout are each one :class:`CommandError` line
naming the command; a non-zero exit is an answer, never an error: the caller knows what it means.

Ctrl-C (or SIGTERM, taken as one) stops a command at once, except one run ``to_the_end``: an
install that dpkg would leave half-done finishes first, then the stop goes on. The terminal's
Ctrl-C reaches this process alone (the command is in a group of its own), so this module decides.
A :func:`stream`'s command (a build, whose progress is read line by line as it comes) is asked
to stop (SIGTERM to its group) and given a grace period to cancel cleanly before it is killed;
one run by a worker thread, which no signal interrupts, is stopped by :func:`stop_streams`.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Generic, Literal, TypeVar, overload

from twinbuild.errors import ConfigError

_Out = TypeVar("_Out", str, bytes)

#: What every host command gets on top of its environment: apt and dpkg answer without prompts,
#: and every program in the C locale.
NONINTERACTIVE = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}

#: All a command that fills a root filesystem (mmdebstrap) takes from this environment: the
#: programs' PATH, a temporary folder, the proxies that reach a mirror, a reproducible build's
#: clock. It hands its environment to every maintainer script in that root, so anything more
#: (a caller's PYTHONPYCACHEPREFIX, PYTHONPATH, VIRTUAL_ENV, a token) would end up in, or steer,
#: what the image holds.
ROOT_ENVIRONMENT = (
    "PATH", "TMPDIR", "SOURCE_DATE_EPOCH",
    "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
)  # fmt: skip


class CommandError(ConfigError):
    """A command that could not be started, or that outlived its timeout (and was killed)."""

    def __init__(self, message: str, *, out: str = "") -> None:
        super().__init__(message)
        self.out = out  # what it printed before it was killed


class CommandMissing(CommandError):
    """The program is not there, or may not be run."""


class CommandTimedOut(CommandError):
    """The command was still running at its timeout, and was killed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finished(Generic[_Out]):
    """A command that ran to its end: its exit status and what it printed."""

    argv: tuple[str, ...]
    code: int
    out: _Out
    err: _Out  # empty when stderr was merged into ``out``

    @property
    def ok(self) -> bool:
        return self.code == 0


@overload
def run(
    argv: Sequence[str],
    *,
    timeout: float | None,
    binary: Literal[False] = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input: bytes | None = None,
    merged: bool = False,
    to_the_end: bool = False,
    what: str = "",
    only_env: bool = False,
) -> Finished[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    timeout: float | None,
    binary: Literal[True],
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input: bytes | None = None,
    merged: bool = False,
    to_the_end: bool = False,
    what: str = "",
    only_env: bool = False,
) -> Finished[bytes]: ...
def run(
    argv: Sequence[str], *, timeout: float | None, binary: bool = False,
    env: Mapping[str, str] | None = None, cwd: Path | None = None, input: bytes | None = None,
    merged: bool = False, to_the_end: bool = False, what: str = "", only_env: bool = False,
) -> Finished[str] | Finished[bytes]:  # fmt: skip
    """Run ``argv`` and wait for it (at most ``timeout`` seconds; None: as long as it takes).

    ``env`` is set on top of this process's environment (``only_env``: it is the whole
    environment, for a tool whose own variables the caller's must not steer). ``binary`` keeps
    the output as bytes; text is decoded as UTF-8, U+FFFD for what is not. ``merged`` sends
    stderr into ``out``, in the order the program wrote. ``what`` names the command in messages
    (default: its argv).
    """
    argv = tuple(argv)
    child = _start(
        argv, env, cwd, only_env=only_env,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
    )  # fmt: skip
    with child:
        out, err = _wait(child, argv, input, timeout, to_the_end, what)
    if binary:
        return Finished(argv=argv, code=child.returncode, out=out, err=err)
    return Finished(argv=argv, code=child.returncode, out=_text(out), err=_text(err))


def run_to_log(
    argv: Sequence[str], *, log: Path, timeout: float | None,
    env: Mapping[str, str] | None = None, cwd: Path | None = None, what: str = "",
) -> int:  # fmt: skip
    """Run ``argv`` with its output and errors appended to ``log`` as it writes them (a build's
    log, read while it runs and kept when it is killed); its exit status. ``timeout``, ``env``,
    ``cwd`` and ``what`` are :func:`run`'s, and so are the errors."""
    argv = tuple(argv)
    with log.open("ab") as out:
        child = _start(argv, env, cwd, stdin=subprocess.DEVNULL, stdout=out,
                       stderr=subprocess.STDOUT)  # fmt: skip
        with child:
            _wait(child, argv, None, timeout, False, what)
    return child.returncode


def stream(
    argv: Sequence[str], *, on_line: Callable[[str], None], stop_grace: float,
    env: Mapping[str, str] | None = None, cwd: Path | None = None,
) -> int:  # fmt: skip
    """Run ``argv``, its output and errors merged, and hand each line (decoded as UTF-8, U+FFFD
    for what is not; any newline, ``\\r`` too, ends a line and is dropped) to ``on_line`` as
    the program writes it; its exit status. An exception (Ctrl-C, SIGTERM, or one ``on_line``
    raises) stops the command: SIGTERM to its process group, SIGKILL after ``stop_grace``
    seconds, then the exception goes on. ``env`` and ``cwd`` are :func:`run`'s, and so is the
    error for a program that cannot be started."""
    argv = tuple(argv)
    child = _start(argv, env, cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT)  # fmt: skip
    with _streaming_lock:
        _streaming.add(child)
    assert child.stdout is not None  # noqa: S101 (PIPE above)
    out = io.TextIOWrapper(child.stdout, encoding="utf-8", errors="replace")
    try:
        for text in out:
            on_line(text.rstrip("\n"))
        return child.wait()
    finally:
        try:
            _stop(child, stop_grace)
        finally:
            out.close()  # after the stop: the command never writes into a closed pipe
            with _streaming_lock:
                _streaming.discard(child)


_streaming: set[subprocess.Popen[bytes]] = set()
_streaming_lock = threading.Lock()


def stop_streams() -> None:
    """Ask every running :func:`stream` command to stop (SIGTERM to its group): each ``stream``
    call then sees its command end. For a Ctrl-C that reached the main thread while worker
    threads stream builds (a terminal's Ctrl-C reaches this process alone)."""
    with _streaming_lock:
        running = list(_streaming)
    for child in running:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)


def _stop(child: subprocess.Popen[bytes], grace: float) -> None:
    """A command still running asked to stop (SIGTERM to its group), killed after ``grace``
    seconds, or at once on a second interrupt; waited for either way."""
    if child.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGTERM)
    try:
        child.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if child.poll() is None:
            _kill(child)
            child.wait()


def _start(
    argv: tuple[str, ...], env: Mapping[str, str] | None, cwd: Path | None, *,
    stdin: int, stdout: int | IO[bytes], stderr: int, only_env: bool = False,
) -> subprocess.Popen[bytes]:  # fmt: skip
    """``argv`` started in a process group of its own (its timeout kills the whole group)."""
    full_env = dict(env or {}) if only_env else {**os.environ, **env} if env else None
    try:
        return subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=stdin, stdout=stdout,
                                stderr=stderr, process_group=0)  # fmt: skip
    except OSError as exc:
        raise CommandMissing(_missing(argv, exc)) from None


def _wait(
    child: subprocess.Popen[bytes], argv: tuple[str, ...], input: bytes | None,
    timeout: float | None, to_the_end: bool, what: str,
) -> tuple[bytes, bytes]:  # fmt: skip
    stopped: BaseException | None = None
    while True:
        try:
            out, err = child.communicate(input, timeout=timeout)
            break
        except subprocess.TimeoutExpired:
            _kill(child)
            out, _ = child.communicate()
            shown = what or " ".join(argv)
            raise CommandTimedOut(
                f"{shown}: still running after {timeout:g}s; stopped", out=_text(out or b"")
            ) from None
        except KeyboardInterrupt as exc:
            if not to_the_end:
                _kill(child)
                child.wait()
                raise
            stopped = stopped or exc  # an install: let it finish, then stop
            input = None  # already handed over
    if stopped is not None:
        raise stopped
    return out or b"", err or b""


def _kill(child: subprocess.Popen[bytes]) -> None:
    """Kill the command and everything it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)


def _missing(argv: tuple[str, ...], exc: OSError) -> str:
    name = Path(argv[0]).name
    if isinstance(exc, FileNotFoundError):
        return f"{name}: not found on PATH; install {name}"
    return f"{argv[0]}: cannot be run ({exc.strerror}); check that it is a program you may run"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def scrubbed(argv: Sequence[str], keep: Sequence[str] = ROOT_ENVIRONMENT) -> list[str]:
    """``argv`` run by env(1) in an emptied environment: ``keep``'s variables that are set here,
    the C locale and no prompts."""
    kept = {name: os.environ[name] for name in keep if name in os.environ}
    pairs = [f"{name}={value}" for name, value in {**kept, **NONINTERACTIVE}.items()]
    return ["env", "-i", *pairs, *argv]


def spawn_detached(argv: Sequence[str], log: Path) -> int:
    """Start ``argv`` in a session of its own, stdin closed, output appended to ``log``: a
    daemon that outlives this process. Its pid."""
    # posix_spawn: the daemon outlives us and owns no Popen object to warn on.
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return os.posix_spawn(
            argv[0],
            list(argv),
            dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, fd, 1),
                (os.POSIX_SPAWN_DUP2, fd, 2),
            ],
            setsid=True,
        )
    finally:
        os.close(fd)
