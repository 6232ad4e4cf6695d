"""Turn the engine's build stream into progress lines and a complete log file."""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from twinbuild.builder import buildkit_trace
from twinbuild.util.activity import LIVE

STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
BUILT = re.compile(r"Successfully built ([0-9a-f]{12,64})")


class BuildStream:
    """Consumes ``POST /build`` JSON messages: logs all, says one line per finished step."""

    def __init__(self, log_path: Path, say: Callable[[str], None], *, label: str) -> None:
        self.log_path = log_path
        self.say = say
        self.label = label
        self.failed_step: str | None = None
        self._tail: deque[str] = deque(maxlen=200)
        self._log: TextIO | None = log_path.open(
            "w", buffering=1
        )  # line-buffered: a tail -f sees progress
        self._step: str | None = None
        self._step_start = time.monotonic()
        self._cached = False
        self._start = time.monotonic()
        self._vertexes: dict[str, buildkit_trace.Vertex] = {}
        self._reported: set[str] = set()
        self._started: set[str] = set()
        self._live: dict[str, int | None] = {}  # step -> its task on the live line

    def _write(self, text: str) -> None:
        if self._log is not None:
            self._log.write(text)
        self._tail.extend(text.splitlines())

    def _running(self, key: str, name: str) -> None:
        """A step that really runs (not a cache hit): say so now, not only when it ends."""
        self.say(f"[{self.label}] {name[:100]}: started")
        self._live[key] = LIVE.add(f"[{self.label}] {name[:60]}")

    def _ended(self, key: str) -> None:
        LIVE.remove(self._live.pop(key, None))

    def _finish_step(self) -> None:
        if self._step is None:
            return
        self._ended(self._step)
        state = "cached" if self._cached else "ran"
        elapsed = time.monotonic() - self._step_start
        self.say(f"[{self.label}] {self._step} ({state}, {elapsed:.1f}s)")
        self._step = None

    def consume(self, chunks: Iterable[Mapping[str, Any]]) -> str | None:
        """Read the stream to its end; return the built image id, or None when it failed."""
        image_id: str | None = None
        try:
            for chunk in chunks:
                if "stream" in chunk:
                    text = str(chunk["stream"])
                    self._write(text)
                    for line in text.splitlines():
                        # the aux ID (full) wins over "Successfully built" (short)
                        image_id = image_id or self._line(line.strip())
                elif "error" in chunk:
                    message = str(chunk["error"]).strip()
                    self._write(f"ERROR: {message}\n")
                    self.failed_step = self._step or self.failed_step
                    self._step = None
                    return None
                elif chunk.get("id") == "moby.buildkit.trace" and isinstance(chunk.get("aux"), str):
                    self._trace(str(chunk["aux"]))
                elif "aux" in chunk and isinstance(chunk["aux"], Mapping):
                    found = chunk["aux"].get("ID")
                    if isinstance(found, str):
                        image_id = found
                elif "status" in chunk:
                    self._write(f"{chunk['status']}\n")
            self._finish_step()
            elapsed = time.monotonic() - self._start
            if image_id is not None:
                self.say(f"[{self.label}] done in {elapsed:.1f}s")
            return image_id
        finally:
            close = getattr(chunks, "close", None)
            if callable(close):  # a generator over the engine's response: let it close that now
                close()
            self.close()

    def _trace(self, aux: str) -> None:
        """One BuildKit status message: log its lines, say each step once it completes."""
        try:
            status = buildkit_trace.decode(aux)
        except ValueError as exc:
            self._write(f"(unreadable BuildKit progress: {exc})\n")
            return
        for vertex in status.vertexes:
            known = self._vertexes.setdefault(vertex.digest, vertex)
            known.name = vertex.name or known.name
            known.cached = known.cached or vertex.cached
            known.started = vertex.started or known.started
            known.completed = vertex.completed or known.completed
            known.error = vertex.error or known.error
            if known.error:
                self.failed_step = known.name
            if known.started and known.digest not in self._started:
                self._started.add(known.digest)
                self._write(f"started: {known.name}\n")
                if not (known.completed or known.cached or known.name.startswith("[internal]")):
                    self._running(known.digest, known.name)
            if known.completed and known.digest not in self._reported:
                self._reported.add(known.digest)
                self._ended(known.digest)
                state = "cached" if known.cached else "ran"
                elapsed = known.completed - (known.started or known.completed)
                self._write(f"#{len(self._reported)} {known.name} ({state}, {elapsed:.1f}s)\n")
                if not known.name.startswith("[internal]"):
                    self.say(f"[{self.label}] {known.name[:100]} ({state}, {elapsed:.1f}s)")
        for digest, data in status.logs:
            name = self._vertexes.get(digest, buildkit_trace.Vertex(digest=digest)).name
            for line in data.decode(errors="replace").splitlines():
                self._write(f"{name[:40]} | {line}\n")

    def _line(self, line: str) -> str | None:
        step = STEP.match(line)
        if step:
            self._finish_step()
            self._step = f"step {step.group(1)}/{step.group(2)}: {step.group(3)[:90]}"
            self._step_start = time.monotonic()
            self._cached = False
            return None
        if line.startswith("---> Using cache"):
            self._cached = True
        if line.startswith("---> Running in") and self._step is not None:
            self._running(self._step, self._step)
        built = BUILT.search(line)
        if built:
            return built.group(1)
        return None

    def tail(self, lines: int) -> str:
        return "\n".join(f"  | {line}" for line in list(self._tail)[-lines:])

    def close(self) -> None:
        for key in list(self._live):
            self._ended(key)
        if self._log is not None:
            self._log.close()
            self._log = None
