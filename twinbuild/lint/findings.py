"""One finding of a check, as every check prints it: ``path:line: CODE message``."""

from __future__ import annotations

from dataclasses import dataclass

from twinbuild.ci import github


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    path: str
    line: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"

    def github(self) -> str:
        """The same finding as a GitHub Actions annotation."""
        return github.annotation(
            "error", self.message, file=self.path, line=self.line, title=self.code
        )
