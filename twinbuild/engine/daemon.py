"""Find a Docker engine, or start and stop twinbuild's private one (`twinbuild engine up|down`).

The private engine is a plain ``dockerd`` with its own data root, exec root, socket and pidfile
under the cache folder. It creates no network of its own (``--bridge=none``, no iptables rules):
every build and container names its network, ``none`` or ``host``. This module does not import
``docker``; it pings sockets with a few bytes of HTTP (``wire``) so that ``client.py`` stays the
only Docker boundary; it runs host commands through ``host``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.engine.host import Host, SystemHost, apt_install, own_pid, read_pid, stop_pid
from twinbuild.errors import EngineError
from twinbuild.util import environ, values
from twinbuild.util.activity import Say, step, to_stderr
from twinbuild.util.paths import cache_root

DEFAULT_HOST = "unix:///var/run/docker.sock"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 12

Source = Literal["env", "private", "default"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EnginePaths:
    """Where the private engine keeps its state (all under ``<cache>/engine``)."""

    root: Path

    @classmethod
    def under(cls, cache: Path | None = None) -> EnginePaths:
        return cls(root=(cache if cache is not None else cache_root()) / "engine")

    @property
    def data_root(self) -> Path:
        return self.root / "data"

    @property
    def exec_root(self) -> Path:
        # dockerd puts containerd's socket under here: keep it short (unix sockets max 107 bytes).
        return self.root / "x"

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def pidfile(self) -> Path:
        return self.root / "dockerd.pid"

    @property
    def log(self) -> Path:
        return self.root / "dockerd.log"

    @property
    def env_file(self) -> Path:
        return self.root / "env"

    @property
    def config(self) -> Path:
        # An empty config of our own, so a host /etc/docker/daemon.json cannot change the flags.
        return self.root / "daemon.json"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineState:
    """Which engine twinbuild talks to and whether it answers."""

    docker_host: str
    source: Source
    running: bool
    started: bool = False  # this call started it
    stopped: bool = False  # this call stopped it
    pid: int | None = None

    def describe(self) -> str:
        """One line for a person."""
        if self.source == "private":
            if self.stopped:
                return f"private engine stopped (pid {self.pid}); {self.docker_host} is gone"
            if not self.running:
                return (
                    f"private engine is not running ({self.docker_host}); run `twinbuild engine up`"
                )
            verb = "started" if self.started else "already running"
            return f"private engine {verb} (pid {self.pid}) at {self.docker_host}"
        origin = "DOCKER_HOST" if self.source == "env" else "default socket"
        if self.running:
            return f"using the engine at {self.docker_host} ({origin}); twinbuild did not start it"
        return f"no engine answers at {self.docker_host} ({origin})"

    def export_line(self) -> str:
        return f"export DOCKER_HOST={self.docker_host}"


def _private_pid(paths: EnginePaths, host: Host) -> int | None:
    """The pid of our private dockerd if its pidfile names a live dockerd, else None."""
    return own_pid(paths.pidfile, "dockerd", host)


def env_host() -> str | None:
    """``$DOCKER_HOST``, checked once: an address twinbuild can connect to, or one line saying
    why not (a port that is no number, ``[::1`` without its bracket, another scheme)."""
    env = environ.text("DOCKER_HOST")
    if env:
        values.engine_address(env)
    return env


def docker_host(paths: EnginePaths | None = None, host: Host | None = None) -> str:
    """The DOCKER_HOST to use: the env var, else the private engine if alive, else the default."""
    env = env_host()
    if env:
        return env
    paths = paths or EnginePaths.under()
    if _private_pid(paths, host or SystemHost()) is not None:
        return paths.docker_host
    return DEFAULT_HOST


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineOptions:
    """What ``twinbuild engine`` was asked for."""

    action: Literal["up", "down", "status", "env"] = "status"  # env: status, said for eval
    print_host: bool = False  # print only the DOCKER_HOST to use


def control(options: EngineOptions) -> EngineState:
    """Start, stop or look at the engine, as ``options.action`` says."""
    return {"up": up, "down": down, "status": status, "env": status}[options.action]()


def status(paths: EnginePaths | None = None, host: Host | None = None) -> EngineState:
    """Which engine `docker_host()` picks and whether it answers (`twinbuild engine status`)."""
    paths = paths or EnginePaths.under()
    host = host or SystemHost()
    env = env_host()
    if env and env != paths.docker_host:
        return EngineState(docker_host=env, source="env", running=host.ping(env))
    pid = _private_pid(paths, host)
    if pid is not None or env:
        running = pid is not None and host.ping(paths.docker_host)
        return EngineState(
            docker_host=paths.docker_host, source="private", running=running, pid=pid
        )
    return EngineState(docker_host=DEFAULT_HOST, source="default", running=host.ping(DEFAULT_HOST))


def dockerd_argv(dockerd: str, paths: EnginePaths) -> list[str]:
    """The private daemon's command line: own roots and socket, no network of its own."""
    return [
        dockerd,
        f"--config-file={paths.config}",
        f"--data-root={paths.data_root}",
        f"--exec-root={paths.exec_root}",
        f"--host={paths.docker_host}",
        f"--pidfile={paths.pidfile}",
        "--bridge=none",
        "--iptables=false",
        "--ip6tables=false",
        "--ip-masq=false",
        "--userland-proxy=false",
    ]


def _log_tail(paths: EnginePaths) -> str:
    try:
        lines = paths.log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in lines[-LOG_TAIL_LINES:]) or "(empty log)"


def _install_dockerd(host: Host, say: Say) -> str:
    # apt-get takes a minute or more here and prints nothing we keep: say when it starts and ends.
    with step("engine: installing Debian's docker.io with apt-get", say):
        apt_install(host, "docker.io")
    found = host.which("dockerd")
    if found is None:
        raise EngineError("apt installed docker.io but no dockerd is on PATH; check /usr/sbin")
    return found


def up(
    paths: EnginePaths | None = None,
    host: Host | None = None,
    *,
    timeout: float = START_TIMEOUT_S,
    say: Say = to_stderr,
    private: bool = False,
) -> EngineState:
    """Make an engine answer (`twinbuild engine up`); idempotent.

    An engine named by DOCKER_HOST, or on the default socket, is used as it is. Otherwise, as root
    on a Debian-like host, start the private engine (installing docker.io first if needed) and
    write ``<cache>/engine/env`` with its DOCKER_HOST. ``private`` skips the first two: the test
    session wants an engine (and a data root) of its own, whatever else answers.
    """
    paths = paths or EnginePaths.under()
    host = host or SystemHost()
    env = None if private else env_host()
    if env and env != paths.docker_host:
        if host.ping(env):
            return EngineState(docker_host=env, source="env", running=True)
        raise EngineError(
            f"DOCKER_HOST={env} does not answer; start that engine, or unset DOCKER_HOST "
            "so `twinbuild engine up` starts a private one"
        )
    pid = _private_pid(paths, host)
    if pid is not None and host.ping(paths.docker_host):
        _write_env(paths)
        return EngineState(docker_host=paths.docker_host, source="private", running=True, pid=pid)
    if pid is None and not private and host.ping(DEFAULT_HOST):
        return EngineState(docker_host=DEFAULT_HOST, source="default", running=True)
    if not (host.is_root() and host.is_debian()):
        raise EngineError(
            f"no Docker engine answers at {DEFAULT_HOST} and DOCKER_HOST is unset; start Docker "
            "or set DOCKER_HOST (twinbuild starts a private engine only as root on Debian/Ubuntu)"
        )
    if pid is not None:
        # Alive but deaf: a daemon still starting, or a hung one. Give it the start timeout.
        return _wait_answering(paths, host, pid, timeout, started=False)
    dockerd = host.which("dockerd") or _install_dockerd(host, say)
    _stop_orphaned_containerd(paths, host)
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.pidfile.unlink(missing_ok=True)
    paths.socket.unlink(missing_ok=True)
    if not paths.config.exists():
        paths.config.write_text("{}\n")
    pid = host.spawn(dockerd_argv(dockerd, paths), paths.log)
    return _wait_answering(paths, host, pid, timeout, started=True)


def _wait_answering(
    paths: EnginePaths, host: Host, pid: int, timeout: float, *, started: bool
) -> EngineState:
    deadline = host.now() + timeout
    while not host.ping(paths.docker_host):
        if not host.alive(pid):
            raise EngineError(
                f"dockerd (pid {pid}) exited before {paths.docker_host} answered; "
                f"log {paths.log}: {_log_tail(paths)}"
            )
        if host.now() >= deadline:
            stop_pid(host, pid, STOP_TIMEOUT_S, "dockerd")
            raise EngineError(
                f"dockerd (pid {pid}) did not answer on {paths.docker_host} within {timeout:.0f}s "
                f"and was stopped; log {paths.log}: {_log_tail(paths)}"
            )
        host.sleep(0.2)
    _write_env(paths)
    return EngineState(
        docker_host=paths.docker_host, source="private", running=True, started=started, pid=pid
    )


def _stop_orphaned_containerd(paths: EnginePaths, host: Host) -> None:
    """Stop the containerd a dead dockerd of ours left behind.

    dockerd starts its own containerd under the exec root. When dockerd is killed, that containerd
    lives on, and a new dockerd waits for it in vain ("timeout waiting for containerd to start").
    Only a process whose command line names our exec root is touched.
    """
    pidfile = paths.exec_root / "containerd" / "containerd.pid"
    pid = read_pid(pidfile)
    if pid is None:
        return
    if (
        host.alive(pid)
        and "containerd" in (cmdline := host.cmdline(pid))
        and (str(paths.exec_root) in cmdline)
    ):
        stop_pid(host, pid, STOP_TIMEOUT_S, "containerd")
    pidfile.unlink(missing_ok=True)


def _write_env(paths: EnginePaths) -> None:
    # `export` so that `. <cache>/engine/env` reaches the docker CLI run from that shell.
    paths.env_file.write_text(f"export DOCKER_HOST={paths.docker_host}\n")


def down(
    paths: EnginePaths | None = None,
    host: Host | None = None,
    *,
    timeout: float = STOP_TIMEOUT_S,
) -> EngineState:
    """Stop the private engine by its pidfile's pid (`twinbuild engine down`); idempotent.

    SIGTERM, then SIGKILL after ``timeout`` seconds. Engines twinbuild did not start are never
    touched. Images stay in the data root for the next `up`.
    """
    paths = paths or EnginePaths.under()
    host = host or SystemHost()
    pid = _private_pid(paths, host)
    if pid is None:
        paths.pidfile.unlink(missing_ok=True)
        paths.env_file.unlink(missing_ok=True)
        return EngineState(docker_host=paths.docker_host, source="private", running=False)
    stop_pid(host, pid, timeout, "dockerd")
    paths.pidfile.unlink(missing_ok=True)
    paths.env_file.unlink(missing_ok=True)
    return EngineState(
        docker_host=paths.docker_host, source="private", running=False, stopped=True, pid=pid
    )
