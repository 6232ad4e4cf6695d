"""Engine provisioning decisions, with a fake host: no process is started, no socket opened."""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit import fake_host
from twinbuild.engine import daemon
from twinbuild.engine.daemon import DEFAULT_HOST, EnginePaths, EngineState
from twinbuild.engine.host import SystemHost
from twinbuild.engine.wire import ping
from twinbuild.errors import ConfigError, EngineError
from twinbuild.util.paths import cache_root


@dataclass
class FakeHost(fake_host.FakeHost):
    """The machine as dockerd sees it: a spawn leaves a pidfile and, unless told not to, a socket."""

    PROGRAM = ("dockerd", "/usr/sbin/dockerd")

    binaries: dict[str, str] = field(default_factory=lambda: dict([FakeHost.PROGRAM]))
    answer_after_spawn: bool = True

    def spawn(self, argv: Sequence[str], log: Path) -> int:
        pid = super().spawn(argv, log)
        log.write_text('level=info msg=starting\nlevel=fatal msg="no space left on device"\n')
        pidfile = next(a for a in argv if a.startswith("--pidfile=")).split("=", 1)[1]
        Path(pidfile).write_text(f"{pid}\n")
        if self.answer_after_spawn and not self.die_after_spawn:
            host = next(a for a in argv if a.startswith("--host=")).split("=", 1)[1]
            self.answering.add(host)
        return pid


@pytest.fixture
def paths(tmp_path: Path) -> EnginePaths:
    return EnginePaths(root=tmp_path / "engine")


@pytest.fixture(autouse=True)
def _no_docker_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)


def _running(paths: EnginePaths, host: FakeHost, pid: int = 77) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.pidfile.write_text(f"{pid}\n")
    host.procs[pid] = f"/usr/sbin/dockerd --pidfile={paths.pidfile}"
    host.answering.add(paths.docker_host)


def test_cache_root_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TWINBUILD_CACHE", str(tmp_path))
    assert EnginePaths.under().socket == tmp_path / "engine" / "docker.sock"
    monkeypatch.delenv("TWINBUILD_CACHE")
    assert cache_root() == Path.home() / ".cache" / "twinbuild"


def test_up_starts_private_engine_with_no_network(paths: EnginePaths) -> None:
    host = FakeHost()
    state = daemon.up(paths, host)
    assert state == EngineState(
        docker_host=f"unix://{paths.socket}", source="private", running=True, started=True, pid=4242
    )
    assert host.spawned == [
        [
            "/usr/sbin/dockerd",
            f"--config-file={paths.root}/daemon.json",
            f"--data-root={paths.root}/data",
            f"--exec-root={paths.root}/x",
            f"--host=unix://{paths.root}/docker.sock",
            f"--pidfile={paths.root}/dockerd.pid",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-masq=false",
            "--userland-proxy=false",
        ]
    ]
    assert paths.env_file.read_text() == f"export DOCKER_HOST=unix://{paths.socket}\n"
    assert paths.config.read_text() == "{}\n"
    assert host.ran == []  # dockerd was there: no apt
    assert state.describe() == f"private engine started (pid 4242) at unix://{paths.socket}"


def test_second_up_finds_it_running(paths: EnginePaths) -> None:
    host = FakeHost()
    daemon.up(paths, host)
    again = daemon.up(paths, host)
    assert again.started is False
    assert again.running is True
    assert len(host.spawned) == 1
    assert again.describe() == (
        f"private engine already running (pid 4242) at unix://{paths.socket}"
    )


def test_up_uses_docker_host_that_answers(
    paths: EnginePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/other.sock")
    host = FakeHost(answering={"unix:///run/other.sock"})
    state = daemon.up(paths, host)
    assert state.source == "env"
    assert host.spawned == []
    assert state.describe() == (
        "using the engine at unix:///run/other.sock (DOCKER_HOST); twinbuild did not start it"
    )


def test_up_refuses_dead_docker_host(paths: EnginePaths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    with pytest.raises(EngineError) as info:
        daemon.up(paths, FakeHost())
    assert str(info.value) == (
        "DOCKER_HOST=tcp://127.0.0.1:2375 does not answer; start that engine, or unset "
        "DOCKER_HOST so `twinbuild engine up` starts a private one"
    )


def test_up_treats_our_own_docker_host_as_private(
    paths: EnginePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", paths.docker_host)  # someone sourced our env file
    state = daemon.up(paths, FakeHost())
    assert state.started is True


def test_up_uses_default_socket(paths: EnginePaths) -> None:
    host = FakeHost(answering={DEFAULT_HOST})
    state = daemon.up(paths, host)
    assert (state.source, state.docker_host, host.spawned) == ("default", DEFAULT_HOST, [])


@pytest.mark.parametrize(("root", "debian"), [(False, True), (True, False)])
def test_up_elsewhere_says_what_to_do(paths: EnginePaths, root: bool, debian: bool) -> None:
    with pytest.raises(EngineError) as info:
        daemon.up(paths, FakeHost(root=root, debian=debian))
    assert str(info.value) == (
        "no Docker engine answers at unix:///var/run/docker.sock and DOCKER_HOST is unset; "
        "start Docker or set DOCKER_HOST (twinbuild starts a private engine only as root on "
        "Debian/Ubuntu)"
    )


def test_up_installs_docker_io_when_dockerd_missing(paths: EnginePaths) -> None:
    host = FakeHost(binaries={})
    said: list[str] = []
    daemon.up(paths, host, say=said.append)
    step = "engine: installing Debian's docker.io with apt-get"
    assert said[0] == f"{step}: started"
    assert re.fullmatch(rf"{step}: done in \d+\.\ds", said[1]), said
    assert len(said) == 2
    assert host.ran == [
        ["apt-get", "update"],
        [
            "apt-get",
            "install",
            "-y",
            "--no-install-recommends",
            "-o",
            "DPkg::Lock::Timeout=600",
            "docker.io",
        ],
    ]
    assert host.spawned[0][0] == "/usr/sbin/dockerd"


def test_up_reports_failed_apt(paths: EnginePaths) -> None:
    host = FakeHost(
        binaries={},
        run_results={
            "apt-get update": (100, "Reading lists\nE: Could not resolve 'debian-mirror.invalid'")
        },
    )
    said: list[str] = []
    with pytest.raises(EngineError) as info:
        daemon.up(paths, host, say=said.append)
    assert said[-1].startswith("engine: installing Debian's docker.io with apt-get: failed after ")
    assert str(info.value) == (
        "`apt-get update` failed (exit 100): Reading lists | E: Could not resolve "
        "'debian-mirror.invalid'; install docker.io by hand and rerun"
    )


def test_up_shows_log_tail_when_dockerd_dies(paths: EnginePaths) -> None:
    host = FakeHost(die_after_spawn=True)
    with pytest.raises(EngineError) as info:
        daemon.up(paths, host)
    assert str(info.value) == (
        f"dockerd (pid 4242) exited before unix://{paths.socket} answered; log {paths.log}: "
        'level=info msg=starting | level=fatal msg="no space left on device"'
    )
    assert not paths.env_file.exists()


def test_up_times_out_and_stops_the_daemon(paths: EnginePaths) -> None:
    host = FakeHost(answer_after_spawn=False)
    with pytest.raises(EngineError) as info:
        daemon.up(paths, host, timeout=5)
    assert str(info.value) == (
        f"dockerd (pid 4242) did not answer on unix://{paths.socket} within 5s and was stopped; "
        f'log {paths.log}: level=info msg=starting | level=fatal msg="no space left on device"'
    )
    assert host.signals == [(4242, signal.SIGTERM)]
    assert host.procs == {}


def test_up_ignores_stale_pidfile_of_recycled_pid(paths: EnginePaths) -> None:
    host = FakeHost(procs={77: "/usr/bin/python3 something-else"})
    paths.root.mkdir(parents=True)
    paths.pidfile.write_text("77\n")
    state = daemon.up(paths, host)
    assert state.pid == 4242
    assert 77 in host.procs  # never signalled
    assert host.signals == []


def test_down_stops_by_pid(paths: EnginePaths) -> None:
    host = FakeHost()
    _running(paths, host)
    paths.env_file.write_text("DOCKER_HOST=x\n")
    state = daemon.down(paths, host)
    assert host.signals == [(77, signal.SIGTERM)]
    assert not paths.pidfile.exists()
    assert not paths.env_file.exists()
    assert state.describe() == f"private engine stopped (pid 77); unix://{paths.socket} is gone"


def test_down_kills_after_timeout(paths: EnginePaths) -> None:
    host = FakeHost(ignores_sigterm=True)
    _running(paths, host)
    daemon.down(paths, host, timeout=3)
    assert host.signals == [(77, signal.SIGTERM), (77, signal.SIGKILL)]
    assert host.clock >= 3
    assert not paths.pidfile.exists()


def test_down_is_idempotent_and_spares_strangers(paths: EnginePaths) -> None:
    host = FakeHost(procs={77: "/usr/sbin/sshd"})
    paths.root.mkdir(parents=True)
    paths.pidfile.write_text("77\n")
    first = daemon.down(paths, host)
    second = daemon.down(paths, host)
    assert (
        first
        == second
        == EngineState(docker_host=f"unix://{paths.socket}", source="private", running=False)
    )
    assert host.signals == []
    assert not paths.pidfile.exists()


def test_docker_host_prefers_env_then_private_then_default(
    paths: EnginePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = FakeHost()
    assert daemon.docker_host(paths, host) == DEFAULT_HOST
    _running(paths, host)
    assert daemon.docker_host(paths, host) == f"unix://{paths.socket}"
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2375")
    assert daemon.docker_host(paths, host) == "tcp://127.0.0.1:2375"


def test_status_reports_each_source(paths: EnginePaths, monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost()
    assert daemon.status(paths, host).describe() == (
        "no engine answers at unix:///var/run/docker.sock (default socket)"
    )
    _running(paths, host)
    assert daemon.status(paths, host).running is True
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/x.sock")
    assert daemon.status(paths, host).describe() == (
        "no engine answers at unix:///run/x.sock (DOCKER_HOST)"
    )


def test_ping_rejects_unknown_scheme() -> None:
    with pytest.raises(ConfigError) as info:
        ping("ssh://me@host")
    assert str(info.value) == (
        "$DOCKER_HOST: 'ssh://me@host': scheme 'ssh' is not supported; use unix:///PATH or "
        "tcp://HOST:PORT"
    )


def test_ping_a_missing_socket_is_false(tmp_path: Path) -> None:
    assert ping(f"unix://{tmp_path}/none.sock") is False


def test_ping_speaks_http_over_a_unix_socket(tmp_path: Path) -> None:
    import socket
    import threading

    path = tmp_path / "d.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        seen.append(conn.recv(1024))
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")
        conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert ping(f"unix://{path}") is True
    finally:
        thread.join(5)
        server.close()
    assert seen[0] == b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"  # whole answer, then close


def test_system_host_alive_and_cmdline() -> None:
    import os

    host = SystemHost()
    assert host.alive(os.getpid()) is True
    # what /proc says, NULs as spaces (an xdist worker renames itself, so no fixed word)
    own = Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert host.cmdline(os.getpid()) == own
    assert host.alive(2**22 + 1) is False  # above pid_max
    assert host.cmdline(2**22 + 1) == ""
