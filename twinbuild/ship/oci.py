"""The OCI distribution protocol, through ``oras``: manifests by digest, tags, and evidence attached
to an image digest.

The Docker engine pushes and pulls images (``twinbuild.engine.client``); what the engine cannot do
is put a tag on a digest without re-pushing, or store a non-image artifact. Both happen here:

- a tag is set by PUTting the image manifest's exact bytes under the tag name, so the tag names
  exactly the digest that was tested (re-serialising the JSON would make a new digest);
- evidence is an OCI artifact whose one layer is the DSSE envelope
  (``application/vnd.dsse.envelope.v1+json``), tagged ``sha256-<hex>.att`` after the image digest,
  cosign's convention, so registries without the OCI 1.1 referrers API (the distribution registry
  2.8 among them) find it by name; its manifest also carries ``subject`` = the image, so a
  registry with the referrers API lists it as a referrer too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oras.oci
import oras.provider
import requests

from twinbuild.errors import ConfigError, CredentialsMissing, EngineError

DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
REF_RE = re.compile(
    r"(?P<registry>[A-Za-z0-9.-]+(?::[0-9]+)?)/(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"@(?P<digest>sha256:[0-9a-f]{64})"
)
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
TIMEOUT_S = 60
MAX_ENVELOPE = 4 << 20  # read no more of a blob than an envelope can be: a registry is not trusted


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRef:
    """``REGISTRY/REPOSITORY@sha256:HEX``: what is pushed, tested and released."""

    registry: str
    repository: str
    digest: str

    @classmethod
    def parse(cls, text: str, *, where: str = "--image") -> ImageRef:
        found = REF_RE.fullmatch(text)
        if found is None:
            raise ConfigError(
                f"{where} {text!r}: expected REGISTRY/REPOSITORY@sha256:<64 hex>, as "
                "`twinbuild push` prints it (tags move; only a digest names what was tested)"
            )
        return cls(**found.groupdict())

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        return f"{self.name}@{self.digest}"

    def tagged(self, tag: str) -> str:
        return f"{self.name}:{tag}"

    @property
    def attachment_tag(self) -> str:
        return self.digest.replace(":", "-") + ".att"


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """A manifest exactly as the registry holds it."""

    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()


def check_tag(tag: str) -> str:
    if not TAG_RE.fullmatch(tag) or tag.endswith(".att"):
        raise ConfigError(
            f"--tag {tag!r}: a tag is 1-128 of A-Z a-z 0-9 _ . - and does not start with . or -; "
            "`.att` names evidence, not a release"
        )
    return tag


def loopback(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0] if registry.count(":") == 1 else registry
    return host == "localhost" or host.startswith("127.")


class _Oras(oras.provider.Registry):  # type: ignore[misc]  # oras has no type hints
    # oras retries every request five times with sleeps growing to 83 s; a registry that went
    # away must fail the release at once (exit 3), so requests go out once.
    do_request = oras.provider.Registry.do_request.__wrapped__


class Client:
    """One registry, spoken to over HTTPS (plain HTTP for a loopback one, like Docker does)."""

    def __init__(self, registry: str) -> None:
        self.registry = registry
        self._prefix = "http" if loopback(registry) else "https"
        self._client: _Oras | None = None
        self._basic = False

    @property
    def _oras(self) -> _Oras:
        """oras with the auth scheme the registry asks for: ``Basic`` (htpasswd) or tokens."""
        if self._client is None:
            probe = requests.get(f"{self._prefix}://{self.registry}/v2/", timeout=TIMEOUT_S)
            challenge = probe.headers.get("Www-Authenticate", "")
            self._basic = challenge.lower().startswith("basic")
            backend = "basic" if self._basic else "token"
            self._client = _Oras(
                hostname=self.registry, insecure=loopback(self.registry), auth_backend=backend
            )
        return self._client

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except requests.exceptions.ConnectionError as exc:
            raise EngineError(
                f"{what}: the registry {self.registry} does not answer ({type(exc).__name__}); "
                "nothing was tagged"
            ) from exc
        except requests.exceptions.Timeout as exc:
            raise EngineError(f"{what}: the registry {self.registry} timed out") from exc
        except requests.exceptions.RequestException as exc:
            raise EngineError(f"{what}: the registry {self.registry}: {exc}") from exc
        except ValueError as exc:  # oras: a 401 it cannot answer
            if "authentication" in str(exc).lower():
                raise self._no_credentials(what) from exc
            raise

    def _no_credentials(self, what: str) -> CredentialsMissing:
        return CredentialsMissing(
            f"{what}: the registry {self.registry} wants credentials and none are stored for it; "
            f"run `docker login {self.registry}` (they go to $DOCKER_CONFIG/config.json) and retry"
        )

    def _check(self, response: requests.Response, what: str) -> None:
        if response.status_code in (401, 403):
            raise self._no_credentials(what)
        if response.status_code >= 300:
            raise EngineError(
                f"{what}: the registry {self.registry} answered {response.status_code}: "
                f"{' '.join(response.text.split())[:200]}"
            )

    def _url(self, repository: str, kind: str, reference: str) -> str:
        return f"{self._prefix}://{self.registry}/v2/{repository}/{kind}/{reference}"

    def _request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        # The engine's credentials for this registry ($DOCKER_CONFIG/config.json), if any.
        repository = url.split("/v2/", 1)[1].rsplit("/", 2)[0]
        self._oras.auth.load_configs(self._oras.get_container(f"{self.registry}/{repository}"))
        if self._basic and not getattr(self._oras.auth, "_basic_auth", None):
            # oras would fail on the 401 with an AttributeError; say what is missing instead.
            raise self._no_credentials(f"{method} {url.split('://', 1)[1]}")
        response: requests.Response = self._oras.do_request(url, method, **kwargs)
        return response

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        """The manifest of ``reference`` (a tag or a digest), or None when there is none."""
        what = f"read {self.registry}/{repository}:{reference}"
        with self._errors(what):
            response = self._request(
                "GET",
                self._url(repository, "manifests", reference),
                headers={"Accept": ", ".join(MANIFEST_TYPES)},
            )
        if response.status_code == 404:
            return None
        self._check(response, what)
        found = Manifest(
            media_type=response.headers.get("Content-Type", MANIFEST_TYPES[0]).split(";")[0],
            data=response.content,
        )
        if reference.startswith("sha256:") and found.digest != reference:
            raise EngineError(
                f"{what}: the registry returned content with digest {found.digest}; refusing it"
            )
        return found

    def put_manifest(self, repository: str, tag: str, manifest: Manifest) -> None:
        """Point ``tag`` at ``manifest``: its exact bytes, so the tag names the same digest."""
        what = f"tag {self.registry}/{repository}:{tag}"
        with self._errors(what):
            response = self._request(
                "PUT",
                self._url(repository, "manifests", tag),
                data=manifest.data,
                headers={"Content-Type": manifest.media_type},
            )
        self._check(response, what)
        if response.headers.get("Docker-Content-Digest", manifest.digest) != manifest.digest:
            raise EngineError(f"{what}: the registry stored another digest than {manifest.digest}")

    def attach(
        self, image: ImageRef, subject: Manifest, envelope: bytes, annotations: Mapping[str, str]
    ) -> str:
        """Store ``envelope`` next to ``image`` (tag ``sha256-<hex>.att``); its digest."""
        what = f"store evidence for {image}"
        target = image.tagged(image.attachment_tag)
        with tempfile.TemporaryDirectory(prefix="twinbuild-att-") as tmp:
            path = Path(tmp) / "evidence.dsse.json"
            path.write_bytes(envelope)
            with self._errors(what):
                response = self._oras.push(
                    target,
                    files=[f"{path}:{DSSE_MEDIA_TYPE}"],
                    disable_path_validation=True,
                    manifest_annotations=dict(annotations),
                    subject=oras.oci.Subject(
                        mediaType=subject.media_type, digest=subject.digest, size=len(subject.data)
                    ),
                    quiet=True,
                )
        self._check(response, what)
        stored = self.manifest(image.repository, image.attachment_tag)
        if stored is None:
            raise EngineError(f"{what}: {target} is missing right after it was stored")
        return stored.digest

    def attachments(self, image: ImageRef) -> list[bytes]:
        """The DSSE envelopes stored next to ``image``; empty when there are none."""
        what = f"read evidence of {image}"
        found = self.manifest(image.repository, image.attachment_tag)
        if found is None:
            return []
        try:
            doc = json.loads(found.data)
        except ValueError as exc:
            raise ConfigError(f"{image.tagged(image.attachment_tag)}: not JSON: {exc}") from exc
        subject = (doc.get("subject") or {}).get("digest")
        if subject not in (None, image.digest):
            name = image.tagged(image.attachment_tag)
            raise ConfigError(f"{name}: its subject is {subject}, not {image.digest}")
        blobs: list[bytes] = []
        for layer in doc.get("layers") or ():
            if layer.get("mediaType") != DSSE_MEDIA_TYPE:
                continue
            digest = str(layer.get("digest", ""))
            size = layer.get("size")
            if not isinstance(size, int) or not 0 < size <= MAX_ENVELOPE:
                raise ConfigError(
                    f"{image.tagged(image.attachment_tag)}: layer {digest} claims {size!r} bytes; "
                    f"an evidence envelope is at most {MAX_ENVELOPE} bytes, refusing it"
                )
            with self._errors(what):
                response = self._request(
                    "GET", self._url(image.repository, "blobs", digest), stream=True
                )
                self._check(response, what)
                data = response.raw.read(MAX_ENVELOPE + 1, decode_content=True)
            if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
                raise EngineError(f"{what}: blob {digest} does not match its digest; refusing it")
            blobs.append(data)
        return blobs
