"""A real PEP 503 package index on 127.0.0.1 for the lock tests: wheels the test builds, served
by a real HTTP server (the standard library's), so the real uv resolves against it.

:class:`PyIndex` publishes a release (:meth:`PyIndex.publish`: a pure-Python wheel with its
``Requires-Dist``) at any time, between two lock runs too; :func:`stalling_server` accepts
connections and never answers, for the bounded-index tests.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import html
import socket
import threading
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name


class _Quiet(SimpleHTTPRequestHandler):
    served: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self.served.append(self.path)
        super().do_GET()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of ``name`` ``version`` (one module), as a build backend writes one."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: twinbuild-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(
        f"{path},{_record_hash(text.encode())},{len(text.encode())}\n"
        for path, text in files.items()
    )
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


class PyIndex:
    """A simple index served from ``root`` on 127.0.0.1 while the context is open."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "files").mkdir(parents=True, exist_ok=True)
        (root / "simple").mkdir(exist_ok=True)
        self.served: list[str] = []
        handler = type("Handler", (_Quiet,), {"served": self.served})
        self.server = ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
        )
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple"

    def __enter__(self) -> PyIndex:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def publish(self, name: str, version: str, requires: tuple[str, ...] = ()) -> str:
        """Publish ``name`` ``version``; the wheel's sha256."""
        wheel = build_wheel(self.root / "files", name, version, requires)
        self._page(canonicalize_name(name))
        return hashlib.sha256(wheel.read_bytes()).hexdigest()

    def _page(self, project: str) -> None:
        links = []
        for wheel in sorted((self.root / "files").glob("*.whl")):
            if canonicalize_name(wheel.name.split("-")[0]) != project:
                continue
            sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
            links.append(f'<a href="../../files/{html.escape(wheel.name)}#sha256={sha}">'
                         f"{html.escape(wheel.name)}</a><br>")  # fmt: skip
        folder = self.root / "simple" / project
        folder.mkdir(exist_ok=True)
        (folder / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n",
            encoding="utf-8",
        )
        projects = sorted(p.name for p in (self.root / "simple").iterdir() if p.is_dir())
        (self.root / "simple" / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n"
            + "\n".join(f'<a href="{p}/">{p}</a><br>' for p in projects)
            + "\n</body></html>\n",
            encoding="utf-8",
        )


@contextlib.contextmanager
def stalling_server() -> Iterator[tuple[str, threading.Event]]:
    """An address on 127.0.0.1 that accepts connections and never answers; the event is set
    once a client has connected."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    connected = threading.Event()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)
            connected.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/simple", connected
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
