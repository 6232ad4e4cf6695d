"""The remembered no-op (twinbuild.builder.noop): replayed only while nothing it decided from has
changed, and while the engine still names every image by the same id.

The engine here is a socket on this machine answering ``GET /images/<ref>/json`` as the Engine
API does (200 with the image's ``Id``, else 404); the real one is in tests/docker/test_build.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from twinbuild.builder import noop
from twinbuild.util import process

ARGV = ["build", "--root", "."]
TAG, IMAGE = "twinbuild/cuda:local-amd64", "sha256:" + "a" * 64


class Engine:
    """Answers inspect questions from ``images`` (ref -> id) on a unix socket."""

    def __init__(self, path: Path) -> None:
        self.images: dict[str, str] = {}
        self.asked: list[str] = []
        self.path = path
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.host = f"unix://{path}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                request = conn.recv(65536).decode()
                path = request.split(" ")[1]
                ref = unquote(path.removeprefix("/images/").removesuffix("/json"))
                self.asked.append(ref)
                if ref in self.images:
                    body = json.dumps({"Id": self.images[ref]}).encode()
                    conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + body)
                else:
                    conn.sendall(b'HTTP/1.0 404 Not Found\r\n\r\n{"message": "No such image"}')

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
        self.path.unlink(missing_ok=True)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    found = Engine(tmp_path / "e.sock")
    found.images[TAG] = IMAGE
    yield found
    found.close()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "images/local").mkdir(parents=True)
    (root / "images/local/Dockerfile").write_text("FROM base\n")
    (root / "pins").mkdir()
    (root / "pins/manifest.toml").write_text("[local]\n")
    return root


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


def _remember(root: Path, engine: Engine, env: dict[str, str], text: str = "up to date\n") -> None:
    pending = noop.Pending(ARGV, env, str(root))
    pending.before(str(root), _files(root), [])
    pending.after(engine.host, [(TAG, IMAGE)], text, root=str(root), outputs=[])
    pending.save()


def _replayed(root: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str | None:
    capsys.readouterr()
    if not noop.replay(ARGV, env, str(root)):
        return None
    return capsys.readouterr().out


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"TWINBUILD_CACHE": str(tmp_path / "cache")}


def test_a_remembered_no_op_replays_its_output(
    checkout: Path, engine: Engine, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _replayed(checkout, env, capsys) is None  # nothing remembered yet
    _remember(checkout, engine, env, "twinbuild/cuda:local-amd64: up to date (sha256:aaa)\n")
    assert (
        _replayed(checkout, env, capsys) == "twinbuild/cuda:local-amd64: up to date (sha256:aaa)\n"
    )
    assert engine.asked == [TAG]
    # another command line, folder or engine setting is another memo
    assert not noop.replay(["build", "--root", ".", "-v"], env, str(checkout))
    assert not noop.replay(ARGV, env, str(checkout / "images"))
    assert not noop.replay(ARGV, {**env, "GITHUB_ACTIONS": "true"}, str(checkout))


@pytest.mark.parametrize(
    "change",
    ["edit", "same size, same second", "new file", "new folder", "removed", "chmod"],
)
def test_any_change_to_the_checkout_decides_again(
    checkout: Path,
    engine: Engine,
    env: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    change: str,
) -> None:
    _remember(checkout, engine, env)
    recipe = checkout / "images/local/Dockerfile"
    if change == "edit":
        recipe.write_text("FROM base\nRUN true\n")
    elif change == "same size, same second":  # content changed, size and mtime put back
        before = recipe.stat()
        recipe.write_text("FROM bass\n")
        os.utime(recipe, ns=(before.st_atime_ns, before.st_mtime_ns))  # ctime still moves
    elif change == "new file":
        (checkout / "images/local/extra.sh").write_text("echo\n")
    elif change == "new folder":
        (checkout / "twinbuild").mkdir()
    elif change == "removed":
        (checkout / "pins/manifest.toml").unlink()
    else:
        recipe.chmod(0o755)
    assert _replayed(checkout, env, capsys) is None


def test_an_image_the_engine_names_otherwise_decides_again(
    checkout: Path, engine: Engine, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _remember(checkout, engine, env)
    engine.images[TAG] = "sha256:" + "b" * 64  # retagged since
    assert _replayed(checkout, env, capsys) is None
    del engine.images[TAG]  # removed
    assert _replayed(checkout, env, capsys) is None
    engine.close()  # no engine at all
    engine.images[TAG] = IMAGE
    assert _replayed(checkout, env, capsys) is None


@pytest.mark.parametrize("argv", [["build", "--force"], ["build", "--format=json"], ["lint"], []])
def test_what_never_replays(argv: list[str], env: dict[str, str], checkout: Path) -> None:
    assert noop.memo_path(argv, env, str(checkout)) is None
    assert not noop.replay(argv, env, str(checkout))


def test_an_unreadable_memo_decides_again(
    checkout: Path, engine: Engine, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _remember(checkout, engine, env)
    found = noop.memo_path(ARGV, env, str(checkout))
    assert found is not None
    path = Path(found)
    for garbled in (b"", b"{", b"[]", json.dumps({"format": 0}).encode(), b"\xff"):
        path.write_bytes(garbled)
        assert _replayed(checkout, env, capsys) is None


def test_only_a_successful_no_op_is_remembered_by_the_command_line(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    """The entry point saves a memo only when the run ended with exit 0 and offered one."""
    from twinbuild.cli import entry, main

    monkeypatch.setattr("sys.argv", ["twinbuild", *ARGV])
    monkeypatch.chdir(checkout)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(main, "main", lambda argv: 4)  # a build that failed
    monkeypatch.setattr(noop, "PENDING", [])
    assert entry.main() == 4
    assert noop.PENDING[0].data is None
    assert not Path(env["TWINBUILD_CACHE"], "noop").exists()


def test_build_offers_a_memo_only_when_every_image_was_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import mini_project
    from tests.unit.test_cli_handlers import _Engine
    from twinbuild.cli.main import main
    from twinbuild.engine import client, daemon

    root = mini_project(tmp_path)
    engine = _Engine()
    monkeypatch.setattr(client, "connect", lambda host=None: engine)
    monkeypatch.setattr(daemon, "docker_host", lambda: engine.host)
    argv = ["build", "--profile", "production", "--variant", "rocm", "--root", str(root)]
    offers = []
    for _ in range(2):  # built, then up to date
        pending = noop.Pending(argv, {}, str(root))
        monkeypatch.setattr(noop, "PENDING", [pending])
        assert main(argv) == 0
        offers.append(pending)
    built, again = offers
    assert built.data is None  # what a build printed is never replayed
    assert built.stats is not None
    assert str(root / "images/rocm/Dockerfile") in built.stats
    assert str(root / "images") in built.stats  # a file added there is seen
    assert again.data is not None
    shown = capsys.readouterr().out.splitlines()[-1]
    assert again.data["stdout"] == shown + "\n"
    assert again.data["images"] == [["twinbuild/rocm:production-amd64", "sha256:" + "b" * 64]]
    assert again.data["docker_host"] == engine.host
    # the record this run rewrote is fingerprinted as the run left it: the next run replays
    record = root / "build/production/rocm/amd64/image.json"
    assert again.stats is not None
    assert again.stats[str(record)] == noop._stat(str(record))


def test_a_memo_answers_only_for_its_own_command_line(
    checkout: Path, engine: Engine, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The memo's file name is a 64-bit hash of its key; the memo holds the key, so a command
    line whose name collides with another's (made so here by copying the file) decides again."""
    _remember(checkout, engine, env)
    mine, other = (
        noop.memo_path(ARGV, env, str(checkout)),
        noop.memo_path([*ARGV, "-v"], env, str(checkout)),
    )
    assert mine is not None
    assert other is not None
    assert mine != other
    Path(other).write_bytes(Path(mine).read_bytes())
    assert not noop.replay([*ARGV, "-v"], env, str(checkout))
    assert _replayed(checkout, env, capsys) == "up to date\n"


def test_a_base_two_images_share_is_asked_once(
    checkout: Path, engine: Engine, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    base, base_id = "twinbuild/base:7f45fa8f6c5d", "sha256:" + "c" * 64
    engine.images[base] = base_id
    pending = noop.Pending(ARGV, env, str(checkout))
    pending.before(str(checkout), _files(checkout), [])
    images = [(TAG, IMAGE), (base, base_id), (base, base_id)]
    pending.after(engine.host, images, "up\n", root=str(checkout), outputs=[])
    pending.save()
    assert _replayed(checkout, env, capsys) == "up\n"
    assert engine.asked == [TAG, base]


def test_a_reference_that_would_need_quoting_is_never_replayed(
    checkout: Path, engine: Engine, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    odd = "twinbuild/cuda:local amd64?x"
    engine.images[odd] = IMAGE
    pending = noop.Pending(ARGV, env, str(checkout))
    pending.before(str(checkout), _files(checkout), [])
    pending.after(engine.host, [(odd, IMAGE)], "up\n", root=str(checkout), outputs=[])
    pending.save()
    assert _replayed(checkout, env, capsys) is None
    assert engine.asked == []


def test_the_replay_loads_only_what_it_uses() -> None:
    """What a replayed no-op imports, in a fresh interpreter without site (so no installed
    package's start-up hook adds its own): none of the modules that cost it milliseconds."""
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import twinbuild.__main__, "
        "twinbuild.cli.entry; print(' '.join(sorted(sys.modules)))"
    )
    loaded = set(process.run([sys.executable, "-S", "-c", code, str(root)], timeout=60).out.split())
    assert "twinbuild.builder.noop" in loaded
    costly = {"typing", "hashlib", "socket", "pathlib", "threading", "urllib.parse", "dataclasses",
              "subprocess", "argparse", "twinbuild.cli.main", "twinbuild.util.values"}  # fmt: skip
    assert loaded & costly == set()
