"""Running git: one place that never prompts, never hangs, and says what to do without git.

Every git call in twinbuild goes through :func:`run_git`; ``binary=True`` for blobs and archives.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Literal, overload

from twinbuild.errors import ConfigError

GIT_TIMEOUT_S = 60


@overload
def run_git(
    repo: Path, *args: str, binary: Literal[False] = False
) -> subprocess.CompletedProcess[str]: ...
@overload
def run_git(
    repo: Path, *args: str, binary: Literal[True]
) -> subprocess.CompletedProcess[bytes]: ...
def run_git(
    repo: Path, *args: str, binary: bool = False
) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run git in ``repo``; never prompts, never raises for a non-zero exit.

    ``binary`` returns stdout and stderr as bytes (a blob, an archive: not text).
    """
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=not binary,
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
