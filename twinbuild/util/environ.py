"""The environment, read through :mod:`twinbuild.util.values`: UTF-8 text, typed numbers.

Every variable twinbuild reads comes through here (or through :func:`checked`, the same rule as a
mapping for code that takes ``env``), so a value that is not UTF-8 (Python hands such bytes over
as lone surrogates) is one line naming the variable, never a crash where it is later written to
a file, a statement or ``$GITHUB_OUTPUT``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from twinbuild.util import values

_FIX = "set it to UTF-8 text"


def checked_value(name: str, value: str) -> str:
    """``value`` of ``$name`` when it is UTF-8 text."""
    return values.check_text(value, name=f"${name}", fix=_FIX, controls=True)


def text(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """``$name``'s value, None when unset or empty."""
    value = (os.environ if env is None else env).get(name)
    return checked_value(name, value) if value else None


def whole(
    name: str, *, low: int, high: int, hint: str = "", env: Mapping[str, str] | None = None
) -> int | None:
    """``$name`` as a whole number from ``low`` to ``high``; None when unset or empty."""
    value = text(name, env)
    if value is None:
        return None
    return values.whole(value, name=f"${name}", low=low, high=high, hint=hint)


class Checked(Mapping[str, str]):
    """An environment whose every value is checked as it is read (see :func:`checked`)."""

    __slots__ = ("_env",)

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def __getitem__(self, name: str) -> str:
        return checked_value(name, self._env[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


def checked(env: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """``env`` (default: this process's environment) as a mapping that refuses, naming the
    variable, a value that is not UTF-8 when it is read."""
    return Checked(os.environ if env is None else env)
