"""Private registry provisioning decisions, with a fake host: no process started, no port opened."""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit import fake_host
from twinbuild.engine import registry
from twinbuild.engine.registry import RegistryPaths
from twinbuild.errors import ConfigError, EngineError


@dataclass
class FakeHost(fake_host.FakeHost):
    """The machine as the registry sees it: ports that may be taken; a spawn listens at the
    address its config names, unless it dies."""

    PROGRAM = ("docker-registry", "/usr/bin/docker-registry")

    binaries: dict[str, str] = field(default_factory=lambda: dict([FakeHost.PROGRAM]))
    busy: set[int] = field(default_factory=set)
    next_pid: int = 5151

    def ping(self, docker_host: str) -> bool:
        raise AssertionError("the registry never pings an engine")

    def ping_registry(self, address: str) -> bool:
        return address in self.answering

    def port_free(self, port: int) -> bool:
        return port not in self.busy

    def spawn(self, argv: Sequence[str], log: Path) -> int:
        pid = super().spawn(argv, log)
        log.write_text('level=fatal msg="listen tcp 127.0.0.1:5000: bind: address in use"\n')
        if not self.die_after_spawn:
            addr = Path(argv[2]).read_text().split("addr: ", 1)[1].split()[0]
            self.answering.add(addr)
        return pid


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(registry.ENV_VAR, raising=False)
    monkeypatch.delenv(registry.PORT_ENV_VAR, raising=False)


def test_up_writes_its_own_config_and_listens_on_loopback_only(tmp_path: Path) -> None:
    paths, host = RegistryPaths.under(tmp_path), FakeHost()
    state = registry.up(paths, host, port=5123)
    assert state.started
    assert state.running
    assert state.private
    assert state.address == "127.0.0.1:5123"
    assert host.spawned == [["/usr/bin/docker-registry", "serve", str(paths.config)]]
    config = paths.config.read_text()
    assert "addr: 127.0.0.1:5123\n" in config
    assert f"rootdirectory: {paths.data}\n" in config
    assert paths.pidfile.read_text() == "5151\n"
    assert paths.env_file.read_text() == "TWINBUILD_REGISTRY=127.0.0.1:5123\n"
    assert state.export_line() == "export TWINBUILD_REGISTRY=127.0.0.1:5123"
    again = registry.up(paths, host)
    assert not again.started
    assert again.pid == 5151
    assert again.address == "127.0.0.1:5123"
    assert len(host.spawned) == 1


def test_busy_port_is_refused_naming_the_flag_and_nothing_starts(tmp_path: Path) -> None:
    paths, host = RegistryPaths.under(tmp_path), FakeHost(busy={5000})
    with pytest.raises(ConfigError) as info:
        registry.up(paths, host)
    assert str(info.value) == (
        "127.0.0.1:5000 is already in use by another program; pick a free port with "
        "`twinbuild registry up --port N` (or TWINBUILD_REGISTRY_PORT=N)"
    )
    assert host.spawned == []
    assert not paths.pidfile.exists()


def test_port_from_env_and_a_bad_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(registry.PORT_ENV_VAR, "5301")
    assert registry.up(RegistryPaths.under(tmp_path), FakeHost()).address == "127.0.0.1:5301"
    monkeypatch.setenv(registry.PORT_ENV_VAR, "http")
    with pytest.raises(
        ConfigError, match="TWINBUILD_REGISTRY_PORT: 'http' is not a whole number from 1 to 65535"
    ):
        registry.up(RegistryPaths.under(tmp_path / "other"), FakeHost())


def test_installs_with_apt_update_only_when_install_alone_fails(tmp_path: Path) -> None:
    install = (
        "apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=600 docker-registry"
    )
    host = FakeHost(binaries={})
    registry.up(RegistryPaths.under(tmp_path), host)
    assert host.ran == [install.split()]
    host = FakeHost(binaries={}, run_results={install: (100, "E: Unable to locate package")})
    with pytest.raises(EngineError, match="apt-get install -y --no-install-recommends"):
        registry.up(RegistryPaths.under(tmp_path / "b"), host)
    assert host.ran == [install.split(), ["apt-get", "update"], install.split()]


def test_not_root_without_the_program_says_what_to_do(tmp_path: Path) -> None:
    host = FakeHost(binaries={}, root=False)
    with pytest.raises(EngineError, match="docker-registry is not installed"):
        registry.up(RegistryPaths.under(tmp_path), host)
    assert host.ran == []


def test_a_registry_that_dies_at_start_shows_its_log(tmp_path: Path) -> None:
    paths, host = RegistryPaths.under(tmp_path), FakeHost(die_after_spawn=True)
    with pytest.raises(EngineError) as info:
        registry.up(paths, host)
    assert "exited before 127.0.0.1:5000 answered" in str(info.value)
    assert "bind: address in use" in str(info.value)
    assert not paths.pidfile.exists()


def test_down_stops_only_our_pid_and_keeps_the_storage(tmp_path: Path) -> None:
    paths, host = RegistryPaths.under(tmp_path), FakeHost()
    registry.up(paths, host)
    (paths.data / "docker").mkdir()
    state = registry.down(paths, host)
    assert state.stopped
    assert host.signals == [(5151, signal.SIGTERM)]
    assert (paths.data / "docker").is_dir()
    assert not paths.pidfile.exists()
    assert not paths.env_file.exists()
    # A pidfile naming someone else's process (pid reused) is never signalled.
    paths.pidfile.write_text("77\n")
    host.procs[77] = "/usr/sbin/sshd -D"
    assert not registry.down(paths, host).stopped
    assert host.signals == [(5151, signal.SIGTERM)]


def test_up_on_another_port_while_running_is_refused(tmp_path: Path) -> None:
    paths, host = RegistryPaths.under(tmp_path), FakeHost()
    registry.up(paths, host)
    with pytest.raises(ConfigError, match=re.escape("already runs on 127.0.0.1:5000")):
        registry.up(paths, host, port=5001)


def test_resolve_prefers_the_flag_then_the_env_then_the_private_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = RegistryPaths.under(tmp_path)
    with pytest.raises(EngineError, match="run `twinbuild registry up`, or name a real one"):
        registry.resolve(None, paths)
    monkeypatch.setenv(registry.ENV_VAR, "registry.example")
    assert registry.resolve(None, paths) == "registry.example"
    assert registry.resolve("registry.example:5000", paths) == "registry.example:5000"
    with pytest.raises(
        ConfigError, match=re.escape("--registry='https://registry.example': expected a registry")
    ):
        registry.resolve("https://registry.example", paths)
    monkeypatch.setenv(registry.ENV_VAR, "registry.example/acme")
    assert registry.resolve(None, paths) == "registry.example/acme"
    monkeypatch.setenv(registry.ENV_VAR, "registry.example/acme/images:latest")
    with pytest.raises(
        ConfigError, match=re.escape("TWINBUILD_REGISTRY='registry.example/acme/images:latest'")
    ):
        registry.resolve(None, paths)


def test_status_of_a_real_registry_says_twinbuild_did_not_start_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(registry.ENV_VAR, "registry.example")
    host = FakeHost(answering={"registry.example"})
    state = registry.status(RegistryPaths.under(tmp_path), host)
    assert not state.private
    assert state.running
    assert state.describe() == (
        "using the registry registry.example (TWINBUILD_REGISTRY or --registry); "
        "twinbuild did not start it"
    )
