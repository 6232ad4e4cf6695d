"""The GitHub Actions variables ``evidence record`` and ``evidence gate`` read, for a dry run.

Inside a job they come from the runner. Outside one, ``--repository-id N`` and ``--env-file FILE``
(``NAME=VALUE`` lines, ``#`` comments; only ``GITHUB_*`` and ``RUNNER_*`` names) supply them, so
a maintainer can rehearse the gate or a record on a laptop. Inside a job neither may contradict
what the runner set: a value that differs is refused, never preferred.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.util import bounded, values

ENV_FILE_MAX = 64 << 10
_NAME = re.compile(r"(?:GITHUB|RUNNER)_[A-Z0-9_]{1,64}")
#: The variables whose values are GitHub's numbers (ids, attempts): ASCII digits in range.
NUMBERS = frozenset(("GITHUB_REPOSITORY_ID", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT",
                     "GITHUB_RUN_NUMBER"))  # fmt: skip


def read_env_file(path: Path) -> dict[str, str]:
    """``NAME=VALUE`` per line; a bad line is one error naming the file and line: a name given
    twice (which one counts would be a guess), a value holding a control character (an ESC
    would repaint the terminal the record is shown on), a number that is not ASCII digits."""
    text = bounded.read_text(path, limit=ENV_FILE_MAX, what="env file")
    found: dict[str, str] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, value = stripped.partition("=")
        where = f"{path}:{number}"
        if not sep or not _NAME.fullmatch(name):
            raise ConfigError(
                f"{where}: expected NAME=VALUE with a GITHUB_* or RUNNER_* name, e.g. "
                "GITHUB_REPOSITORY_ID=123456"
            )
        if name in found:
            raise ConfigError(
                f"{where}: {name} is given twice (also {found[name]!r} above); give it once"
            )
        values.check_text(value, name=f"{where}: {name}", fix="give it as plain text")
        if name in NUMBERS:
            values.whole(value, name=f"{where}: {name}", low=1, high=values.MAX_ID)
        found[name] = value
    return found


def run_env(
    environ: Mapping[str, str],
    *,
    env_file: Path | None = None,
    repository_id: str | None = None,
) -> dict[str, str]:
    """``environ`` with the dry-run values laid over it (refused where a job set otherwise)."""
    given = read_env_file(env_file) if env_file is not None else {}
    if repository_id is not None:
        number = values.whole(repository_id, name="--repository-id", low=1, high=values.MAX_ID)
        given["GITHUB_REPOSITORY_ID"] = str(number)
    in_job = environ.get("GITHUB_ACTIONS") == "true"
    for name, value in given.items():
        if in_job and environ.get(name) not in (None, "", value):
            raise ConfigError(
                f"{name}: the runner set {environ[name]!r}, the dry-run values say {value!r}; in "
                "a GitHub Actions job the runner's values count, drop --repository-id/--env-file"
            )
    return {**environ, **given}
