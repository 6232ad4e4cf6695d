"""A registry on 127.0.0.1 that a test can make misbehave: stall, drip, flood, redirect, lie.

It is a small threaded HTTP server speaking enough of the OCI distribution API for `release` and
`evidence verify --image` to reach the step under attack (manifests by tag and digest, blobs,
uploads with cross-repository mounts). It never contacts anything: a redirect it sends names a
host under ``.invalid`` (RFC 2606), which resolves nowhere. What a well-behaved registry does is
tested against Debian's real docker-registry in tests/docker/test_ship.py; this one exists for
what no real registry does on purpose.

An attack is keyed by ``"METHOD /v2/path"`` (or just the path, for every method) and replaces
the normal answer to that request.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
DSSE = "application/vnd.dsse.envelope.v1+json"
NOWHERE = "twinbuild-nowhere.invalid"  # RFC 2606: never resolves
Attack = Callable[["Handler"], None]


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image_manifest(config: bytes, layers: list[bytes]) -> bytes:
    """An OCI image manifest naming ``config`` and ``layers`` (their bytes are stored apart)."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": digest_of(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest_of(layer),
                    "size": len(layer),
                }
                for layer in layers
            ],
        }
    ).encode()


def attestation(subject: bytes, envelopes: list[bytes]) -> bytes:
    """An evidence artifact manifest (``sha256-<hex>.att``) listing ``envelopes`` as layers."""
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {
                "mediaType": "application/vnd.oci.empty.v1+json",
                "digest": digest_of(b"{}"),
                "size": 2,
            },
            "layers": [
                {"mediaType": DSSE, "digest": digest_of(e), "size": len(e)} for e in envelopes
            ],
            "subject": {
                "mediaType": MANIFEST_TYPE,
                "digest": digest_of(subject),
                "size": len(subject),
            },
        }
    ).encode()


@dataclass
class Store:
    """What the registry holds: manifests by (repository, tag or digest), blobs by digest."""

    manifests: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)
    blobs: dict[tuple[str, str], bytes] = field(default_factory=dict)
    uploads: dict[str, tuple[str, bytearray]] = field(default_factory=dict)


class FakeRegistry(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.store = Store()
        self.attacks: dict[str, Attack] = {}
        self.seen: list[str] = []
        self.mount = (
            True  # False: answer a mount with a plain upload session, as some registries do
        )
        self.delay = 0.0  # seconds before every answer
        # None: no login; "basic": htpasswd-style; "bearer": tokens from /token (realm below)
        self.auth: str | None = None
        self.login = ("ci-bot", "s3cret")  # a test login of a test registry
        self.token = "fake-token-123"  # noqa: S105  # a test token of a test registry
        self.realm: str | None = None  # default: this server's /token
        self.stop = threading.Event()
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"

    def put_manifest(self, repository: str, reference: str, data: bytes) -> str:
        digest = digest_of(data)
        with self._lock:
            self.store.manifests[(repository, reference)] = (MANIFEST_TYPE, data)
            self.store.manifests[(repository, digest)] = (MANIFEST_TYPE, data)
        return digest

    def put_blob(self, repository: str, data: bytes) -> str:
        digest = digest_of(data)
        with self._lock:
            self.store.blobs[(repository, digest)] = data
        return digest

    def image(self, repository: str, seed: str = "a", arch: str = "amd64") -> tuple[str, bytes]:
        """An image (config, one layer, manifest) of ``arch`` in ``repository``: (its digest, its
        manifest)."""
        config = json.dumps({"seed": seed, "os": "linux", "architecture": arch}).encode()
        layer = f"layer {seed}".encode()
        self.put_blob(repository, config)
        self.put_blob(repository, layer)
        manifest = image_manifest(config, [layer])
        return self.put_manifest(repository, digest_of(manifest), manifest), manifest

    def manifest_at(self, repository: str, reference: str) -> bytes | None:
        with self._lock:
            found = self.store.manifests.get((repository, reference))
        return found[1] if found else None

    def writes(self) -> list[str]:
        return [s for s in self.seen if s.split(" ", 1)[0] in ("PUT", "POST", "PATCH", "DELETE")]


_ROUTE = re.compile(r"/v2/(?P<name>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)")
_UPLOAD = re.compile(r"/v2/(?P<name>.+)/blobs/uploads/(?P<id>[^/]*)")


class Handler(http.server.BaseHTTPRequestHandler):
    server: FakeRegistry
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    # --- plumbing -----------------------------------------------------------------------------

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def answer(self, status: int, data: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Docker-Distribution-Api-Version", "registry/2.0")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _serve(self) -> None:
        path = urlsplit(self.path).path
        self.server.seen.append(f"{self.command} {self.path}")
        if self.server.delay:
            time.sleep(self.server.delay)
        attack = self.server.attacks.get(f"{self.command} {path}") or self.server.attacks.get(path)
        if attack is not None:
            attack(self)
            return
        if path == "/token":
            self._token()
            return
        if not self._authorized():
            return
        if path in ("/v2", "/v2/"):
            self.answer(200, b"{}", {"Content-Type": "application/json"})
        elif upload := _UPLOAD.fullmatch(path):
            self._upload(upload["name"], upload["id"])
        elif route := _ROUTE.fullmatch(path):
            self._object(route["name"], route["kind"], route["ref"])
        else:
            self.answer(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = _serve

    def _basic(self) -> str:
        user, password = self.server.login
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def _authorized(self) -> bool:
        """Answer 401 with the challenge when the request lacks the login or token."""
        mode, given = self.server.auth, self.headers.get("Authorization", "")
        if mode is None:
            return True
        if mode == "basic" and given == self._basic():
            return True
        if mode == "bearer" and given == f"Bearer {self.server.token}":
            return True
        if mode == "basic":
            challenge = 'Basic realm="fake"'
        else:
            realm = self.server.realm or f"http://{self.server.address}/token"
            challenge = f'Bearer realm="{realm}",service="fake",scope="repository:x:pull"'
        self.body()
        self.answer(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": challenge})
        return False

    def _token(self) -> None:
        if self.headers.get("Authorization", "") != self._basic():
            self.answer(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}')
            return
        self.answer(200, json.dumps({"token": self.server.token}).encode())

    def _object(self, name: str, kind: str, ref: str) -> None:
        store = self.server.store
        if kind == "manifests" and self.command == "PUT":
            data = self.body()
            digest = digest_of(data)
            media = self.headers.get("Content-Type", MANIFEST_TYPE)
            store.manifests[(name, ref)] = (media, data)
            store.manifests[(name, digest)] = (media, data)
            self.answer(201, headers={"Docker-Content-Digest": digest})
        elif kind == "manifests":
            found = store.manifests.get((name, ref))
            if found is None:
                self.answer(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
                return
            media, data = found
            headers = {"Content-Type": media, "Docker-Content-Digest": digest_of(data)}
            self.answer(200, data, headers)
        else:
            blob = store.blobs.get((name, ref))
            if blob is None:
                self.answer(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
                return
            self.answer(200, blob, {"Docker-Content-Digest": ref})

    def _upload(self, name: str, upload_id: str) -> None:
        store = self.server.store
        query = parse_qs(urlsplit(self.path).query)
        if self.command == "POST":
            mount, source = query.get("mount", [""])[0], query.get("from", [""])[0]
            if mount and self.server.mount and (source, mount) in store.blobs:
                store.blobs[(name, mount)] = store.blobs[(source, mount)]
                location = f"/v2/{name}/blobs/{mount}"
                self.answer(201, headers={"Location": location, "Docker-Content-Digest": mount})
                return
            new = str(uuid.uuid4())
            store.uploads[new] = (name, bytearray())
            self.answer(202, headers={"Location": f"/v2/{name}/blobs/uploads/{new}"})
            return
        if upload_id not in store.uploads:
            self.answer(404, b'{"errors":[{"code":"BLOB_UPLOAD_UNKNOWN"}]}')
            return
        _, buffer = store.uploads[upload_id]
        buffer += self.body()
        if self.command == "PATCH":
            location = f"/v2/{name}/blobs/uploads/{upload_id}"
            self.answer(202, headers={"Location": location, "Range": f"0-{len(buffer) - 1}"})
            return
        digest = query.get("digest", [""])[0]
        if digest != digest_of(bytes(buffer)):
            self.answer(400, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
            return
        del store.uploads[upload_id]
        store.blobs[(name, digest)] = bytes(buffer)
        self.answer(201, headers={"Location": f"/v2/{name}/blobs/{digest}"})


# --- attacks ----------------------------------------------------------------------------------


#: How long a stalled request is held (unless the test ends first): far past any deadline a test
#: sets, so a client that ends before it kept its deadline.
STALL_S = 600


def stall(handler: Handler) -> None:
    """Accept the request and never answer (until the test ends, or for STALL_S)."""
    handler.server.stop.wait(STALL_S)
    handler.close_connection = True


def drip(every: float = 1.0, *, headers_first: bool = True) -> Attack:
    """A valid answer sent one byte every ``every`` seconds: from the body on (the status line and
    headers at once), or from the status line on."""

    def attack(handler: Handler) -> None:
        body = b'{"schemaVersion": 2, "layers": []}' * 1000
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {MANIFEST_TYPE}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        if headers_first:
            handler.wfile.write(head)
            handler.wfile.flush()
            data = body
        else:
            data = head + body
        handler.close_connection = True
        for i in range(len(data)):
            if handler.server.stop.wait(every):
                return
            try:
                handler.wfile.write(data[i : i + 1])
                handler.wfile.flush()
            except OSError:  # the client gave up: what the test wants
                return

    return attack


def flood(size: int = 256 << 20, *, sized: bool = True) -> Attack:
    """A manifest answer of ``size`` bytes (JSON-looking whitespace), with or without a
    Content-Length; sent in 64 KiB pieces of one buffer, so the registry itself stays small."""

    def attack(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", MANIFEST_TYPE)
        if sized:
            handler.send_header("Content-Length", str(size))
        else:
            handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        piece = b"{" + b" " * ((64 << 10) - 1)
        sent = 0
        try:
            while sent < size and not handler.server.stop.is_set():
                handler.wfile.write(piece)
                sent += len(piece)
        except OSError:
            return

    return attack


def redirect(location: str) -> Attack:
    """A 307 to ``location``."""

    def attack(handler: Handler) -> None:
        handler.answer(307, headers={"Location": location})

    return attack


def endless(every: float = 0.05, piece: int = 1024) -> Attack:
    """A 200 whose chunked body never ends: ``piece`` bytes every ``every`` seconds, gently, so
    the client (the engine) is held, not flooded."""

    def attack(handler: Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", MANIFEST_TYPE)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.close_connection = True
        chunk = f"{piece:x}\r\n".encode() + b" " * piece + b"\r\n"
        try:
            while not handler.server.stop.wait(every):
                handler.wfile.write(chunk)
                handler.wfile.flush()
        except OSError:  # the client gave up: what the test wants
            return

    return attack


def loop(handler: Handler) -> None:
    """A 307 to the very request: a client that follows redirects goes round for ever."""
    handler.answer(307, headers={"Location": handler.path})


def content(data: bytes, media: str = MANIFEST_TYPE) -> Attack:
    """Answer ``data`` whatever the request (a manifest whose bytes do not match its digest)."""

    def attack(handler: Handler) -> None:
        handler.answer(200, data, {"Content-Type": media})

    return attack


@contextmanager
def serving() -> Iterator[FakeRegistry]:
    server = FakeRegistry()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


def as_json(data: Any) -> bytes:
    return json.dumps(data).encode()


# --- a fence: nothing but loopback while it is up ---------------------------------------------


class _Fence:
    up = False
    seen: list[str] = []  # noqa: RUF012  # one fence per process, like the hook


_FENCE = _Fence()
_HOOKED = False


class LeftLoopback(RuntimeError):
    """Raised by the audit hook, inside the call that tried to reach another address."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _FENCE.up:  # every thread: name lookups run in one of their own
        return
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else str(address)
        _FENCE.seen.append(f"connect {host}")
        if host not in ("127.0.0.1", "::1"):
            raise LeftLoopback(f"tried to connect to {address!r}")
    elif event == "socket.getaddrinfo":
        _FENCE.seen.append(f"lookup {args[0]}")
        if args[0] not in ("127.0.0.1", "localhost"):
            raise LeftLoopback(f"tried to look up {args[0]!r}")


@contextmanager
def loopback_fence() -> Iterator[list[str]]:
    """While it is up, the process may connect only to 127.0.0.1 and look up only localhost:
    anything else raises inside the very call. Yields what was tried."""
    global _HOOKED  # noqa: PLW0603  # one hook per process: audit hooks cannot be removed
    if not _HOOKED:
        import sys

        sys.addaudithook(_audit)
        _HOOKED = True
    _FENCE.up, _FENCE.seen = True, []
    try:
        yield _FENCE.seen
    finally:
        _FENCE.up = False
