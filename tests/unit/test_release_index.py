"""A release tags only what a GPU run tested: an index only with each of its images' evidence.

The build job runs the PR's code and pushes what it likes into the CI namespace; the GPU job pulls
the digest it hands on, and an engine resolves an image index to the one image of its own
platform. So evidence for an index digest is evidence for one of its images at most: an index
that also lists, say, an arm64 image (what a Grace Hopper or Grace Blackwell host pulls) would
carry a tag onto an image no GPU run ever started. A variant's index is released only with the
evidence of every architecture it names, each for that image's own digest. The registry is tests/fake_registry.py on 127.0.0.1; the
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
        real = arch if os_name == "linux" else "amd64"  # an attestation's bytes are no image
        digest, manifest = registry.image(REPOSITORY, seed=arch, arch=real)
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
    digest, data = _index(registry, ("linux", "amd64"), ("linux", "arm64"))
    amd64 = json.loads(data)["manifests"][0]["digest"]
    s = shipped_image(tmp_path, registry, amd64, b"", "index-evidence")  # the amd64 run's
    index = f"{registry.address}/{REPOSITORY}@{digest}"
    ran = release(tmp_path, s, index)
    assert ran.returncode == 7, ran.stderr
    arm64 = json.loads(data)["manifests"][1]["digest"]
    assert ran.stderr.strip().splitlines() == [
        f"twinbuild: --image {index}: the index names linux/arm64 {arm64}, and no evidence given "
        "is for that digest; an image is released only with the evidence of every architecture "
        "it names: pass each architecture's envelope (evidence/cuda-<arch>.dsse.json)"
    ]
    assert registry.writes() == []
    assert registry.manifest_at("twinbuild/cuda", "v1") == RELEASED


def test_an_index_of_one_image_and_its_attestation_is_released(
    tmp_path: Path, registry: fake.FakeRegistry
) -> None:
    """Pins this rule down: BuildKit's provenance rides in the index as an unknown/unknown entry,
    which no engine runs; the one image is what the GPU run tested."""
    digest, data = _index(registry, ("linux", "amd64"), ("unknown", "unknown"))
    amd64 = json.loads(data)["manifests"][0]["digest"]
    s = shipped_image(tmp_path, registry, amd64, b"", "index-evidence")
    ran = release(tmp_path, s, f"{registry.address}/{REPOSITORY}@{digest}")
    assert ran.returncode == 0, ran.stderr
    assert registry.manifest_at("twinbuild/cuda", "v1") == data
