"""The commit a branch (or tag) points at now, by ``git ls-remote``: the git side of
``pins outdated``.

Only repositories a pin could be fetched from are asked: an https address, or a local path or
``file://`` (a mirror); ``ext::`` and other transports that run commands are refused by
address and by git's own protocol setting. git never prompts (:mod:`twinbuild.util.git`).
"""

from __future__ import annotations

import re
from pathlib import Path

from twinbuild.errors import ConfigError, EngineError
from twinbuild.util.git import run_git

_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
#: git -c settings for every ls-remote: only the transports a pin may use.
_PROTOCOLS = (
    "-c", "protocol.allow=never", "-c", "protocol.https.allow=always",
    "-c", "protocol.file.allow=always",
)  # fmt: skip


def check_repository(repo: str) -> str:
    """``repo`` when it is an https address or a local path (``file://``); else ConfigError."""
    if repo.startswith(("https://", "file://", "/")):
        return repo
    raise ConfigError(
        f"{repo[:200]!r}: pins outdated asks only https repositories or local mirrors "
        "(a path or file://)"
    )


def head(repo: str, ref: str) -> str:
    """The commit ``ref`` (a branch, else a tag) names in ``repo``; EngineError where the
    repository does not answer, ConfigError where it has no such ref."""
    check_repository(repo)
    if ref.startswith("-"):
        raise ConfigError(f"{ref!r}: a ref starting with '-' would be read as an option")
    wanted = [f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"]
    proc = run_git(Path(), *_PROTOCOLS, "ls-remote", "--", repo, *wanted)
    if proc.returncode not in (0, 2):
        said = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        first = next((line for line in said if line.startswith("fatal:")), said[0] if said else "")
        raise EngineError(f"git ls-remote {repo}: {first[:200] or f'exit {proc.returncode}'}")
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if _SHA.match(sha):
            found[name] = sha
    for name in wanted:
        if name in found:
            return found[name]
    raise ConfigError(f"git ls-remote {repo}: no branch or tag {ref!r}")
