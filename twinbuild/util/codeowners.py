"""CODEOWNERS: who owns a path, read the way GitHub reads the file.

GitHub uses the first of ``.github/CODEOWNERS``, ``CODEOWNERS`` and ``docs/CODEOWNERS`` that
exists. Each line is a pattern and its owners (``@user``, ``@org/team`` or an e-mail address);
the last line whose pattern matches a path decides its owners, and a line with none leaves the path
unowned. Patterns follow gitignore's rules as GitHub documents them: ``*.js`` anywhere, ``/docs/``
at the root and everything below it, ``docs/*`` the files directly in docs/ (not deeper),
``apps/`` any apps folder, ``**/logs`` any logs folder. GitHub skips lines it cannot read; the gate
refuses instead, naming the line: ``!`` negation, ``[ ]`` ranges and ``\\`` escapes (which GitHub
does not support) and owners that are not a login, a team or an address.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from twinbuild.errors import ConfigError
from twinbuild.util import bounded

#: Where GitHub looks, in its order.
LOCATIONS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
#: The login twinbuild's own CODEOWNERS ships with, to be replaced: anyone may register it.
PLACEHOLDER = "twinbuild-maintainer"
MAX_BYTES = 3 * 1024 * 1024  # GitHub ignores a CODEOWNERS file over 3 MB

_USER = re.compile(r"@[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_TEAM = re.compile(r"@[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    line: int
    pattern: str
    owners: tuple[str, ...]
    regex: re.Pattern[str]

    def users(self) -> tuple[str, ...]:
        """The owners that are logins (``@user``), without the ``@``."""
        return tuple(o[1:] for o in self.owners if _USER.fullmatch(o))

    def teams(self) -> tuple[str, ...]:
        """The owners that are teams (``@org/team``), without the ``@``."""
        return tuple(o[1:] for o in self.owners if _TEAM.fullmatch(o))


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeOwners:
    source: str  # how messages name the file: a path, or COMMIT:PATH
    rules: tuple[Rule, ...]

    def rule_for(self, path: str) -> Rule | None:
        """The last rule matching ``path`` (GitHub's precedence), or None."""
        for rule in reversed(self.rules):
            if rule.regex.fullmatch(path):
                return rule
        return None

    def users(self, path: str) -> tuple[str, ...]:
        """The logins that own ``path`` (an empty tuple when nobody, or only teams, do)."""
        rule = self.rule_for(path)
        return () if rule is None else rule.users()

    def teams(self, path: str) -> tuple[str, ...]:
        """The teams (``org/team``) that own ``path``."""
        rule = self.rule_for(path)
        return () if rule is None else rule.teams()


def placeholder_lines(owners: CodeOwners) -> list[str]:
    """One line per rule naming the shipped placeholder login (in any case)."""
    return [
        f"{owners.source}:{rule.line}: names @{PLACEHOLDER}, the placeholder twinbuild ships; "
        "anyone may register that login, so it must own nothing: replace it with your "
        "maintainers' logins (docs/trust.md, required setting 5)"
        for rule in owners.rules
        if any(o.casefold() == f"@{PLACEHOLDER}" for o in rule.owners)
    ]


def parse(text: str, *, source: str) -> CodeOwners:
    """The rules of a CODEOWNERS file; a line GitHub would skip is refused, naming it."""
    rules = []
    for number, raw in enumerate(bounded.lines(text), start=1):  # LF ends a line, as for GitHub
        line = re.split(r"(?:^|\s)#", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        pattern, *owners = line.split()
        where = f"{source}:{number}"
        if pattern.startswith("!") or set(pattern) & set("[]\\"):
            raise ConfigError(
                f"{where}: pattern {pattern!r} uses '!', '[ ]' or '\\', which CODEOWNERS does not "
                "support (GitHub skips the line); write it with * and ** only"
            )
        for owner in owners:
            if not (_USER.fullmatch(owner) or _TEAM.fullmatch(owner) or _EMAIL.fullmatch(owner)):
                raise ConfigError(
                    f"{where}: owner {owner!r} is not @user, @org/team or an e-mail address; "
                    "fix the line (GitHub skips it)"
                )
        rules.append(
            Rule(line=number, pattern=pattern, owners=tuple(owners), regex=_regex(pattern))
        )
    return CodeOwners(source=source, rules=tuple(rules))


def find(read: Callable[[str], str | None], *, where: str) -> CodeOwners | None:
    """The file GitHub would use, read with ``read`` (path -> text, None when absent)."""
    for location in LOCATIONS:
        text = read(location)
        if text is not None:
            return parse(text, source=f"{where}{location}")
    return None


def _regex(pattern: str) -> re.Pattern[str]:
    """gitignore semantics as CODEOWNERS uses them, as one regex over a '/'-separated path."""
    folder_only = pattern.endswith("/")
    body = pattern.strip("/")
    anchored = "/" in pattern.rstrip("/")  # a slash at the start or in the middle
    segments = body.split("/") if body else ["**"]
    parts = []
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:.*/)?")
            continue
        text = "".join(
            "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in segment
        )
        parts.append(text if last else text + "/")
    regex = "".join(parts)
    if not anchored:
        regex = "(?:.*/)?" + regex
    if folder_only:
        regex += "/.*"
    elif not set(segments[-1]) & set("*?"):
        regex += "(?:/.*)?"  # a name matches a file, or a folder and everything below it
    return re.compile(regex)
