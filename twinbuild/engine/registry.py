"""twinbuild's private OCI registry (`twinbuild registry up|down|status|env`), or a real one.

The private registry is Debian's ``docker-registry`` (the CNCF distribution registry) run as a
plain process, like the private dockerd: its own config, storage root, pidfile and log under
``<cache>/registry``, listening on 127.0.0.1 only, stopped by its pid. Docker trusts 127.0.0.0/8 as
an insecure registry by default, so the engine pushes to it and pulls by digest with no TLS setup.

``--registry HOST`` or ``TWINBUILD_REGISTRY`` names a real registry instead; then nothing is
started and the engine's own credentials are used. This module talks HTTP to ``/v2/`` only to ask
whether a registry answers; the registry protocol itself lives in ``twinbuild.ship.oci``.

Where images live in a registry is ``engine/registry_names.py``'s; what every registry client
shares (the request deadline, loopback) ``util/exchange.py``'s.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from twinbuild.engine.host import (
    Host,
    SystemHost,
    apt_install,
    own_pid,
    read_port,
    stop_pid,
)
from twinbuild.engine.registry_names import check_address
from twinbuild.errors import ConfigError, EngineError
from twinbuild.util import environ
from twinbuild.util.paths import cache_root

ENV_VAR = "TWINBUILD_REGISTRY"
PORT_ENV_VAR = "TWINBUILD_REGISTRY_PORT"
PING_TIMEOUT_S = 2.0
DEFAULT_PORT = 5000
LISTEN = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 8
PROGRAM = "docker-registry"

CONFIG = """\
# Written by `twinbuild registry up`; edits are overwritten on the next start.
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: {data}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: {listen}:{port}
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryPaths:
    """Where the private registry keeps its state (all under ``<cache>/registry``)."""

    root: Path

    @classmethod
    def under(cls, cache: Path | None = None) -> RegistryPaths:
        return cls(root=(cache if cache is not None else cache_root()) / "registry")

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def config(self) -> Path:
        return self.root / "config.yml"

    @property
    def pidfile(self) -> Path:
        return self.root / "registry.pid"

    @property
    def portfile(self) -> Path:
        return self.root / "registry.port"

    @property
    def log(self) -> Path:
        return self.root / "registry.log"

    @property
    def env_file(self) -> Path:
        return self.root / "env"


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryState:
    """Which registry twinbuild pushes to and whether it answers."""

    address: str  # host[:port], as image references name it
    private: bool
    running: bool
    started: bool = False
    stopped: bool = False
    pid: int | None = None
    storage: Path | None = None

    def describe(self) -> str:
        if not self.private:
            where = f"{self.address} ({ENV_VAR} or --registry)"
            if self.running:
                return f"using the registry {where}; twinbuild did not start it"
            return f"the registry {where} does not answer on /v2/"
        if self.stopped:
            return f"private registry stopped (pid {self.pid}); {self.address} is gone"
        if not self.running:
            return f"private registry is not running ({self.address}); run `twinbuild registry up`"
        verb = "started" if self.started else "already running"
        return f"private registry {verb} (pid {self.pid}) at {self.address}, storage {self.storage}"

    def export_line(self) -> str:
        return f"export {ENV_VAR}={self.address}"


class RegistryHost(Host, Protocol):
    """The machine, plus the two questions only the registry asks (tests pass a fake)."""

    def ping_registry(self, address: str) -> bool: ...
    def port_free(self, port: int) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryOptions:
    """`twinbuild registry ACTION [--port N]`."""

    action: Literal["up", "down", "status", "env"]
    port: int | None = None


def ping(address: str, timeout: float = PING_TIMEOUT_S) -> bool:
    """True when ``GET /v2/`` answers like a registry (200, or 401 asking for credentials), all
    of it within ``timeout``: a registry that stalls or drips is not running."""
    # http.client and ssl load only when a registry is asked something
    from twinbuild.util.exchange import Clock, Request, exchange, loopback

    local = loopback(address)
    host = address.split("/", 1)[0]
    request = Request(
        method="GET", url=f"{'http' if local else 'https'}://{host}/v2/", what="ping",
        limit=64 << 10, loopback=local,
    )  # fmt: skip
    try:
        answer = exchange(request, Clock(timeout=timeout, budget=timeout))
    except EngineError:
        return False
    return answer.status in (200, 401) and bool(answer.header("Docker-Distribution-Api-Version"))


def port_free(port: int, listen: str = LISTEN) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the registry itself binds: connections of a stopped registry in TIME_WAIT do not
        # make the port busy, a listening socket does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((listen, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


class SystemRegistryHost(SystemHost):
    """The real machine."""

    def ping_registry(self, address: str) -> bool:
        return ping(address)

    def port_free(self, port: int) -> bool:
        return port_free(port)


def _private_pid(paths: RegistryPaths, host: RegistryHost) -> int | None:
    return own_pid(paths.pidfile, PROGRAM, host)


def _port(paths: RegistryPaths, port: int | None) -> int:
    if port is not None:
        return port
    env = environ.whole(PORT_ENV_VAR, low=1, high=65535, hint="set a TCP port, e.g. 5000")
    if env is not None:
        return env
    return read_port(paths.portfile) or DEFAULT_PORT


def private_address(paths: RegistryPaths | None = None) -> str:
    """Where the private registry listens: the port it was started on, else the one `up` picks."""
    paths = paths or RegistryPaths.under()
    return f"{LISTEN}:{read_port(paths.portfile) or _port(paths, None)}"


def resolve(flag: str | None = None, paths: RegistryPaths | None = None) -> str:
    """The registry to push to: ``--registry``, else ``$TWINBUILD_REGISTRY``, else the private one.

    The private one must be running (``twinbuild registry up``); a real one is used as it is.
    """
    chosen = flag or environ.text(ENV_VAR) or ""
    if chosen:
        return check_address(chosen, "--registry" if flag else ENV_VAR)
    paths = paths or RegistryPaths.under()
    state = status(paths)
    if not state.running:
        raise EngineError(
            f"no registry: the private one is not running ({state.address}); run "
            f"`twinbuild registry up`, or name a real one with --registry HOST or {ENV_VAR}"
        )
    return state.address


def cache_registry(
    flag: str | None = None,
    paths: RegistryPaths | None = None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The registry a build takes its cache from: like `resolve`, but None when there is none.

    None in GitHub Actions too: every job that pushes (a validation branch's build job runs that
    branch's code with write access) could have written the cache, so a CI build reads none.
    """
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") == "true":
        return None
    if flag or env.get(ENV_VAR):
        return resolve(flag, paths)
    state = status(paths)
    return state.address if state.running else None


def status(paths: RegistryPaths | None = None, host: RegistryHost | None = None) -> RegistryState:
    """Which registry `resolve()` picks without a flag, and whether it answers."""
    paths = paths or RegistryPaths.under()
    host = host or SystemRegistryHost()
    env = environ.text(ENV_VAR) or ""
    address = private_address(paths)
    if env and check_address(env, ENV_VAR) != address:
        return RegistryState(address=env, private=False, running=host.ping_registry(env))
    pid = _private_pid(paths, host)
    running = pid is not None and host.ping_registry(address)
    return RegistryState(
        address=address, private=True, running=running, pid=pid, storage=paths.data
    )


def _install(host: RegistryHost) -> str:
    """``apt-get install docker-registry``, with ``apt-get update`` first only when it is needed."""
    apt_install(host, PROGRAM, update_first=False)
    found = host.which(PROGRAM)
    if found is None:
        raise EngineError(f"apt installed {PROGRAM} but it is not on PATH; check /usr/bin")
    return found


def _log_tail(paths: RegistryPaths) -> str:
    try:
        lines = paths.log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in lines[-LOG_TAIL_LINES:]) or "(empty log)"


def up(
    paths: RegistryPaths | None = None,
    host: RegistryHost | None = None,
    *,
    port: int | None = None,
    timeout: float = START_TIMEOUT_S,
) -> RegistryState:
    """Start the private registry (`twinbuild registry up`); idempotent.

    Installs ``docker-registry`` with apt where it is missing (root on Debian/Ubuntu). A port
    already taken by something else is refused with the flag that picks another.
    """
    paths = paths or RegistryPaths.under()
    host = host or SystemRegistryHost()
    pid = _private_pid(paths, host)
    if pid is not None:
        running_port = read_port(paths.portfile) or DEFAULT_PORT
        address = f"{LISTEN}:{running_port}"
        if port is not None and port != running_port:
            raise ConfigError(
                f"the private registry already runs on {address} (pid {pid}); run "
                f"`twinbuild registry down` before `registry up --port {port}`"
            )
        return _wait_answering(paths, host, pid, address, timeout, started=False)
    chosen = _port(paths, port)
    address = f"{LISTEN}:{chosen}"
    if not host.port_free(chosen):
        raise ConfigError(
            f"{address} is already in use by another program; pick a free port with "
            f"`twinbuild registry up --port N` (or {PORT_ENV_VAR}=N)"
        )
    program = host.which(PROGRAM)
    if program is None:
        if not (host.is_root() and host.is_debian()):
            raise EngineError(
                f"{PROGRAM} is not installed; install Debian's {PROGRAM} package (twinbuild "
                f"installs it only as root on Debian/Ubuntu), or use a real registry with {ENV_VAR}"
            )
        program = _install(host)
    paths.data.mkdir(parents=True, exist_ok=True)
    paths.config.write_text(CONFIG.format(data=paths.data, listen=LISTEN, port=chosen))
    paths.pidfile.unlink(missing_ok=True)
    pid = host.spawn([program, "serve", str(paths.config)], paths.log)
    # The registry writes no pidfile of its own: ours is written as soon as it is spawned.
    paths.pidfile.write_text(f"{pid}\n")
    paths.portfile.write_text(f"{chosen}\n")
    return _wait_answering(paths, host, pid, address, timeout, started=True)


def _wait_answering(
    paths: RegistryPaths,
    host: RegistryHost,
    pid: int,
    address: str,
    timeout: float,
    *,
    started: bool,
) -> RegistryState:
    deadline = host.now() + timeout
    while not host.ping_registry(address):
        if not host.alive(pid):
            paths.pidfile.unlink(missing_ok=True)
            raise EngineError(
                f"{PROGRAM} (pid {pid}) exited before {address} answered; "
                f"log {paths.log}: {_log_tail(paths)}"
            )
        if host.now() >= deadline:
            stop_pid(host, pid, STOP_TIMEOUT_S, PROGRAM)
            paths.pidfile.unlink(missing_ok=True)
            raise EngineError(
                f"{PROGRAM} (pid {pid}) did not answer on {address} within {timeout:.0f}s and was "
                f"stopped; log {paths.log}: {_log_tail(paths)}"
            )
        host.sleep(0.1)
    paths.env_file.write_text(f"{ENV_VAR}={address}\n")
    return RegistryState(
        address=address, private=True, running=True, started=started, pid=pid, storage=paths.data
    )


def down(
    paths: RegistryPaths | None = None,
    host: RegistryHost | None = None,
    *,
    timeout: float = STOP_TIMEOUT_S,
) -> RegistryState:
    """Stop the private registry by its pid (`twinbuild registry down`); idempotent.

    Its storage stays for the next `up`; a registry twinbuild did not start is never touched.
    """
    paths = paths or RegistryPaths.under()
    host = host or SystemRegistryHost()
    address = private_address(paths)
    pid = _private_pid(paths, host)
    paths.env_file.unlink(missing_ok=True)
    if pid is None:
        paths.pidfile.unlink(missing_ok=True)
        return RegistryState(address=address, private=True, running=False, storage=paths.data)
    stop_pid(host, pid, timeout, PROGRAM)
    paths.pidfile.unlink(missing_ok=True)
    return RegistryState(
        address=address, private=True, running=False, stopped=True, pid=pid, storage=paths.data
    )


def run(options: RegistryOptions) -> RegistryState:
    """`twinbuild registry ACTION`: ``env`` and ``status`` only look."""
    if options.action == "up":
        return up(port=options.port)
    if options.action == "down":
        return down()
    return status()
