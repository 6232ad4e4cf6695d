"""`eval "$(twinbuild engine env)"` and `eval "$(twinbuild engine up)"` point a shell at the engine."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def answering(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A unix socket that answers ``GET /_ping`` like an engine (all `status` asks of one).
    In a short folder of the session's: a socket's path must fit in 107 bytes."""
    path = tmp_path_factory.mktemp("ping") / "engine.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        stop.set()
        thread.join()
        server.close()
        path.unlink(missing_ok=True)


def _shell(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, check=False
    )


def _env(tmp_path: Path, docker_host: str) -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {
        **os.environ, "DOCKER_HOST": docker_host, "TWINBUILD_CACHE": str(tmp_path),
        "PYTHONPATH": root, "PY": sys.executable,
    }  # fmt: skip


def test_eval_engine_env_exports_docker_host(tmp_path: Path, answering: str) -> None:
    env = _env(tmp_path, answering)
    proc = _shell('eval "$("$PY" -m twinbuild engine env)" && env | grep ^DOCKER_HOST=', env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"DOCKER_HOST={answering}\n"
    assert proc.stderr == ""


def test_eval_engine_up_keeps_the_status_line_off_stdout(tmp_path: Path, answering: str) -> None:
    env = _env(tmp_path, answering)
    proc = _shell('eval "$("$PY" -m twinbuild engine up)" && echo "ok $DOCKER_HOST"', env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ok {answering}\n"
    assert proc.stderr == (
        f"using the engine at {answering} (DOCKER_HOST); twinbuild did not start it\n"
    )


def test_engine_env_without_an_engine_prints_nothing_to_eval(tmp_path: Path) -> None:
    env = _env(tmp_path, f"unix://{tmp_path}/nobody.sock")
    proc = _shell('"$PY" -m twinbuild engine env', env)
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert proc.stderr == (
        f"twinbuild: no engine answers at unix://{tmp_path}/nobody.sock (DOCKER_HOST)\n"
    )
