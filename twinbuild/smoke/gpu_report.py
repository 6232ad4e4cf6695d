"""The GPU proof's output folder, written as it goes: at most three files, each always whole.

- ``report.jsonl``: one JSON object per line, appended as each step ends (the host's facts first,
  then one line per check, then the end); a run cut off at any point keeps every finished line.
- ``table.md``: the table of the checks so far, rewritten (atomically) after each check.
- ``logs.tar.gz``: every build and check log, one compressed bundle, rewritten after each step.

Nothing else is left there: sources, builds and logs live in the work folder (in the cache).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError
from twinbuild.util.atomic import write_atomic

REPORT = "report.jsonl"
TABLE = "table.md"
BUNDLE = "logs.tar.gz"
KINDS = ("host", "build", "check", "end")


class OutFolder:
    """``OUT``: the report appended, the table and the log bundle replaced, nothing else."""

    def __init__(self, out: Path) -> None:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"{out}: exists and is not a folder; name a folder for --out")
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.report = out / REPORT
        self.report.write_bytes(b"")  # this run's report, never a previous run's lines

    def append(self, line: dict[str, Any]) -> None:
        """One line, written and flushed to disk before the next step starts."""
        data = (json.dumps(line, default=str, sort_keys=False) + "\n").encode()
        with self.report.open("ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def table(self, text: str) -> None:
        write_atomic(self.out / TABLE, text)

    def bundle(self, logs: Path) -> None:
        """``logs`` (a folder of log files) as one tar.gz."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for path in sorted(logs.rglob("*")) if logs.is_dir() else []:
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=str(path.relative_to(logs)))
        write_atomic(self.out / BUNDLE, buf.getvalue())


def read(path: Path) -> list[dict[str, Any]]:
    """The lines of a report, each checked: a JSON object with a known ``kind``, the host line
    first. A last line without its newline was cut off mid-write (a run killed then) and is
    left out; any other line that is not a report line is an error naming it."""
    text = path.read_text(encoding="utf-8")
    whole = text[: text.rfind("\n") + 1]
    lines: list[dict[str, Any]] = []
    for number, text in enumerate(whole.splitlines(), 1):
        try:
            data = json.loads(text)
        except ValueError:
            raise ConfigError(f"{path}:{number}: not a JSON line") from None
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            raise ConfigError(f"{path}:{number}: not a report line (kind one of {KINDS})")
        lines.append(data)
    if not lines or lines[0]["kind"] != "host":
        raise ConfigError(f"{path}: the first line is not the host's facts")
    return lines
