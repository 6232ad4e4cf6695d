"""One :class:`~twinbuild.engine.api.BuildTarget` as a target of a ``docker buildx bake`` file,
and back: ``twinbuild bake`` writes what ``twinbuild build`` builds, and ``bake --build`` builds
what buildx resolves from the file, through the same one build function.

The bake file has no key for the RUN steps' network (buildx 0.13 knows none), so it comes from the
profile on the way back; ``cache-to`` is kept in the file for remote builders and dropped on the
way back (the engine's own BuildKit, buildx's docker driver, exports no registry cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twinbuild.engine.api import BuildTarget, Network
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import ARCHS, Arch

#: What a target of the file may say: what ``bake_entry`` writes.
KEYS = frozenset(
    {"context", "dockerfile", "args", "labels", "platforms", "tags", "target", "cache-from",
     "cache-to"}
)  # fmt: skip


def bake_entry(target: BuildTarget, context: str) -> dict[str, Any]:
    """``target`` as a bake target whose context is ``context`` (relative to the file)."""
    entry: dict[str, Any] = {
        "context": context,
        "dockerfile": target.dockerfile,
        "args": dict(sorted(target.args.items())),
        "labels": dict(sorted(target.labels.items())),
        "platforms": [target.platform],
        "tags": list(target.tags),
    }
    if target.target:
        entry["target"] = target.target
    if target.cache_from:
        entry["cache-from"] = list(target.cache_from)
    if target.cache_to:
        entry["cache-to"] = list(target.cache_to)
    return entry


def from_bake(name: str, entry: Mapping[str, Any], root: Path, network: Network) -> BuildTarget:
    """The target buildx resolved (``bake --print``) for ``name``, to build from ``root``."""
    unknown = set(entry) - KEYS
    if unknown:
        raise ConfigError(
            f"bake target {name!r} has keys twinbuild does not build: {', '.join(sorted(unknown))}"
        )
    platforms = list(entry.get("platforms") or ())
    if len(platforms) != 1 or platforms[0] not in ARCHS:
        raise ConfigError(
            f"bake target {name!r}: platforms {platforms}; each target is one of {', '.join(ARCHS)}"
        )
    platform: Arch = platforms[0]
    context = Path(str(entry["context"]))
    return BuildTarget(
        context=context if context.is_absolute() else root / context,
        dockerfile=str(entry.get("dockerfile", "Dockerfile")),
        args={str(k): str(v) for k, v in (entry.get("args") or {}).items()},
        labels={str(k): str(v) for k, v in (entry.get("labels") or {}).items()},
        platform=platform, target=entry.get("target") or None, network=network,
        tags=tuple(str(t) for t in entry.get("tags") or ()),
        cache_from=tuple(str(c) for c in entry.get("cache-from") or ()),
    )  # fmt: skip
