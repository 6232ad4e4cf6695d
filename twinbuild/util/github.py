"""GitHub Actions I/O: step outputs, step summaries, annotations and the event payload.

The one module that knows the runner's formats, so every command writes them the same way:

- an output with a newline in its value is written as a ``name<<DELIMITER`` block whose delimiter
  is random and checked against the value, so no value can end the block early and set another
  output (``jobs`` must never be able to write ``verdict=passed``);
- annotation messages and properties are escaped per GitHub's workflow command rules (``%``,
  ``\\r`` and ``\\n`` everywhere, ``:`` and ``,`` in properties too), so a message cannot start a
  second command or cut a property short;
- the event payload is read through the strict JSON reader (duplicate keys refused), like the
  evidence it is checked against.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from twinbuild.errors import ConfigError
from twinbuild.util import environ as environment
from twinbuild.util import strictjson
from twinbuild.util.append import append_text

Level = Literal["error", "warning", "notice"]
EVENT_MAX_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def in_actions(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this runs inside a GitHub Actions job."""
    return environ.get("GITHUB_ACTIONS") == "true"


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (``%`` first)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: Level,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    title: str | None = None,
) -> str:
    """One ``::error file=..,line=..,title=..::message`` line (print it to stdout)."""
    props = {"file": file, "line": None if line is None else str(line), "title": title}
    shown = ",".join(f"{k}={escape_property(v)}" for k, v in props.items() if v is not None)
    return f"::{level}{' ' + shown if shown else ''}::{escape_data(message)}"


def format_outputs(values: Mapping[str, str]) -> str:
    """``$GITHUB_OUTPUT`` text for ``values``: ``name=value``, or a block for multi-line values."""
    out: list[str] = []
    for name, value in values.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"step output name {name!r} is not [A-Za-z_][A-Za-z0-9_-]*")
        if "\n" not in value and "\r" not in value:
            out.append(f"{name}={value}\n")
            continue
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter in value:  # 122 random bits: never, unless the value was made to match
            raise ConfigError(f"step output {name}: the value contains its delimiter; refusing")
        out.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    return "".join(out)


def write_outputs(
    values: Mapping[str, str], *, who: str, environ: Mapping[str, str] = os.environ
) -> Path:
    """Append ``values`` to the file named by ``$GITHUB_OUTPUT``; ``who`` names the command."""
    name = environment.text("GITHUB_OUTPUT", environ)
    if not name:
        raise ConfigError(
            f"{who} --github-output: GITHUB_OUTPUT is not set; run it in a GitHub Actions step "
            "or drop --github-output"
        )
    path = Path(name)
    append_outputs(path, values)
    return path


def append_outputs(path: Path, values: Mapping[str, str]) -> None:
    """Append ``values`` to the step outputs file ``path`` (see :func:`format_outputs`)."""
    text = format_outputs(values)  # formatted first: a refused value writes nothing
    # a folder, a missing folder or a FIFO is refused with one line, never a traceback or a hang
    append_text(path, text, what="step outputs ($GITHUB_OUTPUT)")


def step_summary(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The job's step summary file (``$GITHUB_STEP_SUMMARY``), or None outside Actions."""
    name = environment.text("GITHUB_STEP_SUMMARY", environ)
    return Path(name) if name else None


def append_summary(path: Path | None, markdown: str) -> None:
    """Append ``markdown`` (ending in a newline) to a step summary file; nothing when None."""
    if path is None:
        return
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    append_text(path, text, what="step summary")


def event(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The payload of the event that started the run (``$GITHUB_EVENT_PATH``); {} when unset.

    Read strictly: a payload that two JSON readers would see differently is refused.
    """
    name = environment.text("GITHUB_EVENT_PATH", environ)
    if not name:
        return {}
    try:
        return event_at(Path(name))
    except ConfigError as exc:  # say where the path came from: no option names it
        raise ConfigError(f"$GITHUB_EVENT_PATH {exc}") from None


def event_at(path: Path) -> dict[str, Any]:
    """The event payload at ``path``, strictly read; it must be a JSON object."""
    data = strictjson.load(path, max_bytes=EVENT_MAX_BYTES, what="GitHub event payload")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the GitHub event payload is not a JSON object")
    return data
