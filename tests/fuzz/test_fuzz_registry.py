"""The registry client's readers on whatever a registry may answer: an evidence artifact and an
image manifest as mutated bytes and as JSON with any value anywhere, served over HTTP by
tests/fake_registry.py on 127.0.0.1; and a login challenge as any text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import fake_registry as fake
from tests.fuzz.conftest import outcome
from tests.fuzz.strategies import as_bytes, fragment, json_edit, mutated
from twinbuild.ship.auth import Challenge
from twinbuild.ship.oci import Client, ImageRef, OciManifest
from twinbuild.util.exchange import Clock

ENVELOPE = b'{"payloadType": "x", "payload": "", "signatures": []}'
SUBJECT = fake.image_manifest(b"{}", [b"layer"])


@pytest.fixture(scope="module")
def registry() -> Iterator[fake.FakeRegistry]:
    with fake.serving() as server:
        server.put_blob("twinbuild-ci/cuda", ENVELOPE)
        server.put_blob("twinbuild-ci/cuda", b"{}")
        server.put_blob("twinbuild-ci/cuda", b"layer")
        yield server


def _client(registry: fake.FakeRegistry) -> Client:
    clock = Clock(timeout=5, budget=8, hint="fuzz")
    return Client(registry.address, clock=clock, credentials=lambda _: None)


def _image(registry: fake.FakeRegistry) -> ImageRef:
    return ImageRef.parse(f"{registry.address}/twinbuild-ci/cuda@{fake.digest_of(SUBJECT)}")


def _documents(seed: bytes) -> st.SearchStrategy[bytes]:
    doc = json.loads(seed)
    return st.one_of(
        as_bytes(mutated([seed.decode()])),
        json_edit(doc).map(lambda d: json.dumps(d).encode()),
    )


def test_any_evidence_artifact(
    registry: fake.FakeRegistry, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("att")
    image = _image(registry)
    path = f"/v2/{image.repository}/manifests/{image.attachment_tag}"

    @given(data=_documents(fake.attestation(SUBJECT, [ENVELOPE])))
    def run(data: bytes) -> None:
        registry.attacks[path] = fake.content(data)
        result = outcome(lambda: _client(registry).attachments(image), folder=folder)
        assert isinstance(result, Exception) or all(isinstance(b, bytes) for b in result)

    run()


def test_any_image_manifest_to_copy(
    registry: fake.FakeRegistry, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("copy")
    image = _image(registry)

    @given(data=_documents(SUBJECT))
    def run(data: bytes) -> None:
        manifest = OciManifest(media_type=fake.MANIFEST_TYPE, data=data)
        outcome(lambda: _client(registry).copy(image, "twinbuild/cuda", manifest), folder=folder)

    run()


@given(header=st.one_of(st.text(max_size=200), mutated(['Bearer realm="https://r/t",x=y'])))
def test_any_challenge(header: str) -> None:
    found = Challenge.parse(header)
    assert found is None or found.scheme == found.scheme.lower()


@given(extra=fragment)
def test_any_challenge_parameter(extra: str) -> None:
    Challenge.parse(f'Bearer realm="{extra}",service={extra}')


def test_the_seeds_are_read(registry: fake.FakeRegistry, tmp_path: Path) -> None:
    image = _image(registry)
    registry.attacks.pop(f"/v2/{image.repository}/manifests/{image.attachment_tag}", None)
    registry.put_manifest(
        image.repository, image.attachment_tag, fake.attestation(SUBJECT, [ENVELOPE])
    )
    assert outcome(lambda: _client(registry).attachments(image), folder=tmp_path) == [ENVELOPE]
