"""Where twinbuild keeps what outlives one run: the cache folder (wheels, the engine, the registry,
the saved base, remembered recipe parses)."""

from __future__ import annotations

import os
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.util import environ


def cache_root() -> Path:
    """The cache folder: ``$TWINBUILD_CACHE``, else ``~/.cache/twinbuild``."""
    env = environ.text("TWINBUILD_CACHE")
    if env:
        return Path(env)
    try:
        return Path.home() / ".cache" / "twinbuild"
    except (RuntimeError, KeyError):  # HOME unset and no passwd entry for this user id
        raise ConfigError(
            f"no cache folder: $HOME is unset and user id {os.getuid()} has no passwd entry; "
            "set TWINBUILD_CACHE=/path/to/cache (or HOME)"
        ) from None
