"""Every file twinbuild reads comes through here: bounded in kind, size and shape.

A careless path or a hostile file must end in a one-line refusal, never a hang or a traceback:

- only regular files are read; a FIFO would block ``open`` forever and ``/dev/zero`` never ends, so
  the file is opened non-blocking and its kind checked on the open descriptor (``fstat``), which
  also covers a symlink to either;
- the size is checked before reading (``fstat``), and at most ``limit + 1`` bytes are read, so a
  file that grows while we read it (or lies about its size, as ``/proc`` files do) is still bounded;
- parsers recurse: tomllib, PyYAML and json raise ``RecursionError`` on a few thousand nested
  brackets and ``ValueError`` on an integer of over 4300 digits. :func:`parse` turns both into the
  project's error, and :func:`check_shape` bounds the depth and integers of what did parse (and
  refuses a lone surrogate, which a JSON or YAML escape such as ``\\ud800`` can make);
- lines end at LF (:func:`lines`), as TOML, Dockerfiles and CODEOWNERS count them:
  ``str.splitlines()`` also breaks at form feed, U+0085 and U+2028, and every later line number
  would be off;
- state files (pid and port files) hold one small number (:func:`read_state_int`), and a path
  handed in is resolved with a symlink loop or a permission problem said in one line
  (:func:`resolve`).
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from twinbuild.errors import ConfigError
from twinbuild.util.values import lone_surrogate

MAX_DEPTH = 32
"""Deepest nesting accepted in a parsed file: our manifests, workflows and evidence use under 10."""

MAX_INT = 2**63 - 1
"""Largest integer magnitude accepted: what TOML itself allows (a signed 64-bit integer)."""

_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 16
_T = TypeVar("_T")


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words, for a refusal."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(path: Path, mode: int, what: str, remedy: str | None) -> ConfigError:
    kind = kind_of(mode)
    if path.is_symlink():
        kind = f"a link to {os.path.realpath(path)}, {kind}"
    noun = what if what.endswith("file") else f"{what} file"
    fix = remedy or f"pass the {noun} itself"
    return ConfigError(f"{path}: is {kind}, not a regular file; {fix}")


def read_bytes(
    path: Path,
    *,
    limit: int,
    what: str = "input",
    missing: str | None = None,
    remedy: str | None = None,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them, or a refusal.

    ``what`` names the file in messages ("manifest", "workflow"); ``missing`` replaces what is said
    after the path when the file does not exist, ``remedy`` what to do about one that is not a
    regular file.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        said = missing or f"no such file; pass the path of an existing {what}"
        raise ConfigError(f"{path}: {said}") from None
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the {what}: {exc.strerror}; check the path and its permissions"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode, what, remedy)
        if info.st_size > limit:
            raise _too_large(path, info.st_size, limit, what)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the {what}: {exc.strerror}; check the file and re-run"
        ) from None
    finally:
        os.close(fd)
    if size > limit:
        raise _too_large(path, None, limit, what)
    return b"".join(chunks)


def _too_large(path: Path, size: int | None, limit: int, what: str) -> ConfigError:
    actual = f"{size} bytes" if size is not None else "grew while being read"
    return ConfigError(
        f"{path}: {actual}, over the {limit}-byte limit for the {what}; is this the right file?"
    )


def decode(data: bytes, *, source: str, what: str, bom: bool = False) -> str:
    """``data`` as UTF-8 text; a byte order mark is refused by name unless ``bom`` allows it."""
    if data.startswith(_BOM):
        if not bom:
            raise ConfigError(
                f"{source}:1: starts with a UTF-8 byte order mark (BOM, bytes ef bb bf); "
                f"save the {what} as UTF-8 without BOM"
            )
        data = data[len(_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{source}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the {what} as UTF-8"
        ) from None


def read_text(
    path: Path, *, limit: int, what: str = "input", missing: str | None = None, bom: bool = False
) -> str:
    """:func:`read_bytes`, then :func:`decode`."""
    data = read_bytes(path, limit=limit, what=what, missing=missing)
    return decode(data, source=str(path), what=what, bom=bom)


def too_deep(source: str, what: str) -> ConfigError:
    """What a file nested past what its parser can (or may, quickly) read is told."""
    return ConfigError(
        f"{source}: nested too deeply to read (a {what} needs at most {MAX_DEPTH} levels); "
        "is this the right file?"
    )


def parse(loader: Callable[[], _T], *, source: str, what: str) -> _T:
    """Run a parser, turning its recursion and huge-integer failures into a :class:`ConfigError`."""
    try:
        return loader()
    except RecursionError:
        raise too_deep(source, what) from None
    except ValueError as exc:
        # int('9' * 5000) is refused by Python itself (sys.get_int_max_str_digits).
        if "integer string conversion" not in str(exc):
            raise
        raise huge_number(source, what) from None


def huge_number(source: str, what: str, text: str | None = None) -> ConfigError:
    """The refusal of a number too long for ``int()``, at its line when ``text`` is given (not
    Python's advice to raise ``sys.set_int_max_str_digits()``)."""
    limit = sys.get_int_max_str_digits()
    found = re.search(rf"[0-9_]{{{limit + 1},}}", text) if text is not None else None
    at = f":{text.count(chr(10), 0, found.start()) + 1}" if text and found else ""
    return ConfigError(
        f"{source}{at}: a number with over {limit} digits; a {what} holds no such number, "
        "is this the right file?"
    )


def lines(text: str) -> list[str]:
    """``text`` split into lines as TOML, a Dockerfile or CODEOWNERS counts them: at LF, a CR
    before it dropped (``str.splitlines()`` also breaks at FF, U+0085, U+2028, ...)."""
    found = text.split("\n")
    if found and found[-1] == "":
        found.pop()
    return [line[:-1] if line.endswith("\r") else line for line in found]


STATE_LIMIT = 64
"""Bytes a state file (a pid or port file twinbuild wrote) may hold: one number and a newline."""


def read_state_int(path: Path, *, low: int, high: int) -> int | None:
    """The number in twinbuild's own state file ``path`` (a pidfile, a portfile).

    None when the file is missing or holds anything but ASCII digits from ``low`` to ``high``
    (a stale or garbled file, which the next start replaces); a FIFO, device or folder there, or
    a file that cannot be read, is refused in one line (a FIFO would block the read forever).
    """
    if not os.path.lexists(path):
        return None
    remedy = "it is twinbuild's own state: remove it and re-run"
    data = read_bytes(
        path, limit=STATE_LIMIT, what="state file", missing=f"a dangling link; {remedy}",
        remedy=remedy,
    )  # fmt: skip
    text = data.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))):
        return None
    value = int(text)
    return value if low <= value <= high else None


def resolve(path: Path, *, name: str) -> Path:
    """``path`` made absolute with every link followed, or one line naming ``name`` (the option
    that gave it): a link loop (``RuntimeError`` before Python 3.13) or an unreadable folder."""
    try:
        return path.resolve()
    except RuntimeError:
        problem = "a symlink loop (too many levels of symbolic links)"
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise ConfigError(
                f"{name}: {path}: cannot be resolved: {exc.strerror}; check the path and its "
                "permissions"
            ) from None
        problem = "a symlink loop (too many levels of symbolic links)"
    raise ConfigError(f"{name}: {path}: {problem}; pass a path that leads to a file")


def check_shape(
    value: object,
    *,
    source: str,
    what: str,
    children: Callable[[object], Iterable[tuple[str, object]]] | None = None,
    max_depth: int = MAX_DEPTH,
    too_deep: str | None = None,
    integers: bool = True,
) -> None:
    """Refuse nesting deeper than ``max_depth`` and integers beyond a signed 64-bit range.

    ``children`` lists a node's (key, child) pairs (default: dicts, lists and tuples); the walk is
    iterative, so it cannot itself run out of stack. Messages name the key path of the culprit;
    ``too_deep``, where given, is the message for nesting instead (the manifest has its own);
    ``integers=False`` leaves integers to a reader with bounds of its own (strict JSON).
    Text holding a lone surrogate (a JSON or YAML escape of half a character) is refused too.
    This is the one depth guard for parsed documents; strict JSON also bounds its bytes before
    parsing (``strictjson``), since ``json`` itself recurses.
    """
    walk = children or _children
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    seen: set[int] = set()  # YAML aliases share nodes: walk each once, or a few KiB take hours
    while stack:
        node, where, depth = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        at = f" at '{where}'" if where else ""
        if isinstance(node, str):
            _no_surrogate(node, source=source, what=what, at=at)
        if (
            integers
            and isinstance(node, int)
            and not isinstance(node, bool)
            and abs(node) > MAX_INT
        ):
            raise ConfigError(
                f"{source}: the integer{at} does not fit in 64 bits (over {MAX_INT}); "
                f"a {what} holds no such number"
            )
        kids = list(walk(node))
        if kids and depth >= max_depth:
            raise ConfigError(
                too_deep
                or f"{source}: nested over {max_depth} levels deep{at}; a {what} needs far fewer, "
                "is this the right file?"
            )
        for key, kid in kids:
            _no_surrogate(key, source=source, what=what, at=at, part="key")
            stack.append(
                (
                    kid,
                    f"{where}.{key}" if where and not key.startswith("[") else f"{where}{key}",
                    depth + 1,
                )
            )


def _children(node: object) -> Iterable[tuple[str, object]]:
    if isinstance(node, dict):
        return ((str(k), v) for k, v in node.items())
    if isinstance(node, list | tuple):
        return ((f"[{i}]", v) for i, v in enumerate(node))
    return ()


def _no_surrogate(text: str, *, source: str, what: str, at: str, part: str = "text") -> None:
    index = lone_surrogate(text)
    if index is not None:
        raise ConfigError(
            f"{source}: the {part}{at} holds a lone surrogate ({text[index]!r}), an escape of "
            f"half a character; a {what} holds only text, is this the right file?"
        )
