"""Running git: one place that never prompts, never hangs, and says what to do without git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from twinbuild.errors import ConfigError

GIT_TIMEOUT_S = 60


def run_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run git in ``repo``; never prompts, never raises for a non-zero exit."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env=env,
        )
    except FileNotFoundError:
        raise ConfigError("git: not found on PATH; install git") from None
    except subprocess.TimeoutExpired:
        command = " ".join(args)
        raise ConfigError(f"git -C {repo} {command}: no answer in {GIT_TIMEOUT_S}s") from None
