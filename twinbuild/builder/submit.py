"""Build one image: the one function every build goes through (``twinbuild build`` and
``twinbuild bake --build``), ``docker buildx build`` on the engine's BuildKit, its progress read
once (``progress.py``) and kept whole in the log; every way the build can end, one line that
says so."""

from __future__ import annotations

import time
from pathlib import Path

from twinbuild.builder.progress import BuildProgress
from twinbuild.engine.api import BuildTarget, EngineAPI
from twinbuild.errors import BuildFailed, DiskFull, EngineError
from twinbuild.util.activity import Say

LOG_TAIL = 20
#: Every image carries its cache metadata, so once pushed it is the registry build cache.
INLINE_CACHE = {"BUILDKIT_INLINE_CACHE": "1"}


def run_build(
    engine: EngineAPI,
    target: BuildTarget,
    *,
    mirror: str,
    what: str,
    label: str,
    log_path: Path,
    say: Say,
) -> str:
    """Build ``target``; the image id, or BuildFailed/DiskFull/EngineError with nothing tagged.
    ``mirror``: the Debian mirror buildx installs from where missing; ``what`` names the image in
    errors, ``label`` in progress lines."""
    start = time.monotonic()
    progress = BuildProgress(log_path, say, label=label)
    try:
        outcome = engine.build(target, line=progress.line, mirror=mirror, say=say)
    finally:
        progress.close()
    if outcome.image_id is not None:
        say(f"[{label}] done in {time.monotonic() - start:.1f}s")
        return outcome.image_id
    tail = progress.tail(LOG_TAIL)
    if "no space left on device" in tail.lower():
        raise DiskFull(f"{what}: disk full during the build; see {log_path}")
    if progress.failed_step is None:
        last = next((x for x in reversed(tail.splitlines()) if x.strip(" |")), "  | (no output)")
        raise EngineError(
            f"{engine.docker_host}: buildx stopped during the build of {what} with no step "
            f"failing (exit {outcome.exit_code}: {last.strip(' |')[:200]}); nothing was tagged; "
            f"whole log: {log_path}"
        )
    raise BuildFailed(
        f"{what}: build failed at {progress.failed_step}; nothing was tagged; whole log: "
        f"{log_path}\n" + tail
    )
