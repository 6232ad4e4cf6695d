"""A release tags only what a GPU run tested: one image, not an index of several.

The build job runs the PR's code and pushes what it likes into the CI namespace; the GPU job pulls
the digest it hands on, and an engine resolves an image index to the one image of its own
platform. So evidence for an index digest is evidence for one of its images: an index that also
lists, say, an arm64 image (what a Grace Hopper or Grace Blackwell host pulls) would carry a tag
onto an image no GPU run ever started. The registry is tests/fake_registry.py on 127.0.0.1; the
real command line runs in a child process (tests/unit/test_registry_attacks.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fake_registry as fake
from tests.unit.test_registry_attacks import RELEASED, Shipped, release, shipped_image

REPOSITORY = "twinbuild-ci/cuda"


@pytest.fixture
def registry() -> Iterator[fake.FakeRegistry]:
    with fake.serving() as server:
        yield server


def _index(registry: fake.FakeRegistry, *platforms: tuple[str, str]) -> tuple[str, bytes]:
    """An OCI index of one image per (os, architecture), each a real image in the registry."""
    entries = []
    for os_name, arch in platforms:
        digest, manifest = registry.image(REPOSITORY, seed=arch)
        entries.append(
            {
                "mediaType": fake.MANIFEST_TYPE,
                "digest": digest,
                "size": len(manifest),
                "platform": {"os": os_name, "architecture": arch},
            }
        )
    data = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": entries,
        }
    ).encode()
    return registry.put_manifest(REPOSITORY, fake.digest_of(data), data), data


def _shipped(tmp_path: Path, registry: fake.FakeRegistry, *platforms: tuple[str, str]) -> Shipped:
    digest, data = _index(registry, *platforms)
    return shipped_image(tmp_path, registry, digest, data, "index-evidence")


def test_an_index_of_two_images_is_not_released_on_the_evidence_of_one(
    tmp_path: Path, registry: fake.FakeRegistry
) -> None:
    registry.put_manifest("twinbuild/cuda", "v1", RELEASED)
    s = _shipped(tmp_path, registry, ("linux", "amd64"), ("linux", "arm64"))
    ran = release(tmp_path, s, s.ref(registry))
    assert ran.returncode == 7, ran.stderr
    assert ran.stderr.strip().splitlines() == [
        f"twinbuild: --image {s.ref(registry)}: an index of 2 images (linux/amd64, linux/arm64); "
        "a GPU run tests the one image its engine pulls, so the evidence does not cover the "
        "others: release one image's own digest"
    ]
    assert registry.writes() == []
    assert registry.manifest_at("twinbuild/cuda", "v1") == RELEASED


def test_an_index_of_one_image_and_its_attestation_is_released(
    tmp_path: Path, registry: fake.FakeRegistry
) -> None:
    """Pins this rule down: BuildKit's provenance rides in the index as an unknown/unknown entry,
    which no engine runs; the one image is what the GPU run tested."""
    s = _shipped(tmp_path, registry, ("linux", "amd64"), ("unknown", "unknown"))
    ran = release(tmp_path, s, s.ref(registry))
    assert ran.returncode == 0, ran.stderr
    assert registry.manifest_at("twinbuild/cuda", "v1") == s.manifest
