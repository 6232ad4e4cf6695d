"""One finding of a check, as every check prints it: ``path:line: CODE message``.

A finding quotes values from files (a version, a reason), so it may carry a newline. Printed raw,
the rest of the value would start a line of its own, and under GitHub Actions a line starting with
``::error`` is a workflow command: a manifest could forge annotations. So the text form shows
control characters escaped (``\\n``), and the annotation escapes what the runner decodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinbuild.util import github, shown


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    path: str
    line: int
    code: str
    message: str

    def __str__(self) -> str:
        # line 0 means "no line" (a missing table): the file alone, never a made-up ':0'
        where = f"{self.path}:{self.line}" if self.line > 0 else self.path
        return shown.one_line(f"{where}: {self.code} {self.message}")

    def github(self) -> str:
        """The same finding as a GitHub Actions annotation."""
        return github.annotation(
            "error",
            self.message,
            file=self.path,
            line=self.line if self.line > 0 else None,
            title=self.code,
        )
