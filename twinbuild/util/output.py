"""The output contract every command keeps: data on stdout, every message on stderr.

- **Data** is what a command reports (``--format text|json``, markdown where a CI summary
  takes it): :func:`report` writes it to stdout. JSON is one document: the record's
  ``to_dict()``, or its dataclass fields, made plain (paths as strings, tuples as lists).
- **Messages** (progress, notes, warnings) go to stderr: :func:`say` unless ``-q``,
  :func:`detail` only with ``-v``. Errors are ``twinbuild.cli.main``'s, on stderr too.
- **A stdout that fails is one line and an exit code**, never a traceback (:func:`guarded`):
  a closed pipe ends quietly (141, as SIGPIPE ends ``head``'s writers), a full disk is
  ``DiskFull`` (6), a stdout that cannot encode the text a ``ConfigError`` (2) naming the
  character and what to set. After a failure stdout is pointed at /dev/null, so the
  interpreter's own last flush cannot fail again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path, PurePath
from typing import Any, Literal, Protocol, TextIO

from twinbuild.errors import ConfigError, DiskFull, StdoutClosed, TwinbuildError

Format = Literal["text", "json", "markdown"]
FORMATS: tuple[Format, ...] = ("text", "json", "markdown")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Level:
    """How much a command says on stderr: ``-q`` only errors, ``-v`` the details too."""

    quiet: bool = False
    verbose: bool = False


_LEVEL: list[Level] = [Level()]


def configure(*, quiet: bool = False, verbose: bool = False) -> None:
    """Set the level for this process (``main`` does, from ``-q``/``-v``)."""
    _LEVEL[0] = Level(quiet=quiet and not verbose, verbose=verbose)


def level() -> Level:
    return _LEVEL[0]


def say(line: str) -> None:
    """A message for a person, on stderr; nothing with ``-q``."""
    if not _LEVEL[0].quiet:
        _err(line)


def detail(line: str) -> None:
    """A detail shown only with ``-v``, on stderr."""
    if _LEVEL[0].verbose:
        _err(line)


def _err(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr gone too: nowhere left to say it
        print(line, file=sys.stderr, flush=True)


class Reported(Protocol):
    """A command's result: its text (and optionally markdown) form."""

    def text(self) -> str: ...


def plain(value: object) -> Any:
    """``value`` as JSON-ready data: ``to_dict()`` where a record has one, else its fields."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return plain(to_dict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.repr and not f.name.startswith("_")
        }
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def to_json(value: object) -> str:
    return json.dumps(plain(value), indent=2, ensure_ascii=False, default=str) + "\n"


def rendered(result: object, fmt: Format, *, text: str | None = None) -> str:
    """``result`` in ``fmt``: its ``text()`` (or ``text``), ``markdown()``, or JSON."""
    if fmt == "json":
        return to_json(result)
    if fmt == "markdown":
        markdown = getattr(result, "markdown", None)
        if callable(markdown):
            return str(markdown())
    if text is not None:
        return text if not text or text.endswith("\n") else text + "\n"
    describe = getattr(result, "text", None) or getattr(result, "describe", None)
    if not callable(describe):
        raise TypeError(f"{type(result).__name__} has no text form")
    out = str(describe())
    return out if not out or out.endswith("\n") else out + "\n"


def report(result: object, fmt: Format = "text", *, text: str | None = None) -> None:
    """Write ``result`` to stdout in ``fmt`` (the command's data)."""
    sys.stdout.write(rendered(result, fmt, text=text))


def report_all(results: list[Any], fmt: Format = "text", *, text: str | None = None) -> None:
    """Several results (one per platform): their ``describe()`` lines, or one JSON list."""
    if fmt == "json":
        sys.stdout.write(to_json(results))
        return
    shown = text if text is not None else "".join(rendered(r, "text") for r in results)
    sys.stdout.write(shown)


def data(line: str) -> None:
    """One line of data on stdout (``export DOCKER_HOST=...``, ``NAME=VALUE``)."""
    sys.stdout.write(line if line.endswith("\n") else line + "\n")


# -- a stdout that fails -----------------------------------------------------------------------


def _stdout_error(exc: BaseException) -> TwinbuildError:
    if isinstance(exc, UnicodeEncodeError):
        bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else "?"
        shown = ", ".join(f"U+{ord(c):04X}" for c in bad[:4])
        return ConfigError(
            f"stdout: cannot write {shown} in its encoding ({exc.encoding}); set "
            "PYTHONIOENCODING=utf-8 (or a UTF-8 locale) and rerun; the output is incomplete"
        )
    if isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) == errno.EPIPE:
        return StdoutClosed("stdout was closed")
    if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return DiskFull("stdout: no space left on device; the output is incomplete, free space")
    reason = getattr(exc, "strerror", None) or str(exc)
    return ConfigError(f"stdout: cannot be written ({reason}); the output is incomplete")


class _Guarded(io.TextIOBase):
    """``sys.stdout`` for the length of a command: a write that fails raises one of ours."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except (OSError, UnicodeEncodeError, ValueError) as exc:
            raise _stdout_error(exc) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except (OSError, ValueError) as exc:
            raise _stdout_error(exc) from None

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._inner.errors

    @property
    def buffer(self) -> Any:
        return self._inner.buffer

    def writable(self) -> bool:
        return True


def silence_stdout() -> None:
    """Point fd 1 at /dev/null: whatever is still buffered goes nowhere, quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)
    except (OSError, ValueError):
        pass


class _Closed(io.TextIOBase):
    """The stdout of a process started without one (``>&-``): Python's is None there."""

    def write(self, text: str) -> int:
        raise ConfigError(
            "stdout: is closed (the command was started with >&-); its output was not written, "
            "give it a stdout (> /dev/null to drop the output)"
        )

    def flush(self) -> None:
        pass

    def writable(self) -> bool:
        return True


def _hold(fd: int) -> None:
    """Put /dev/null on ``fd``, which the process was started without: the next file twinbuild
    opens (a manifest's temporary file) would get that number, and every child it starts would
    write its output or errors into that file."""
    with contextlib.suppress(OSError):
        os.fstat(fd)
        return
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDWR)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)


@contextmanager
def guarded() -> Iterator[None]:
    """Run a command with a stdout whose failures raise one of ours (``main`` maps them)."""
    inner, errors = sys.stdout, sys.stderr
    if inner is None:
        _hold(1)
    if errors is None:  # print(file=None) would write the error to stdout, as data
        _hold(2)
        sys.stderr = Path(os.devnull).open("w")  # noqa: SIM115 - lives as long as the process
    sys.stdout = _Guarded(inner if inner is not None else _Closed())  # type: ignore[arg-type]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = inner, errors


def flush() -> None:
    """Flush stdout now, inside the command, so a full disk is reported rather than lost."""
    sys.stdout.flush()


def after_failure() -> None:
    """Once stdout has failed, let nothing else try it: the real fd 1 goes to /dev/null (a
    test's stream is left alone)."""
    inner = getattr(sys.stdout, "_inner", sys.stdout)
    if inner is sys.__stdout__:
        silence_stdout()
