"""``twinbuild prune``: remove old untagged builds, keeping the newest few per image.

Every rebuild leaves the image the tag named before untagged: kept on purpose, since re-tagging it
is an instant revert. Nothing removed them, and an engine's data grew to gigabytes. Prune removes
the untagged twinbuild images of each image (variant and architecture) and profile beyond the
newest ``keep``, never a
tagged one (the current build, the base), and says how much space the engine got back, measured
by the engine itself (its layer total before and after).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from twinbuild.errors import ConfigError, EngineError

VARIANT_LABEL = "org.twinbuild.variant"
ARCH_LABEL = "org.twinbuild.arch"
PROFILE_LABEL = "org.twinbuild.profile"


class PruneAPI(Protocol):
    """What pruning needs of an engine (the real one, or a fake in unit tests)."""

    def images_by_label(self, key: str, value: str | None = None) -> Sequence[Any]: ...
    def remove_image(self, ref: str, *, force: bool = False) -> None: ...
    def layers_size(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneResult:
    removed: tuple[str, ...]
    kept: tuple[str, ...]  # untagged images kept (the newest ``keep`` of each image)
    failed: tuple[str, ...]  # still used (a container, a child image): left in place
    reclaimed: int  # bytes, by the engine's own layer total

    def describe(self) -> str:
        mib = self.reclaimed / 2**20
        line = (
            f"prune: removed {len(self.removed)} untagged twinbuild images, kept "
            f"{len(self.kept)}; reclaimed {mib:.1f} MiB"
        )
        if self.failed:
            line += f"; {len(self.failed)} still in use, left: {', '.join(self.failed)}"
        return line


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneOptions:
    """What ``twinbuild prune`` was asked for."""

    keep: int = 1  # untagged images kept per image and profile, newest first


def prune_images(options: PruneOptions) -> PruneResult:
    """``twinbuild prune``: prune the engine ``connect()`` finds."""
    from twinbuild.engine.client import connect  # the Docker SDK only once it prunes

    with connect() as engine:
        return prune(engine, keep=options.keep)


def prune(engine: PruneAPI, *, keep: int = 1) -> PruneResult:
    """Remove untagged twinbuild builds beyond the newest ``keep`` per image and profile."""
    if keep < 0:
        raise ConfigError(f"--keep {keep}: must be 0 or more (the newest untagged images to keep)")
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for image in engine.images_by_label(VARIANT_LABEL):
        if image.tags:
            continue  # a tag names it: the current build, or one a person kept on purpose
        labels: Mapping[str, str] = image.labels
        key = (
            labels.get(VARIANT_LABEL, ""),
            labels.get(ARCH_LABEL, ""),
            labels.get(PROFILE_LABEL, ""),
        )
        groups.setdefault(key, []).append(image)
    before = engine.layers_size()
    removed: list[str] = []
    kept: list[str] = []
    failed: list[str] = []
    for images in groups.values():
        images.sort(key=lambda i: (i.created, i.id), reverse=True)  # newest first
        kept += [i.id for i in images[:keep]]
        for image in images[keep:]:
            try:
                engine.remove_image(image.id)
            except EngineError:
                failed.append(image.id.removeprefix("sha256:")[:12])
            else:
                removed.append(image.id)
    reclaimed = max(0, before - engine.layers_size()) if removed else 0
    return PruneResult(
        removed=tuple(removed), kept=tuple(kept), failed=tuple(failed), reclaimed=reclaimed
    )
