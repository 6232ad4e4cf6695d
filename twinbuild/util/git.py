"""Running git: one place that never prompts, never hangs, and says what to do without git.

Every git call in twinbuild goes through :func:`run_git` (text) or :func:`git_bytes` (blobs and
archives).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Literal, overload

from twinbuild.errors import ConfigError

GIT_TIMEOUT_S = 60


def run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run git in ``repo``; never prompts, never raises for a non-zero exit."""
    return _run(repo, args, text=True)


def git_bytes(repo: Path, *args: str) -> bytes | None:
    """git's raw stdout in ``repo`` (a blob, an archive: not text), or None for a non-zero exit."""
    proc = _run(repo, args, text=False)
    return proc.stdout if proc.returncode == 0 else None


@overload
def _run(
    repo: Path, args: tuple[str, ...], *, text: Literal[True]
) -> subprocess.CompletedProcess[str]: ...
@overload
def _run(
    repo: Path, args: tuple[str, ...], *, text: Literal[False]
) -> subprocess.CompletedProcess[bytes]: ...
def _run(
    repo: Path, args: tuple[str, ...], *, text: bool
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=text,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,  # nothing may wait for an answer that never comes
        )
    except FileNotFoundError:
        raise ConfigError("git: not found on PATH; install git") from None
    except subprocess.TimeoutExpired:
        command = " ".join(args)
        raise ConfigError(f"git -C {repo} {command}: no answer in {GIT_TIMEOUT_S}s") from None
