"""GitHub's REST API on 127.0.0.1, for the answers the gate asks in Actions (GitHub itself is out
of reach here): each path answers what a test put there, in GitHub's shape
(tests/unit/reviews.py), or stalls; anything else is GitHub's 404. It records each request's path
and ``Authorization`` header, so a test sees what the gate asked and with which token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(slots=True)
class FakeGitHub:
    url: str = ""  # http://127.0.0.1:PORT, what $GITHUB_API_URL says
    answers: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    stalls: set[str] = field(default_factory=set)  # paths that never answer (until stopped)
    asked: list[tuple[str, str]] = field(default_factory=list)  # (path, Authorization)
    stop: threading.Event = field(default_factory=threading.Event)

    def answer(self, path: str, body: Any, status: int = 200) -> None:
        self.answers[path] = (status, json.dumps(body).encode())

    def raw(self, path: str, body: bytes, status: int = 200) -> None:
        self.answers[path] = (status, body)


@contextmanager
def serving() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            fake.asked.append((path, self.headers.get("Authorization", "")))
            if path in fake.stalls:
                fake.stop.wait(60)  # a 60 s stall: the gate's deadline ends it long before
                return
            status, body = fake.answers.get(path, (404, b'{"message": "Not Found"}'))
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stop.set()
        server.shutdown()
        server.server_close()
