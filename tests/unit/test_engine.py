"""The engine boundary against a fake low-level client: calls made, errors mapped, exact text."""

from __future__ import annotations

import inspect
import io
import json
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import docker
import docker.errors
import pytest
import requests
import requests.exceptions

import twinbuild.engine.client
from tests.conftest import gpu_vendors
from twinbuild.engine import archive
from twinbuild.engine.api import EngineAPI, GpuAccess, ImageSummary, RunResult
from twinbuild.engine.client import Engine
from twinbuild.errors import ConfigError, EngineError

real_connect = twinbuild.engine.client.connect
real_request = twinbuild.engine.client._request  # taken before the conftest fence replaces it
HOST = "unix:///tmp/fake.sock"


class FakeAPI:
    """Canned answers for the docker.APIClient methods Engine uses; records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.images_db: dict[str, dict[str, Any]] = {}
        self.import_output = '{"status":"sha256:' + "a" * 64 + '"}\r\n'
        self.wait_error: Exception | None = None
        self.fail: dict[str, Exception] = {}
        self.closed = False

    def _call(self, name: str, args: Any) -> None:
        self.calls.append((name, args))
        if name in self.fail:
            raise self.fail[name]

    def close(self) -> None:
        self.closed = True

    def ping(self) -> bool:
        self._call("ping", None)
        return True

    def inspect_image(self, ref: str) -> dict[str, Any]:
        self._call("inspect_image", ref)
        if ref not in self.images_db:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        return self.images_db[ref]

    def images(self, all: bool, filters: dict[str, str]) -> list[dict[str, Any]]:
        self._call("images", (all, filters))
        return [
            {"Id": "sha256:1", "RepoTags": ["twinbuild/base:abc"], "Labels": {"k": "v"}, "Size": 9},
            {"Id": "sha256:2", "RepoTags": ["<none>:<none>"], "Labels": None, "Size": None},
        ]

    def import_image(self, src: Any, changes: list[str] | None) -> str:
        self._call("import_image", (type(src).__name__, src.read(), changes))
        return self.import_output

    def tag(self, image: str, repository: str, tag: str, force: bool) -> bool:
        self._call("tag", (image, repository, tag, force))
        return True

    def remove_image(self, ref: str, force: bool, noprune: bool) -> None:
        self._call("remove_image", (ref, force, noprune))

    def create_host_config(self, **kwargs: Any) -> dict[str, Any]:
        return kwargs

    def create_container(self, image: str, command: list[str], **kwargs: Any) -> dict[str, str]:
        self._call("create_container", (image, command, kwargs))
        return {"Id": "c" * 64}

    def start(self, cid: str) -> None:
        self._call("start", cid)

    def wait(self, cid: str, timeout: int) -> dict[str, int]:
        self._call("wait", (cid, timeout))
        if self.wait_error is not None:
            raise self.wait_error
        return {"StatusCode": 3}

    def logs(self, cid: str, stdout: bool, stderr: bool) -> bytes:
        return b"hello\n"

    def remove_container(self, cid: str, force: bool) -> None:
        self._call("remove_container", (cid, force))

    def exec_create(self, container: str, cmd: list[str], user: str) -> dict[str, str]:
        self._call("exec_create", (container, cmd, user))
        return {"Id": "e1"}

    def exec_start(self, exec_id: str) -> bytes:
        return b"out"

    def exec_inspect(self, exec_id: str) -> dict[str, Any]:
        return {"ExitCode": 0}

    def version(self) -> dict[str, str]:
        return {"Version": "20.10.24", "ApiVersion": "1.41", "Os": "linux", "Arch": "amd64"}

    def info(self) -> dict[str, str]:
        return {"Driver": "overlay2"}

    def _url(self, path: str) -> str:
        return "http://docker" + path

    def _get(self, url: str) -> requests.Response:
        resp = requests.Response()
        resp.status_code = 200
        resp.headers["Builder-Version"] = "2"
        return resp


@pytest.fixture
def api() -> FakeAPI:
    return FakeAPI()


@pytest.fixture
def engine(api: FakeAPI) -> Engine:
    return Engine(cast(docker.APIClient, api), HOST)


def test_unmarked_tests_cannot_connect() -> None:
    from tests.conftest import DockerBlocked

    with pytest.raises(DockerBlocked, match=r"^blocked in tests without @pytest\.mark\.docker$"):
        twinbuild.engine.client.connect()
    with pytest.raises(DockerBlocked):
        real_connect(HOST)  # the client factory is fenced too


def test_connect_names_the_socket_when_nothing_answers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(twinbuild.engine.client, "_request", real_request)  # a real socket
    host = f"unix://{tmp_path}/nobody.sock"
    with pytest.raises(EngineError) as info:
        real_connect(host)
    assert str(info.value) == (
        f"no Docker engine answers at {host}; run `twinbuild engine up` or set DOCKER_HOST"
    )


def test_connect_pings_without_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str, str]] = []

    def answer(host: str, method: str, path: str, timeout: float = 0) -> tuple[int, bytes]:
        asked.append((host, method, path))
        return 200, b"OK"

    monkeypatch.setattr(twinbuild.engine.client, "_request", answer)
    monkeypatch.setattr(twinbuild.engine.daemon, "docker_host", lambda: "unix:///run/picked.sock")
    engine = real_connect()  # _open_client stays fenced: connecting must not make an SDK client
    assert engine.docker_host == "unix:///run/picked.sock"
    assert asked == [("unix:///run/picked.sock", "GET", "/_ping")]


def test_client_factory_failure_is_an_engine_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(host: str) -> None:
        with twinbuild.engine.client._errors(f"cannot talk to the engine at {host}", host):
            raise docker.errors.DockerException("Error while fetching server API version")

    monkeypatch.setattr(twinbuild.engine.client, "_request", lambda *a, **k: (200, b"OK"))
    monkeypatch.setattr(twinbuild.engine.client, "_open_client", refuse)
    engine = real_connect(HOST)
    with pytest.raises(EngineError) as info:
        engine.info()  # the first call that needs the SDK makes the client
    assert str(info.value) == (
        "cannot talk to the engine at unix:///tmp/fake.sock: Error while fetching server API version"
    )


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (
            requests.exceptions.ConnectionError("boom"),
            "inspect image x: the engine at unix:///tmp/fake.sock does not answer "
            "(ConnectionError); run `twinbuild engine up`",
        ),
        (
            requests.exceptions.ReadTimeout("slow"),
            "inspect image x: the engine at unix:///tmp/fake.sock timed out",
        ),
        (
            docker.errors.APIError("500", explanation="driver failed\n  programming"),
            "inspect image x: driver failed programming",
        ),
        (docker.errors.DockerException("odd"), "inspect image x: odd"),
    ],
)
def test_errors_become_one_line(
    engine: Engine, api: FakeAPI, raised: Exception, message: str
) -> None:
    api.fail["inspect_image"] = raised
    with pytest.raises(EngineError) as info:
        engine.inspect_image("x")
    assert str(info.value) == message


def test_inspect_missing_image_is_none(engine: Engine, api: FakeAPI) -> None:
    assert engine.inspect_image("nope:1") is None
    assert engine.image_exists("nope:1") is False
    with pytest.raises(EngineError) as info:
        engine.image_labels("nope:1")
    assert str(info.value) == "image nope:1 is not in the engine at unix:///tmp/fake.sock"


def test_image_labels(engine: Engine, api: FakeAPI) -> None:
    api.images_db["t:1"] = {"Id": "sha256:1", "Config": {"Labels": {"a": "b"}}}
    api.images_db["t:2"] = {"Id": "sha256:2", "Config": {"Labels": None}}
    assert engine.image_labels("t:1") == {"a": "b"}
    assert engine.image_labels("t:2") == {}
    assert engine.image_exists("t:1") is True


def test_images_by_label(engine: Engine, api: FakeAPI) -> None:
    found = engine.images_by_label("org.twinbuild.base-inputs", "abc")
    assert api.calls == [("images", (False, {"label": "org.twinbuild.base-inputs=abc"}))]
    assert found == [
        ImageSummary(id="sha256:1", tags=("twinbuild/base:abc",), labels={"k": "v"}, size=9),
        ImageSummary(id="sha256:2", tags=(), labels={}, size=0),
    ]
    engine.images_by_label("k", intermediate=True)  # the bench's cleanup: build layers too
    assert api.calls[-1] == ("images", (True, {"label": "k"}))


def test_import_rootfs_loads_an_archive_naming_its_architecture(
    engine: Engine, api: FakeAPI, tmp_path: Path
) -> None:
    """`docker import` cannot say which architecture a root filesystem is for: the engine gets
    a one-layer `docker load` archive whose config names it, with the labels and command."""
    tar = tmp_path / "rootfs.tar"
    tar.write_bytes(b"TAR")

    def load(data: Any) -> list[dict[str, str]]:
        api.calls.append(("load_image", data.read()))
        return []

    api.load_image = load  # type: ignore[attr-defined]
    expected = archive.write(
        tar,
        tmp_path / "expected.tar",
        arch="linux/arm64",
        labels={"org.twinbuild.base-inputs": "ab cd"},
    )
    api.images_db[expected.image_id] = {"Id": expected.image_id}
    image_id = engine.import_rootfs(
        tar, arch="linux/arm64", labels={"org.twinbuild.base-inputs": "ab cd"}
    )
    assert image_id == expected.image_id
    (name, sent), *_ = api.calls
    assert name == "load_image"
    with tarfile.open(fileobj=io.BytesIO(sent)) as loaded:
        config = json.loads(loaded.extractfile(f"{image_id.removeprefix('sha256:')}.json").read())  # type: ignore[union-attr]
        assert loaded.extractfile("layer/layer.tar").read() == b"TAR"  # type: ignore[union-attr]
    assert (config["os"], config["architecture"]) == ("linux", "arm64")
    assert config["config"]["Labels"] == {"org.twinbuild.base-inputs": "ab cd"}
    assert config["config"]["Cmd"] == ["/bin/bash"]


def test_import_rootfs_that_the_engine_refuses_fails(
    engine: Engine, api: FakeAPI, tmp_path: Path
) -> None:
    tar = tmp_path / "rootfs.tar"
    tar.write_bytes(b"")
    api.load_image = lambda data: [{"error": "invalid tar header"}]  # type: ignore[attr-defined]
    with pytest.raises(EngineError) as info:
        engine.import_rootfs(tar, arch="linux/amd64")
    assert str(info.value) == f"load {tar}: invalid tar header"


def test_tag_splits_repository(engine: Engine, api: FakeAPI) -> None:
    engine.tag("sha256:1", "localhost:5000/twinbuild/base:abc")
    assert api.calls == [("tag", ("sha256:1", "localhost:5000/twinbuild/base", "abc", True))]
    with pytest.raises(ConfigError) as info:
        engine.tag("sha256:1", "localhost:5000/base")
    assert str(info.value) == (
        "image reference 'localhost:5000/base' needs a repository and a tag, e.g. twinbuild/base:1"
    )


def test_remove_image(engine: Engine, api: FakeAPI) -> None:
    engine.remove_image("t:1", force=True)
    engine.remove_image("t:2", prune=False)  # untag, keep the parents (the bench's tag restore)
    assert api.calls == [
        ("remove_image", ("t:1", True, False)),
        ("remove_image", ("t:2", False, True)),
    ]


def test_run_container_has_no_network_by_default(engine: Engine, api: FakeAPI) -> None:
    result = engine.run_container("img", ["true"], env={"A": "1"}, binds={"/src": "/dst"})
    assert result == RunResult(exit_code=3, output="hello\n")
    assert not result.ok
    name, (image, command, kwargs) = api.calls[0]
    assert (name, image, command) == ("create_container", "img", ["true"])
    assert kwargs["host_config"] == {
        "network_mode": "none",
        "binds": {"/src": {"bind": "/dst", "mode": "ro"}},
    }
    assert kwargs["labels"] == {"org.twinbuild.owner": "run"}
    assert kwargs["environment"] == {"A": "1"}
    assert api.calls[-1] == ("remove_container", ("c" * 64, True))


def test_run_container_refuses_other_networks(engine: Engine, api: FakeAPI) -> None:
    with pytest.raises(ConfigError) as info:
        engine.run_container("img", ["true"], network=cast(Any, "bridge"))
    assert str(info.value) == (
        "network 'bridge' is not allowed; use 'none', or 'host' where a step must reach a registry"
    )
    assert api.calls == []


def test_run_container_timeout_removes_container(engine: Engine, api: FakeAPI) -> None:
    api.wait_error = requests.exceptions.ReadTimeout("late")
    with pytest.raises(EngineError) as info:
        engine.run_container("img", ["sleep", "9"], timeout=1)
    assert str(info.value) == "run ['sleep', '9'] in img: still running after 1s; stopped"
    assert api.calls[-1] == ("remove_container", ("c" * 64, True))


def test_remove_missing_container_is_fine(engine: Engine, api: FakeAPI) -> None:
    api.fail["remove_container"] = docker.errors.NotFound("gone")
    engine.remove_container("c1")  # no error: the container is already gone
    assert api.calls == [("remove_container", ("c1", True))]
    api.fail["remove_container"] = docker.errors.APIError("500", explanation="device busy")
    with pytest.raises(EngineError) as info:
        engine.remove_container("c" * 64)
    assert str(info.value) == f"remove container {'c' * 12}: device busy"


def test_start_container_and_exec(engine: Engine, api: FakeAPI) -> None:
    cid = engine.start_container("img", network="host")
    assert api.calls[0][1][2]["host_config"] == {"network_mode": "host"}
    assert api.calls[0][1][1] == ["sleep", "infinity"]
    assert engine.exec(cid, ["python3", "-V"], user="1000") == RunResult(exit_code=0, output="out")
    assert api.calls[-1] == ("exec_create", (cid, ["python3", "-V"], "1000"))


def test_start_container_failure_removes_it(engine: Engine, api: FakeAPI) -> None:
    api.fail["start"] = docker.errors.APIError("500", explanation="no such file")
    with pytest.raises(EngineError) as info:
        engine.start_container("img")
    assert str(info.value) == "start a container from img: no such file"
    assert api.calls[-1] == ("remove_container", ("c" * 64, True))


def test_info_reads_builder_version(engine: Engine) -> None:
    info = engine.info()
    assert (info.server_version, info.api_version, info.storage_driver) == (
        "20.10.24",
        "1.41",
        "overlay2",
    )
    assert info.buildkit_default is True


def test_engine_has_every_member_of_the_protocol_with_its_signature() -> None:
    """What the rest of twinbuild calls (EngineAPI) is what Engine implements, parameter by
    parameter; a fake that only matches the protocol would otherwise drift from the real class."""
    protocol = EngineAPI
    members = {
        name
        for name, value in vars(protocol).items()
        if callable(value) and (not name.startswith("_") or name in ("__enter__", "__exit__"))
    }
    assert {"inspect_image", "tag", "run_container", "remove_container", "close"} <= members
    for name in sorted(members):
        wanted = inspect.signature(getattr(protocol, name))
        got = inspect.signature(getattr(Engine, name))
        assert list(got.parameters) == list(wanted.parameters), name
        for param, spec in wanted.parameters.items():
            assert got.parameters[param].kind == spec.kind, (name, param)
            assert got.parameters[param].default == spec.default, (name, param)
    assert isinstance(vars(protocol)["docker_host"], property)
    assert Engine(cast(docker.APIClient, FakeAPI()), "unix:///x.sock").docker_host == (
        "unix:///x.sock"
    )


FENCED = """
import pytest
import twinbuild.engine.client

def test_plain():
    twinbuild.engine.client.connect()

@pytest.mark.docker
def test_needs_docker():
    pass

@pytest.mark.gpu("rocm")
def test_needs_rocm():
    pass
"""


def _run_fenced(
    tmp_path: Path, *args: str, env: Mapping[str, str] | None = None, source: str = FENCED
) -> str:
    import shutil
    import subprocess
    import sys

    tmp_path.mkdir(exist_ok=True)
    shutil.copy(Path(__file__).parent.parent / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n  docker: d\n  gpu: g\n"
        "addopts = -p no:cacheprovider --strict-markers\n"
    )
    (tmp_path / "test_fenced.py").write_text(source)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-q", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        # the engine the outer session uses: this inner run checks the fence, not a new engine
        env={
            **os.environ,
            "PYTHONPATH": str(Path(__file__).parents[2]),
            "TWINBUILD_TEST_ENGINE": "given",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # this conftest needs none: seconds a run
            **(env or {}),
        },
    )
    return proc.stdout


def test_conftest_fences_docker_and_gpu(tmp_path: Path) -> None:
    out = _run_fenced(tmp_path, env={"TWINBUILD_NO_DOCKER": "1"})
    assert "DockerBlocked: blocked in tests without @pytest.mark.docker" in out
    assert "SKIPPED [1] test_fenced.py:8: needs a Docker engine: unset TWINBUILD_NO_DOCKER" in out
    if "amd" not in gpu_vendors():
        assert "SKIPPED [1] test_fenced.py:12: needs a amd GPU: none detected here" in out
    assert "1 failed" in out


def test_docker_tests_run_unless_the_one_switch_says_no(tmp_path: Path) -> None:
    assert "needs a Docker engine" not in _run_fenced(tmp_path, env={"TWINBUILD_NO_DOCKER": ""})
    assert "needs a Docker engine" not in _run_fenced(tmp_path, env={"TWINBUILD_NO_DOCKER": "0"})


GPU_MARKED = """
import pytest

@pytest.mark.gpu("cuda")
def test_needs_cuda():
    pass

@pytest.mark.gpu
def test_needs_any_gpu():
    pass

@pytest.mark.gpu("rocm")
def test_needs_rocm():
    pass
"""


def _fake_nvidia_smi(folder: Path, *, exit_code: int) -> dict[str, str]:
    """A PATH where ``nvidia-smi -L`` lists one H200 (exit 0) or fails (driver not loaded)."""
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\nexit {exit_code}\n")
    smi.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.mark.skipif(Path("/dev/kfd").exists(), reason="an AMD GPU here would run the rocm test")
def test_the_gpu_marker_runs_a_test_only_on_its_platforms_vendor(tmp_path: Path) -> None:
    """The marker's decision, on a machine that has an NVIDIA GPU and on one whose driver fails."""
    env = _fake_nvidia_smi(tmp_path / "bin", exit_code=0)
    out = _run_fenced(tmp_path / "nvidia", env=env, source=GPU_MARKED)
    assert "SKIPPED [1] test_fenced.py:12: needs a amd GPU: none detected here" in out
    assert "2 passed, 1 skipped" in out
    env = _fake_nvidia_smi(tmp_path / "broken-bin", exit_code=9)
    out = _run_fenced(tmp_path / "broken", env=env, source=GPU_MARKED)
    assert "SKIPPED [1] test_fenced.py:4: needs a nvidia GPU: none detected here" in out
    assert "SKIPPED [1] test_fenced.py:8: needs a GPU: none detected here" in out
    assert "3 skipped" in out


def test_gpu_containers_get_host_ipc_and_unlimited_memlock(engine: Engine, api: FakeAPI) -> None:
    """What start_container hands the SDK, turned into the Engine API's HostConfig by the real
    docker SDK: the host's IPC namespace (or a /dev/shm size) and memlock -1, as NCCL needs."""
    import docker.types

    access = GpuAccess(device_requests=({"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]},),
                       ipc_mode="host", memlock_unlimited=True)  # fmt: skip
    engine.start_container("img", gpus=access)
    kwargs = api.calls[0][1][2]["host_config"]
    config = docker.types.HostConfig(version="1.41", **kwargs)
    assert config["IpcMode"] == "host"
    assert config["Ulimits"] == [{"Name": "memlock", "Soft": -1, "Hard": -1}]
    assert "ShmSize" not in config
    engine.start_container("img", gpus=GpuAccess(shm_size="32g", memlock_unlimited=True))
    sized = docker.types.HostConfig(version="1.41", **api.calls[-2][1][2]["host_config"])
    assert (sized["ShmSize"], "IpcMode" in sized) == (32 << 30, False)
