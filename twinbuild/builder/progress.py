"""Turn buildx's ``--progress=rawjson`` stream into progress lines and a complete log file.

rawjson is BuildKit's solve status (``SolveStatus`` of moby/buildkit's ``client/graph.go``),
written by buildx as indented JSON objects, one after another: a ``{`` line opens each and a
``}`` line closes it. Each object carries ``vertexes`` (one per step: digest, name, cached,
started, completed, error), ``statuses`` (transfers) and ``logs`` (a step's output, base64 in
``data``). Whatever buildx prints outside an object (its ``ERROR: failed to solve`` line) is
plain text, kept in the log as it is.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from twinbuild.util.activity import LIVE

#: A step's output is logged with its name cut to this many characters in front.
NAME_WIDTH = 40


@dataclass(slots=True, kw_only=True)
class Vertex:
    """One step, as the status messages so far describe it."""

    digest: str
    name: str = ""
    cached: bool = False
    started: float | None = None
    completed: float | None = None
    error: str = ""


def _seconds(stamp: object) -> float | None:
    """An RFC 3339 time (``2026-12-03T16:45:45.293223834Z``) as seconds, None when absent."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


class BuildProgress:
    """Consumes buildx's output line by line: logs it all, says one line per finished step."""

    def __init__(self, log_path: Path, say: Callable[[str], None], *, label: str) -> None:
        self.log_path = log_path
        self.say = say
        self.label = label
        self.failed_step: str | None = None
        self._tail: deque[str] = deque(maxlen=200)
        self._log: TextIO | None = log_path.open("w", buffering=1)  # a tail -f sees progress
        self._object: list[str] | None = None  # the lines of the JSON object being read
        self._vertexes: dict[str, Vertex] = {}
        self._reported: set[str] = set()
        self._started: set[str] = set()
        self._live: dict[str, int | None] = {}  # step -> its task on the live line

    def _write(self, text: str) -> None:
        if self._log is not None:
            self._log.write(text)
        self._tail.extend(text.splitlines())

    def line(self, text: str) -> None:
        """One line of buildx's output."""
        if self._object is None:
            if text == "{":
                self._object = [text]
            else:
                self._write(text + "\n")
            return
        self._object.append(text)
        if text == "}":
            lines, self._object = self._object, None
            try:
                status = json.loads("\n".join(lines))
            except ValueError as exc:
                self._write(f"(unreadable buildx progress: {exc})\n")
                return
            if isinstance(status, Mapping):
                self.status(status)

    def status(self, status: Mapping[str, Any]) -> None:
        """One solve status: log its lines, say each step once it starts running and ends."""
        for raw in status.get("vertexes") or ():
            if isinstance(raw, Mapping) and isinstance(raw.get("digest"), str):
                self._vertex(raw)
        for raw in status.get("logs") or ():
            if isinstance(raw, Mapping):
                self._logged(raw)

    def _vertex(self, raw: Mapping[str, Any]) -> None:
        known = self._vertexes.setdefault(raw["digest"], Vertex(digest=raw["digest"]))
        known.name = str(raw.get("name") or known.name)
        known.cached = known.cached or bool(raw.get("cached"))
        known.started = _seconds(raw.get("started")) or known.started
        known.completed = _seconds(raw.get("completed")) or known.completed
        known.error = str(raw.get("error") or known.error)
        if known.error:
            self.failed_step = known.name
        if known.started and known.digest not in self._started:
            self._started.add(known.digest)
            self._write(f"started: {known.name}\n")
            if not (known.completed or known.cached or known.name.startswith("[internal]")):
                self.say(f"[{self.label}] {known.name[:100]}: started")
                self._live[known.digest] = LIVE.add(f"[{self.label}] {known.name[:60]}")
        if known.completed and known.digest not in self._reported:
            self._reported.add(known.digest)
            LIVE.remove(self._live.pop(known.digest, None))
            state = "cached" if known.cached else "failed" if known.error else "ran"
            elapsed = known.completed - (known.started or known.completed)
            self._write(f"#{len(self._reported)} {known.name} ({state}, {elapsed:.1f}s)\n")
            if known.error:
                self._write(f"ERROR: {known.error}\n")
            if not known.name.startswith("[internal]"):
                self.say(f"[{self.label}] {known.name[:100]} ({state}, {elapsed:.1f}s)")

    def _logged(self, raw: Mapping[str, Any]) -> None:
        digest = str(raw.get("vertex") or "")
        name = self._vertexes.get(digest, Vertex(digest=digest)).name
        try:
            data = base64.b64decode(str(raw.get("data") or ""), validate=True)
        except (binascii.Error, ValueError):
            data = b"(unreadable log data)"
        for text in data.decode(errors="replace").splitlines():
            self._write(f"{name[:NAME_WIDTH]} | {text}\n")

    def tail(self, lines: int) -> str:
        return "\n".join(f"  | {line}" for line in list(self._tail)[-lines:])

    def close(self) -> None:
        for key in list(self._live):
            LIVE.remove(self._live.pop(key))
        if self._log is not None:
            self._log.close()
            self._log = None
