"""Release order and refusals with a scripted registry client; image references; push records.

The real registry runs in tests/docker/test_ship.py; here the client is a fake that records the
order of requests, so "no tag moves before its evidence is stored" is checked request by request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.fake_engine import FakeEngine, image_doc
from tests.helpers import MINI
from tests.unit.evidence_builders import (
    NOW,
    REPO,
    REPO_ID,
    about_checkout,
    github_env,
    release_checkout,
    smoke_report,
    validated,
    write_json,
)
from twinbuild.errors import ConfigError, EngineError, EvidenceRefused
from twinbuild.evidence import record, save, sign
from twinbuild.evidence.keys import keyid
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import ImageKey
from twinbuild.ship.merged import Checkout
from twinbuild.ship.oci import Client, ImageRef, OciManifest, check_tag
from twinbuild.ship.push import PushOptions, push
from twinbuild.ship.release import ReleaseOptions, Trust, release, verify_attached

REF = "127.0.0.1:5000/twinbuild-ci/cuda@sha256:" + "3" * 64


class FakeClient:
    """A registry holding manifests by (repository, reference); records every write in order."""

    def __init__(self, manifests: dict[tuple[str, str], OciManifest]) -> None:
        self.manifests = manifests
        self.writes: list[str] = []
        self.fail_attach = False

    def manifest(self, repository: str, reference: str) -> OciManifest | None:
        return self.manifests.get((repository, reference))

    def put_manifest(self, repository: str, tag: str, manifest: OciManifest) -> None:
        self.writes.append(f"tag {tag}")
        self.manifests[(repository, tag)] = manifest
        self.manifests[(repository, manifest.digest)] = manifest

    def copy(self, image: ImageRef, repository: str, manifest: OciManifest) -> int:
        self.writes.append(f"copy {image.repository} -> {repository}")
        self.manifests[(repository, manifest.digest)] = manifest
        return 2

    def attach(
        self, image: ImageRef, subject: OciManifest, envelope: bytes, annotations: Mapping[str, str]
    ) -> str:
        if self.fail_attach:
            raise EngineError("store evidence: the registry does not answer; nothing was tagged")
        self.writes.append(f"attach {image.attachment_tag}")
        return "sha256:" + hashlib.sha256(envelope).hexdigest()

    def blob(self, repository: str, digest: str, *, limit: int, note: str) -> bytes:
        assert digest == CONFIG_DIGEST, digest  # the one config these images share
        return CONFIG


#: An amd64 image's config: what the release reads to learn the image's architecture.
CONFIG = json.dumps({"os": "linux", "architecture": "amd64"}).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()


def _image_manifest(seed: str) -> OciManifest:
    config = {
        "mediaType": "application/vnd.docker.container.image.v1+json",
        "digest": CONFIG_DIGEST,
        "size": len(CONFIG),
    }
    return OciManifest(
        media_type="application/vnd.docker.distribution.manifest.v2+json",
        data=json.dumps({"schemaVersion": 2, "config": config, "seed": seed}).encode(),
    )


Signed = tuple[Path, Trust, ImageRef, OciManifest, Checkout]


@pytest.fixture
def signed(tmp_path: Path) -> Signed:
    """Evidence for a cuda image whose registry digest is the manifest below, about the HEAD of
    the release checkout."""
    manifest = _image_manifest("a")
    image = ImageRef.parse(f"127.0.0.1:5000/twinbuild-ci/cuda@{manifest.digest}")
    checkout = release_checkout(tmp_path)
    report = about_checkout(smoke_report("cuda"), checkout.inputs, ref=str(image))
    about = validated(report, commit=checkout.head)
    path = write_json(tmp_path / "r.json", report)
    statement = record(path, env=github_env(), now=NOW, validated=about)
    save(statement, tmp_path / "cuda.statement.json")
    key = Ed25519PrivateKey.generate()
    sign(tmp_path / "cuda.statement.json", tmp_path / "cuda.dsse.json", key=key, validated=about)
    trust = Trust(
        keys={keyid(key.public_key()): key.public_key()},
        repository=REPO,
        repository_id=REPO_ID,
        max_age=timedelta(days=14),
    )
    return tmp_path / "cuda.dsse.json", trust, image, manifest, checkout


def _options(signed: Signed, image: ImageRef | None = None, **kw: Any) -> ReleaseOptions:
    path, trust, default, _, checkout = signed
    return ReleaseOptions(
        variant=kw.pop("variant", "cuda"), image=image or default, tag=kw.pop("tag", "v1"),
        evidence=(path,), trust=trust, checkout=checkout, now=NOW, **kw,
    )  # fmt: skip


def _client(*manifests: tuple[str, str, OciManifest]) -> FakeClient:
    return FakeClient({(repo, ref): m for repo, ref, m in manifests})


def test_evidence_is_stored_before_the_tag_moves(
    signed: Signed,
) -> None:
    _, _, image, manifest, _ = signed
    client = _client((image.repository, image.digest, manifest))
    done = release(_options(signed), cast(Client, client), say=lambda _: None)
    # Copied out of the CI namespace first; the tag lives only in the release repository.
    assert client.writes == [
        "copy twinbuild-ci/cuda -> twinbuild/cuda",
        f"attach {image.attachment_tag}",
        "tag v1",
    ]
    assert client.manifests[("twinbuild/cuda", "v1")] is manifest
    assert (image.repository, "v1") not in client.manifests
    assert done.moved_from is None
    assert str(done.image) == f"127.0.0.1:5000/twinbuild/cuda@{image.digest}"
    assert done.describe().startswith(
        f"released 127.0.0.1:5000/twinbuild/cuda:v1 = {done.image}, copied from "
        "127.0.0.1:5000/twinbuild-ci/cuda\n  evidence "
    )


def test_evidence_store_failing_moves_no_tag(
    signed: Signed,
) -> None:
    _, _, image, manifest, _ = signed
    old = _image_manifest("old")
    client = _client((image.repository, image.digest, manifest), ("twinbuild/cuda", "v1", old))
    client.fail_attach = True
    with pytest.raises(EngineError, match="nothing was tagged"):
        release(_options(signed, force=True), cast(Client, client), say=lambda _: None)
    assert client.writes == ["copy twinbuild-ci/cuda -> twinbuild/cuda"]
    assert client.manifests[("twinbuild/cuda", "v1")] is old


def test_refusals_write_nothing(signed: Signed) -> None:
    _, _trust, image, manifest, _ = signed
    other = _image_manifest("b")
    other_ref = ImageRef.parse(f"{image.name}@{other.digest}")
    client = _client(
        (image.repository, image.digest, manifest),
        (image.repository, other.digest, other),
        ("twinbuild/cuda", "v1", other),
        ("twinbuild-ci/rocm", image.digest, manifest),  # the cuda digest, pushed as rocm too
    )
    with pytest.raises(EvidenceRefused) as info:
        release(_options(signed, image=other_ref, tag="v2"), cast(Client, client))
    assert f"{other_ref} is linux/amd64, and no evidence given is for that digest" in str(
        info.value
    )
    assert "\n" not in str(info.value)
    with pytest.raises(EvidenceRefused, match=r"already points at .*pass --force to move it"):
        release(_options(signed), cast(Client, client))
    with pytest.raises(EvidenceRefused, match="is in the cuda repository, and rocm evidence"):
        release(_options(signed, variant="rocm"), cast(Client, client))
    as_rocm = image.moved("twinbuild-ci/rocm")
    with pytest.raises(EvidenceRefused, match="is in the rocm repository, and cuda evidence"):
        release(_options(signed, image=as_rocm), cast(Client, client))
    with pytest.raises(
        EvidenceRefused, match=r"the evidence is for cuda \(linux/amd64\), not rocm \(linux/amd64\)"
    ):
        release(_options(signed, image=as_rocm, variant="rocm"), cast(Client, client))
    with pytest.raises(ConfigError, match="not a twinbuild image repository"):
        release(_options(signed, image=image.moved("acme/cuda")), cast(Client, client))
    missing = ImageRef.parse(f"{image.name}@sha256:{'0' * 64}")
    with pytest.raises(ConfigError, match="has no such digest"):
        release(_options(signed, image=missing), cast(Client, client))
    assert client.writes == []


def test_image_references_and_tags() -> None:
    image = ImageRef.parse(REF)
    assert (image.registry, image.repository) == ("127.0.0.1:5000", "twinbuild-ci/cuda")
    assert image.attachment_tag == "sha256-" + "3" * 64 + ".att"
    assert str(image) == REF
    for bad in ("twinbuild/cuda:local", "127.0.0.1:5000/twinbuild/cuda@sha256:abc", "cuda@sha256"):
        with pytest.raises(ConfigError, match="expected REGISTRY/REPOSITORY@sha256:<64 hex>"):
            ImageRef.parse(bad)
    assert check_tag("v1.2-rc") == "v1.2-rc"
    for bad_tag in ("-x", "a b", "sha256-" + "3" * 64 + ".att"):
        with pytest.raises(ConfigError, match="--tag"):
            check_tag(bad_tag)


def test_push_records_the_digest_and_writes_github_output(tmp_path: Path) -> None:
    image_id = "sha256:" + "1" * 64
    record_file = tmp_path / "build/local/cuda/amd64/image.json"
    record_file.parent.mkdir(parents=True)
    record_file.write_text(json.dumps({"image_id": image_id, "inputs_hash": "x"}))
    out = tmp_path / "github_output"
    engine = FakeEngine(images={image_id: image_doc(image_id)})
    options = PushOptions(root=tmp_path, variant="cuda", github_output=out)
    said: list[str] = []
    manifest = load(MINI / "pins/manifest.toml")
    pushes = push(engine, manifest, options, "127.0.0.1:5000", say=said.append)
    results = pushes.images
    ref = "127.0.0.1:5000/twinbuild-ci/cuda@sha256:" + hashlib.sha256(image_id.encode()).hexdigest()
    assert [r.ref for r in results] == [ref]
    assert engine.tagged == [(image_id, "127.0.0.1:5000/twinbuild-ci/cuda:local-amd64")]
    assert pushes.outputs() == {"cuda-amd64-image": ref, "cuda-image": ref, "image": ref}
    assert [r.describe() for r in results] == [
        f"cuda-amd64: {ref} (1 layers sent, 0 already there)"
    ]
    assert said == []  # the results are the caller's data (stdout), not progress
    saved = json.loads(record_file.read_text())
    assert saved["pushed"]["ref"] == ref
    assert saved["inputs_hash"] == "x"
    # Pushing the same digest again sends nothing, and says so.
    again = push(engine, manifest, options, "127.0.0.1:5000", say=said.append).images
    assert (
        again[-1].describe()
        == f"cuda-amd64: {ref} (nothing transferred: the registry had every layer)"
    )


def test_push_without_a_build_record_says_build_first(tmp_path: Path) -> None:
    options = PushOptions(root=tmp_path, variant="rocm")
    with pytest.raises(ConfigError, match="no build record; run `twinbuild build` first"):
        push(FakeEngine(), load(MINI / "pins/manifest.toml"), options, "r.example")


class AttachedClient(FakeClient):
    """A registry holding one image and whatever envelopes are stored next to it."""

    def __init__(self, image: ImageRef, manifest: OciManifest, envelopes: list[bytes]) -> None:
        super().__init__({(image.repository, image.digest): manifest})
        self.envelopes = envelopes

    def attachments(self, image: ImageRef) -> list[bytes]:
        return self.envelopes


def test_verify_image_refuses_no_evidence_and_evidence_of_another_digest(
    signed: Signed,
) -> None:
    path, trust, image, manifest, _ = signed
    with pytest.raises(EvidenceRefused, match=r"no evidence is stored next to it"):
        verify_attached(
            image, keys=trust.keys, client=cast(Client, AttachedClient(image, manifest, []))
        )
    other = _image_manifest("b")
    other_ref = ImageRef.parse(f"{image.name}@{other.digest}")
    swapped = AttachedClient(other_ref, other, [path.read_bytes()])
    with pytest.raises(EvidenceRefused, match="evidence counts only for the image it tested"):
        verify_attached(other_ref, keys=trust.keys, client=cast(Client, swapped))
    found = verify_attached(
        image,
        keys=trust.keys,
        client=cast(Client, AttachedClient(image, manifest, [path.read_bytes()])),
    )
    assert [v.statement.predicate.image for v in found] == [
        ImageKey(variant="cuda", arch="linux/amd64")
    ]
    with pytest.raises(EvidenceRefused, match="no trusted evidence key"):
        verify_attached(image, keys={}, client=cast(Client, AttachedClient(image, manifest, [])))
