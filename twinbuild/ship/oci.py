"""The OCI distribution protocol: manifests by digest, tags, copies between repositories, and
evidence attached to an image digest.

The Docker engine pushes and pulls images (``twinbuild.engine.client``); what the engine cannot
do is put a tag on a digest without re-pushing, copy a digest into another repository, or store a
non-image artifact. These happen here:

- a tag is set by PUTting the image manifest's exact bytes under the tag name, so the tag names
  exactly the digest that was tested (re-serialising the JSON would make a new digest);
- a release copies the tested digest from the CI namespace into the release repository: every
  blob mounted across repositories (or, where the registry cannot mount, streamed through in
  8 MiB chunks), then the manifest's exact bytes PUT by digest;
- evidence is an OCI artifact whose one layer is the DSSE envelope
  (``application/vnd.dsse.envelope.v1+json``), tagged ``sha256-<hex>.att`` after the image digest,
  cosign's convention, so registries without the OCI 1.1 referrers API (the distribution registry
  2.8 among them) find it by name; its manifest also carries ``subject`` = the image, so a
  registry with the referrers API lists it as a referrer too.

A registry is not trusted. Every request goes through ``twinbuild.util.exchange`` (a deadline per
request and per command, answers bounded while read); every answer is checked before use (a JSON
object, the digest asked for, at most so many layers); a redirect is followed only to the
registry itself, or for a remote registry's blob download to https without credentials.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from twinbuild.engine.api import Credentials
from twinbuild.engine.client import stored_credentials
from twinbuild.errors import ConfigError, EngineError
from twinbuild.ship.auth import Auth, scope
from twinbuild.util.exchange import (
    Answer,
    Clock,
    Request,
    Stream,
    exchange,
    internal_host,
    loopback,
    size_text,
    streaming,
)
from twinbuild.util.exchange import clock as registry_clock

DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
EMPTY_CONFIG = "application/vnd.oci.empty.v1+json"
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST, OCI_INDEX, DOCKER_LIST)
REF_RE = re.compile(
    r"(?P<registry>[A-Za-z0-9.-]+(?::[0-9]+)?)/(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"@(?P<digest>sha256:[0-9a-f]{64})"
)
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

# What a registry may send, checked while reading or before anything is fetched.
MANIFEST_MAX = 4 << 20  # an image manifest is a few KiB; the distribution registry caps it at 4 MiB
MAX_ENVELOPE = 4 << 20  # an evidence envelope, like an evidence file
MAX_EVIDENCE_LAYERS = 8  # `release` stores one envelope; a few more is someone else's business
MAX_IMAGE_LAYERS = 128  # Docker's own limit on an image's layers is 127
MAX_INDEX_ENTRIES = 16  # an index of platforms and their attestations
MAX_BLOB = 1 << 40  # a layer size claimed in a manifest
MAX_REDIRECTS = 3
COPY_CHUNK = 8 << 20
REDIRECTS = (301, 302, 303, 307, 308)


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

    def moved(self, repository: str) -> ImageRef:
        """The same digest in another repository of the same registry."""
        return replace(self, repository=repository)


@dataclass(frozen=True, slots=True, kw_only=True)
class OciManifest:
    """A manifest exactly as the registry holds it."""

    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class Blob:
    """A content descriptor of a manifest: a blob or a child manifest."""

    digest: str
    size: int
    media_type: str


def check_tag(tag: str) -> str:
    if not TAG_RE.fullmatch(tag) or tag.endswith(".att"):
        raise ConfigError(
            f"--tag {tag!r}: a tag is 1-128 of A-Z a-z 0-9 _ . - and does not start with . or -; "
            "`.att` names evidence, not a release"
        )
    return tag


def json_object(data: bytes, what: str) -> dict[str, Any]:
    """A registry's JSON answer, which must be one object."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        raise EngineError(f"{what}: the registry answered something that is not JSON") from None
    if not isinstance(doc, dict):
        kind = {list: "an array", str: "a string", type(None): "null"}.get(type(doc), "a number")
        raise EngineError(f"{what}: the registry answered JSON {kind}, not a JSON object")
    return doc


def descriptors(doc: Mapping[str, Any], key: str, what: str, *, limit: int) -> list[Blob]:
    """The content descriptors under ``key`` (``layers``, ``manifests``), at most ``limit``."""
    items = doc.get(key, [])
    if not isinstance(items, list):
        raise EngineError(f"{what}: '{key}' is not a list; refusing it")
    if len(items) > limit:
        raise EngineError(
            f"{what}: lists {len(items)} {key}, more than the {limit} twinbuild reads; refusing "
            "it (nothing was fetched)"
        )
    return [descriptor(item, f"{what}: {key}[{i}]") for i, item in enumerate(items)]


def descriptor(item: object, what: str) -> Blob:
    if not isinstance(item, dict):
        raise EngineError(f"{what}: not a JSON object; refusing it")
    digest, size, media = item.get("digest"), item.get("size"), item.get("mediaType", "")
    if not isinstance(digest, str) or not DIGEST_RE.fullmatch(digest):
        raise EngineError(f"{what}: digest {str(digest)[:80]!r} is not sha256:<64 hex>")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_BLOB:
        raise EngineError(f"{what}: size {str(size)[:40]!r} is not a byte count")
    if not isinstance(media, str):
        raise EngineError(f"{what}: mediaType is not a string")
    return Blob(digest=digest, size=size, media_type=media)


class Client:
    """One registry, spoken to over HTTPS (plain HTTP for a loopback one, like Docker does)."""

    def __init__(
        self,
        registry: str,
        *,
        clock: Clock | None = None,
        credentials: Callable[[str], Credentials | None] = stored_credentials,
    ) -> None:
        self.registry = registry
        self._local = loopback(registry)
        self._scheme = "http" if self._local else "https"
        self._clock = clock or registry_clock()
        self._auth = Auth(registry, clock=self._clock, credentials=credentials)

    @property
    def scheme(self) -> str:
        return self._scheme

    # --- requests -----------------------------------------------------------------------------

    def _url(self, repository: str, kind: str, reference: str) -> str:
        return f"{self._scheme}://{self.registry}/v2/{repository}/{kind}/{reference}"

    def _send(
        self,
        method: str,
        url: str,
        *,
        what: str,
        scopes: list[str],
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
        limit: int = 64 << 10,
        note: str = "",
        blob: bool = False,
    ) -> Answer:
        """One request, authorized as the registry asks (one retry after a 401), redirects
        followed only where `_redirected` allows."""
        tried = False
        while True:
            request = Request(
                method=method, url=url, what=what, body=body, limit=limit, limit_note=note,
                headers={**(headers or {}), **self._auth.header(scopes)}, loopback=self._local,
            )  # fmt: skip
            answer = self._follow(request, blob=blob)
            if answer.status != 401:
                return answer
            self._auth.answer(answer.header("WWW-Authenticate"), scopes, what, tried=tried)
            tried = True

    def _follow(self, request: Request, *, blob: bool) -> Answer:
        for _ in range(MAX_REDIRECTS + 1):
            answer = exchange(request, self._clock)
            if answer.status not in REDIRECTS:
                return answer
            request = self._redirected(request, answer.header("Location"), blob=blob)
        raise EngineError(
            f"{request.what}: the registry {self.registry} redirected {request.target} more than "
            f"{MAX_REDIRECTS} times; refusing it"
        )

    def _redirected(self, request: Request, location: str, *, blob: bool) -> Request:
        target = urljoin(request.url, location)
        verdict = redirect_verdict(self.registry, request.method, target, blob=blob)
        if verdict == "own":
            return replace(request, url=target)
        if verdict == "elsewhere":
            headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
            return replace(request, url=target, headers=headers, loopback=False)
        raise EngineError(
            f"{request.what}: the registry {self.registry} redirected {request.target} to "
            f"{target[:200]!r}; twinbuild follows a redirect only to the registry itself (and a "
            "remote registry's blob download to https), refusing it"
        )

    def _check(self, answer: Answer, what: str) -> None:
        if answer.status in (401, 403):
            raise self._auth.refused(what)
        if answer.status >= 300:
            raise EngineError(
                f"{what}: the registry {self.registry} answered {answer.status}: {answer.text()}"
            )

    def _own(self, location: str, request_url: str, what: str) -> str:
        """An upload location, which must be on the registry itself (data goes there)."""
        target = urljoin(request_url, location)
        parts = urlsplit(target)
        if not location or parts.scheme != self._scheme or parts.netloc != self.registry:
            raise EngineError(
                f"{what}: the registry {self.registry} wants the upload sent to "
                f"{target[:200]!r}; twinbuild uploads only to the registry itself, refusing it"
            )
        return target

    # --- manifests ----------------------------------------------------------------------------

    def manifest(self, repository: str, reference: str) -> OciManifest | None:
        """The manifest of ``reference`` (a tag or a digest), or None when there is none."""
        sep = "@" if reference.startswith("sha256:") else ":"
        what = f"read {self.registry}/{repository}{sep}{reference}"
        answer = self._send(
            "GET", self._url(repository, "manifests", reference), what=what,
            scopes=[scope(repository, write=False)], headers={"Accept": ", ".join(MANIFEST_TYPES)},
            limit=MANIFEST_MAX, note=f"a manifest is at most {size_text(MANIFEST_MAX)}",
        )  # fmt: skip
        if answer.status == 404:
            return None
        self._check(answer, what)
        found = OciManifest(
            media_type=answer.header("Content-Type").split(";")[0].strip() or OCI_MANIFEST,
            data=answer.body,
        )
        if reference.startswith("sha256:") and found.digest != reference:
            raise EngineError(
                f"{what}: the registry returned content with digest {found.digest}; refusing it"
            )
        return found

    def put_manifest(self, repository: str, reference: str, manifest: OciManifest) -> None:
        """Store ``manifest``'s exact bytes under ``reference`` (a tag, or its own digest)."""
        sep = "@" if reference.startswith("sha256:") else ":"
        what = f"tag {self.registry}/{repository}{sep}{reference}"
        answer = self._send(
            "PUT", self._url(repository, "manifests", reference), what=what,
            scopes=[scope(repository, write=True)], body=manifest.data,
            headers={"Content-Type": manifest.media_type},
        )  # fmt: skip
        self._check(answer, what)
        stored = answer.header("Docker-Content-Digest") or manifest.digest
        if stored != manifest.digest:
            raise EngineError(f"{what}: the registry stored another digest than {manifest.digest}")

    # --- blobs --------------------------------------------------------------------------------

    def blob_exists(self, repository: str, digest: str) -> bool:
        what = f"look for {self.registry}/{repository}@{digest}"
        answer = self._send(
            "HEAD", self._url(repository, "blobs", digest), what=what,
            scopes=[scope(repository, write=False)], blob=True,
        )  # fmt: skip
        if answer.status == 404:
            return False
        self._check(answer, what)
        return True

    def blob(self, repository: str, digest: str, *, limit: int, note: str) -> bytes:
        """A blob's bytes, at most ``limit`` of them, checked against its digest."""
        what = f"read blob {self.registry}/{repository}@{digest}"
        answer = self._send(
            "GET", self._url(repository, "blobs", digest), what=what,
            scopes=[scope(repository, write=False)], limit=limit, note=note, blob=True,
        )  # fmt: skip
        self._check(answer, what)
        if "sha256:" + hashlib.sha256(answer.body).hexdigest() != digest:
            raise EngineError(f"{what}: the bytes do not match the digest; refusing them")
        return answer.body

    def upload(self, repository: str, data: bytes) -> str:
        """Store ``data`` as a blob of ``repository`` (nothing sent if it is there); its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if self.blob_exists(repository, digest):
            return digest
        what = f"upload {self.registry}/{repository}@{digest}"
        scopes = [scope(repository, write=True)]
        start = f"{self._scheme}://{self.registry}/v2/{repository}/blobs/uploads/"
        opened = self._send("POST", start, what=what, scopes=scopes)
        self._check(opened, what)
        location = self._own(opened.header("Location"), start, what)
        self._finish(location, digest, data, what, scopes)
        return digest

    def _finish(
        self, location: str, digest: str, data: bytes, what: str, scopes: list[str]
    ) -> None:
        separator = "&" if urlsplit(location).query else "?"
        done = self._send(
            "PUT", f"{location}{separator}digest={quote(digest)}", what=what, scopes=scopes,
            body=data, headers={"Content-Type": "application/octet-stream"},
        )  # fmt: skip
        self._check(done, what)

    def mount(self, repository: str, digest: str, source: str) -> str | None:
        """Mount blob ``digest`` of ``source`` into ``repository``: None when mounted, else the
        upload session the registry opened instead (it cannot mount)."""
        what = f"mount {self.registry}/{source}@{digest} into {repository}"
        query = f"mount={quote(digest)}&from={quote(source, safe='/')}"
        start = f"{self._scheme}://{self.registry}/v2/{repository}/blobs/uploads/?{query}"
        scopes = [scope(repository, write=True), scope(source, write=False)]
        answer = self._send("POST", start, what=what, scopes=scopes)
        self._check(answer, what)
        if answer.status == 201:
            return None
        return self._own(answer.header("Location"), start, what)

    def stream_copy(self, source: str, repository: str, blob: Blob, session: str) -> None:
        """Copy a blob the registry would not mount through this process, a chunk at a time:
        memory holds one chunk, each chunk has its own deadline, the digest is checked before the
        upload is committed."""
        what = f"copy {self.registry}/{source}@{blob.digest} into {repository}"
        scopes = [scope(repository, write=True)]
        hasher = hashlib.sha256()
        offset, location = 0, session
        with self._blob_stream(source, blob, what) as stream:
            for chunk in stream.chunks:
                hasher.update(chunk)
                end = offset + len(chunk) - 1
                sent = self._send(
                    "PATCH", location, what=what, scopes=scopes, body=chunk,
                    headers={"Content-Type": "application/octet-stream",
                             "Content-Range": f"{offset}-{end}"},
                )  # fmt: skip
                self._check(sent, what)
                location = self._own(sent.header("Location") or location, location, what)
                offset = end + 1
        if "sha256:" + hasher.hexdigest() != blob.digest or offset != blob.size:
            raise EngineError(
                f"{what}: the registry sent {offset} bytes that do not match {blob.digest} "
                f"({blob.size} bytes); refusing them"
            )
        self._finish(location, blob.digest, b"", what, scopes)

    @contextmanager
    def _blob_stream(self, source: str, blob: Blob, what: str) -> Iterator[Stream]:
        scopes = [scope(source, write=False)]
        if not self.blob_exists(source, blob.digest):  # also learns how to authorize the read
            raise EngineError(f"{what}: the registry has no blob {blob.digest} in {source}")
        url = self._url(source, "blobs", blob.digest)
        headers = self._auth.header(scopes)
        for _ in range(MAX_REDIRECTS + 1):
            request = Request(
                method="GET", url=url, what=what, headers=headers, loopback=self._local,
            )  # fmt: skip
            with streaming(request, self._clock, chunk=COPY_CHUNK, total=blob.size) as stream:
                if stream.status in REDIRECTS:
                    moved = self._redirected(request, stream.header("Location"), blob=True)
                    url, headers = moved.url, dict(moved.headers)
                    continue
                if stream.status != 200:
                    raise EngineError(
                        f"{what}: the registry {self.registry} answered {stream.status}"
                    )
                yield stream
                return
        raise EngineError(f"{what}: more than {MAX_REDIRECTS} redirects; refusing it")

    # --- what release and verify do -----------------------------------------------------------

    def copy(self, image: ImageRef, repository: str, manifest: OciManifest) -> int:
        """Put ``image`` (whose manifest is ``manifest``) into ``repository`` under its digest:
        every blob mounted (or streamed), then the exact manifest bytes; how many blobs moved."""
        moved = self._copy(image, repository, manifest, nested=False)
        self.put_manifest(repository, manifest.digest, manifest)
        return moved

    def _copy(
        self, image: ImageRef, repository: str, manifest: OciManifest, *, nested: bool
    ) -> int:
        what = f"copy {image.name}@{manifest.digest}"
        doc = json_object(manifest.data, what)
        media = doc.get("mediaType") or manifest.media_type
        if media in (OCI_INDEX, DOCKER_LIST) or "manifests" in doc:
            if nested:
                raise EngineError(f"{what}: an index inside an index; refusing it")
            moved = 0
            for child in descriptors(doc, "manifests", what, limit=MAX_INDEX_ENTRIES):
                found = self.manifest(image.repository, child.digest)
                if found is None:
                    raise EngineError(f"{what}: the registry lacks its entry {child.digest}")
                moved += self._copy(image, repository, found, nested=True)
                self.put_manifest(repository, found.digest, found)
            return moved
        if "config" not in doc:
            raise EngineError(f"{what}: not an image manifest (no config); refusing it")
        blobs = [descriptor(doc["config"], f"{what}: config")]
        blobs += descriptors(doc, "layers", what, limit=MAX_IMAGE_LAYERS)
        moved = 0
        for blob in blobs:
            if self.blob_exists(repository, blob.digest):
                continue
            session = self.mount(repository, blob.digest, image.repository)
            if session is not None:
                self.stream_copy(image.repository, repository, blob, session)
            moved += 1
        return moved

    def attach(
        self, image: ImageRef, subject: OciManifest, envelope: bytes, annotations: Mapping[str, str]
    ) -> str:
        """Store ``envelope`` next to ``image`` (tag ``sha256-<hex>.att``); its digest."""
        config = self.upload(image.repository, b"{}")
        layer = self.upload(image.repository, envelope)
        doc = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": DSSE_MEDIA_TYPE,
            "config": {"mediaType": EMPTY_CONFIG, "digest": config, "size": 2},
            "layers": [
                {
                    "mediaType": DSSE_MEDIA_TYPE,
                    "digest": layer,
                    "size": len(envelope),
                    "annotations": {"org.opencontainers.image.title": "evidence.dsse.json"},
                }
            ],
            "subject": {
                "mediaType": subject.media_type,
                "digest": subject.digest,
                "size": len(subject.data),
            },
            "annotations": dict(annotations),
        }
        artifact = OciManifest(
            media_type=OCI_MANIFEST, data=json.dumps(doc, sort_keys=True, indent=1).encode()
        )
        self.put_manifest(image.repository, image.attachment_tag, artifact)
        stored = self.manifest(image.repository, image.attachment_tag)
        target = image.tagged(image.attachment_tag)
        if stored is None or stored.digest != artifact.digest:
            found = stored.digest if stored else "nothing"
            raise EngineError(f"store evidence for {image}: {target} names {found} after storing")
        return stored.digest

    def attachments(self, image: ImageRef) -> list[bytes]:
        """The DSSE envelopes stored next to ``image``; empty when there are none."""
        name = image.tagged(image.attachment_tag)
        found = self.manifest(image.repository, image.attachment_tag)
        if found is None:
            return []
        doc = json_object(found.data, name)
        subject = doc.get("subject")
        if subject is not None:
            named = subject.get("digest") if isinstance(subject, dict) else subject
            if named != image.digest:
                raise EngineError(f"{name}: its subject is {str(named)[:80]}, not {image.digest}")
        layers = descriptors(doc, "layers", name, limit=MAX_EVIDENCE_LAYERS)
        blobs: list[bytes] = []
        for layer in layers:
            if layer.media_type != DSSE_MEDIA_TYPE:
                continue
            if not 0 < layer.size <= MAX_ENVELOPE:
                raise EngineError(
                    f"{name}: layer {layer.digest} claims {layer.size} bytes; an evidence "
                    f"envelope is at most {size_text(MAX_ENVELOPE)}, refusing it"
                )
            note = f"its manifest says {layer.size} bytes"
            blobs.append(self.blob(image.repository, layer.digest, limit=layer.size, note=note))
        return blobs


def redirect_verdict(registry: str, method: str, target: str, *, blob: bool) -> str:
    """Where a registry's redirect of ``method`` may lead: ``own`` (a read, to the registry
    itself), ``elsewhere`` (a remote registry's blob download, to https on a public name or
    address; sent without credentials) or ``refused`` (anything else: a write, plain HTTP,
    another host of a loopback registry, an internal address, credentials in the address)."""
    parts = urlsplit(target)
    reading = method in ("GET", "HEAD")
    local = loopback(registry)
    if reading and parts.scheme == ("http" if local else "https") and parts.netloc == registry:
        return "own"
    if (
        reading and blob and not local and parts.scheme == "https" and parts.hostname
        and parts.username is None and not internal_host(parts.hostname)
    ):  # fmt: skip
        return "elsewhere"
    return "refused"
