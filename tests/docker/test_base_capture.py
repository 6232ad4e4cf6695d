"""`twinbuild base capture` against the real engine: the embedded base's installed set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import MINI
from twinbuild.engine import client
from twinbuild.engine.base import ensure_base
from twinbuild.engine.base_capture import capture_image, embedded_capture, embedded_path
from twinbuild.manifest.loader import load

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def eng() -> Iterator[client.Engine]:
    with client.connect() as e:
        yield e


@pytest.fixture(scope="module")
def base_tag(eng: client.Engine) -> str:
    local = load(MINI / "pins/manifest.toml").local
    found = ensure_base(
        eng, suite=local.suite, mirror=local.mirror, packages=local.packages, arch="linux/amd64"
    )
    return found.tag


def test_capture_lists_the_bases_python_and_dpkg_packages(
    eng: client.Engine, base_tag: str
) -> None:
    got = capture_image(eng, base_tag)
    image_id = str((eng.inspect_image(base_tag) or {})["Id"])
    assert got.image == f"{base_tag}@{image_id}"  # by id: a tag names no content
    # Debian's python3-pip puts pip in dist-packages: the capture sees it exactly when installed
    assert ("pip" in got.dists) == ("python3-pip" in got.apt)
    assert got.apt["python3"]
    assert got.apt["dpkg"]


def test_the_embedded_capture_is_kept_by_image_id_and_read_back(
    eng: client.Engine, base_tag: str, tmp_path: Path
) -> None:
    first = embedded_capture(eng, base_tag, tmp_path)
    image_id = str((eng.inspect_image(base_tag) or {})["Id"])
    path = embedded_path(tmp_path, image_id)
    assert path.is_file()
    stamp = path.stat().st_mtime_ns
    again = embedded_capture(eng, base_tag, tmp_path)
    assert path.stat().st_mtime_ns == stamp  # read from the cache, not made again
    assert again.digest == first.digest
    assert again.dists == first.dists
