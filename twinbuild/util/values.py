"""Single values from outside: arguments, environment variables, state files and API fields.

Each reader takes the text as it came and gives back a typed value, or one :class:`ConfigError`
line that names where the text came from (``--keep``, ``$DOCKER_HOST``, a file) and what to give
instead:

- a whole number is ASCII digits only, within a range: ``str.isdigit()`` also accepts ``²`` and
  ``٣``, which ``int()`` refuses or reads as another number, and ``int()`` accepts ``+5``, `` 5``
  and ``5_000``;
- a finite number (days) is a decimal within a range: ``float()`` accepts ``nan``, ``inf`` and
  ``1e300``, which no duration can hold;
- text is UTF-8: Python hands the bytes of an argument or an environment variable that are not
  UTF-8 over as lone surrogates (``\\udcff``), which every later ``.encode()`` refuses; where the
  text names a path, a revision or a value, it holds no control character either, so no message
  about it can break into two lines;
- an engine address (``DOCKER_HOST``) is parsed once, into a unix socket path or a host and port.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from twinbuild.errors import ConfigError

MAX_ID = 2**63 - 1
"""Largest id GitHub hands out (repository, run): a signed 64-bit integer."""

#: Characters that end or bend a line in a terminal or a log: C0 (but tab), DEL, C1, and the
#: Unicode line and paragraph separators.
_CONTROLS = frozenset(
    [*map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0)), "\u2028", "\u2029"]
) - {"\t"}
_SURROGATES = range(0xD800, 0xE000)


def whole(text: str, *, name: str, low: int, high: int, hint: str = "") -> int:
    """``text`` as an integer from ``low`` to ``high``: ASCII digits, nothing else."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))):
        raise _not_whole(text, name=name, low=low, high=high, hint=hint)
    value = int(text)
    if not low <= value <= high:
        raise _not_whole(text, name=name, low=low, high=high, hint=hint)
    return value


def whole_reason(text: str, *, low: int, high: int) -> str | None:
    """Why ``text`` is not a whole number from ``low`` to ``high`` (None when it is one)."""
    try:
        whole(text, name="", low=low, high=high)
    except ConfigError:
        return f"{text!r} is not a whole number from {low} to {high}"
    return None


def _not_whole(text: str, *, name: str, low: int, high: int, hint: str) -> ConfigError:
    said = f"{name}: {text!r} is not a whole number from {low} to {high}"
    return ConfigError(f"{said}; {hint}" if hint else said)


def finite_reason(text: str, *, above: float, high: float) -> str | None:
    """Why ``text`` is not a decimal number over ``above`` and up to ``high`` (None if it is)."""
    try:
        value = float(text) if len(text) <= 32 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not above < value <= high:
        return f"{text!r}: give a number over {above:g} and at most {high:g}"
    return None


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (a byte that was not UTF-8), or None."""
    if text.isascii():
        return None
    for index, char in enumerate(text):
        if ord(char) in _SURROGATES:
            return index
    return None


def control_character(text: str) -> str | None:
    """The first control character in ``text`` (tab aside), or None."""
    if text.isprintable():
        return None
    return next((c for c in text if c in _CONTROLS), None)


def check_text(
    text: str, *, name: str, fix: str = "pass UTF-8 text", controls: bool = False
) -> str:
    """``text`` when it is UTF-8 (and, unless ``controls``, holds no control character)."""
    at = lone_surrogate(text)
    if at is not None:
        byte = ord(text[at]) - 0xDC00
        what = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else f"U+{ord(text[at]):04X}"
        raise ConfigError(f"{name}: {text!r} is not UTF-8 ({what}); {fix}")
    if not controls:
        char = control_character(text)
        if char is not None:
            raise ConfigError(
                f"{name}: {text!r} holds a control character ({char!r}); pass it without "
                "(a newline from $(...) or a file?)"
            )
    return text


def encode(text: str, *, target: object, what: str, kept: str = "nothing was written") -> bytes:
    """``text`` as UTF-8 for a file; a lone surrogate is one line naming the file, not a crash."""
    at = lone_surrogate(text)
    if at is not None:
        line = text.count("\n", 0, at) + 1
        raise ConfigError(
            f"{target}: the {what} would hold {text[at]!r} at line {line}, which is not text "
            f"(a byte that was not UTF-8 in an input); {kept}, fix that input"
        )
    return text.encode("utf-8")


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineAddress:
    """Where an engine listens: a unix socket, or a TCP host and port."""

    scheme: Literal["unix", "tcp"]
    path: str = ""  # unix
    host: str = ""  # tcp
    port: int = 0  # tcp

    @property
    def address(self) -> str | tuple[str, int]:
        """What ``socket.connect`` takes."""
        return self.path if self.scheme == "unix" else (self.host, self.port)


def engine_address(url: str, *, name: str = "$DOCKER_HOST") -> EngineAddress:
    """``unix:///path`` or ``tcp://host[:port]`` (port 2375 by default), or one line saying why
    not; ``urlsplit().port`` raises a bare ValueError on ``:abc``, ``:99999`` or ``[::1``."""
    check_text(url, name=name, fix="set it to UTF-8 text")
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
        netloc = parts.netloc
    except ValueError as exc:
        raise ConfigError(f"{name}: {url!r}: not an address ({exc}); {_ENGINE_FORMS}") from None
    if parts.scheme == "unix":
        if not parts.path:
            raise ConfigError(f"{name}: {url!r}: no socket path; {_ENGINE_FORMS}")
        return EngineAddress(scheme="unix", path=parts.path)
    if parts.scheme not in ("tcp", "http"):
        raise ConfigError(
            f"{name}: {url!r}: scheme {parts.scheme!r} is not supported; {_ENGINE_FORMS}"
        )
    _, colon, port_text = netloc.rpartition("@")[2].rpartition("]")[2].partition(":")
    reason = whole_reason(port_text, low=1, high=65535) if colon else None
    if reason is not None:
        raise ConfigError(f"{name}: {url!r}: port {reason}; {_ENGINE_FORMS}")
    port = int(port_text) if colon else 2375
    return EngineAddress(scheme="tcp", host=hostname or "localhost", port=port)


_ENGINE_FORMS = "use unix:///PATH or tcp://HOST:PORT"
