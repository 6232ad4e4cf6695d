"""twinbuild prune: untagged builds beyond the newest N per platform go; tagged ones never."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from twinbuild.engine.api import ImageSummary
from twinbuild.engine.prune import prune
from twinbuild.errors import ConfigError, EngineError

MIB = 2**20


def _image(
    n: int, platform: str, *, tags: tuple[str, ...] = (), profile: str = "local"
) -> ImageSummary:
    labels = {
        "org.twinbuild.variant": platform,
        "org.twinbuild.arch": "linux/amd64",
        "org.twinbuild.profile": profile,
    }
    return ImageSummary(id=f"sha256:{n:064x}", tags=tags, labels=labels, size=n * MIB, created=n)


@dataclass
class FakeEngine:
    """Images with sizes; removing one frees its size unless it is in use."""

    images: list[ImageSummary]
    in_use: set[str] = field(default_factory=set)
    removed: list[str] = field(default_factory=list)

    def images_by_label(self, key: str, value: str | None = None) -> Sequence[ImageSummary]:
        return [i for i in self.images if key in i.labels]

    def remove_image(self, ref: str, *, force: bool = False) -> None:
        assert not force  # prune never forces: an image in use stays
        if ref in self.in_use:
            raise EngineError(f"remove image {ref}: conflict: image is being used")
        self.removed.append(ref)
        self.images = [i for i in self.images if i.id != ref]

    def layers_size(self) -> int:
        return sum(i.size for i in self.images)


def test_keeps_the_newest_untagged_per_platform_and_every_tagged_one() -> None:
    engine = FakeEngine([
        _image(1, "cuda"), _image(2, "cuda"), _image(3, "cuda"), _image(9, "cuda", tags=("twinbuild/cuda:local",)),
        _image(4, "rocm"), _image(5, "rocm"),
        _image(6, "rocm", profile="production"),
    ])  # fmt: skip
    result = prune(engine, keep=1)
    assert sorted(engine.removed) == [_image(n, "x").id for n in (1, 2, 4)]
    assert sorted(result.kept) == [_image(n, "x").id for n in (3, 5, 6)]
    assert result.reclaimed == 7 * MIB
    assert result.describe() == (
        "prune: removed 3 untagged twinbuild images, kept 3; reclaimed 7.0 MiB"
    )


def test_keep_zero_and_images_in_use() -> None:
    engine = FakeEngine([_image(1, "cuda"), _image(2, "cuda")], in_use={_image(2, "x").id})
    result = prune(engine, keep=0)
    assert engine.removed == [_image(1, "x").id]
    short = _image(2, "x").id[7:19]  # as docker shows ids: the first 12 hex
    assert result.failed == (short,)
    assert result.describe().endswith(f"reclaimed 1.0 MiB; 1 still in use, left: {short}")


def test_negative_keep_is_refused() -> None:
    with pytest.raises(ConfigError, match="--keep -1: must be 0 or more"):
        prune(FakeEngine([]), keep=-1)
