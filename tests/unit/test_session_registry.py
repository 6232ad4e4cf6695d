"""A kept registry storage starts a session with no tags and every blob (tests/session_registry.py).
The layout is docker-registry's filesystem driver's, as a warm session's test_ship.py reads it:
its release test finds no ``v1`` before it releases one."""

from __future__ import annotations

from pathlib import Path

from tests.session_registry import tidy
from twinbuild.engine.registry import RegistryPaths


def test_tidy_drops_every_tag_and_keeps_blobs_and_links(tmp_path: Path) -> None:
    paths = RegistryPaths.under(tmp_path)
    v2 = paths.data / "docker/registry/v2"
    blob = v2 / "blobs/sha256/ab/abcd/data"
    link = v2 / "repositories/twinbuild-ci/cuda/_layers/sha256/abcd/link"
    revision = v2 / "repositories/twinbuild-ci/cuda/_manifests/revisions/sha256/ef01/link"
    tags = [
        v2 / "repositories/twinbuild-ci/cuda/_manifests/tags/local/current/link",
        v2 / "repositories/twinbuild/rocm/_manifests/tags/v1/index/sha256/ef01/link",
    ]
    for path in (blob, link, revision, *tags):
        path.parent.mkdir(parents=True)
        path.write_text("sha256:abcd")
    tidy(paths)
    assert [t for t in tags if t.exists()] == []
    assert not (v2 / "repositories/twinbuild/rocm/_manifests/tags").exists()
    assert [p for p in (blob, link, revision) if not p.is_file()] == []


def test_tidy_of_a_storage_never_used_does_nothing(tmp_path: Path) -> None:
    tidy(RegistryPaths.under(tmp_path))
    assert list(tmp_path.iterdir()) == []
