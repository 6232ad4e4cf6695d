"""The engine's own push and pull end at twinbuild's deadline, and the engine stops with them.

Before, ``TWINBUILD_REGISTRY_TIMEOUT=5 twinbuild push`` against a registry that accepted the
connection and never answered ran 130.8 s and ended in a traceback (urllib3's ReadTimeoutError
from the SDK's 120 s socket timeout); a redirect loop or an endless chunked body held it 61 s.
Here the real CLI pushes (and pulls, through ``smoke --image``) through the session's real
engine to a registry on 127.0.0.1 (tests/fake_registry.py) that stalls, drips its status line,
redirects to itself or streams a body that never ends, with a 3 s deadline and every attack
lasting far longer (60 s and more). Each must end in exit 3 with one line naming the registry,
well within 40 s; and when the attack is then called off, the engine must not go on: no upload
started, no manifest written, no image pulled. Closing the stream cancelled its operation.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fake_registry as fake
from tests.helpers import mini_project
from tests.session_registry import SessionRegistry
from twinbuild.engine.client import Engine, connect

pytestmark = pytest.mark.docker

DEADLINE = 3  # TWINBUILD_REGISTRY_TIMEOUT
BOUND = 40.0  # the command must end well within this (every attack lasts 60 s and more)
QUIET = 15.0  # after the attack is called off: the engine's 5 s retry back-off, and a push
ATTACKS: dict[str, fake.Attack] = {
    "stall": fake.stall,
    "drip": fake.drip(0.5, headers_first=False),
    "loop": fake.loop,
    "endless": fake.endless(),
}


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-file image in the engine (no base needed), removed at the end."""
    folder = tmp_path_factory.mktemp("probe")
    data = b"probe\n" * 4096
    with tarfile.open(folder / "rootfs.tar", "w") as tar:
        info = tarfile.TarInfo("probe.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with connect() as engine:
        image_id = engine.import_rootfs(
            folder / "rootfs.tar", arch="linux/amd64", cmd=("/probe.txt",)
        )
        try:
            yield image_id
        finally:  # with every tag a test gave it
            engine.remove_image(image_id, force=True)


@pytest.fixture
def engine() -> Iterator[Engine]:
    with connect() as found:
        yield found


def _released(registry: fake.FakeRegistry) -> list[str]:
    """The attack called off once the command has ended: every answer held or dripping ends, and
    the registry serves normally from now on. An engine still pushing or pulling would retry now
    (after its 5 s back-off) and succeed; a cancelled one sends nothing more but, at most, the
    rest of the request that was under way (dockerd 20.10 cannot interrupt a registry request in
    flight: its client sends them without the operation's context). What it sent meanwhile."""
    before = len(registry.seen)
    registry.attacks.clear()
    registry.stop.set()
    time.sleep(QUIET)
    return registry.seen[before:]


def _cli(root: Path, tmp: Path, *args: str) -> tuple[int, str]:
    env = {
        **os.environ,
        "TWINBUILD_REGISTRY_TIMEOUT": str(DEADLINE),
        "DOCKER_CONFIG": str(tmp / "docker-config"),  # no stored login
    }
    for var in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "TWINBUILD_REGISTRY"):
        env.pop(var, None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "twinbuild", *args], cwd=root, env=env,
            capture_output=True, text=True, timeout=BOUND, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args[:1])} still ran after {BOUND:.0f}s")
    return proc.returncode, proc.stderr


def _one_line(code: int, err: str, registry: fake.FakeRegistry) -> str:
    assert code == 3, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("twinbuild: "), lines[0]
    assert registry.address in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_push_ends_at_the_deadline_and_the_engine_stops(
    attack: str, probe: str, tmp_path: Path
) -> None:
    root = mini_project(tmp_path)
    record = root / "build/local/cuda/amd64/image.json"
    record.parent.mkdir(parents=True)
    record.write_text(f'{{"image_id": "{probe}"}}\n')
    with fake.serving() as registry:
        registry.attacks["POST /v2/twinbuild-ci/cuda/blobs/uploads/"] = ATTACKS[attack]
        code, err = _cli(
            root, tmp_path, "push", "--variant", "cuda", "--arch", "linux/amd64",
            "--registry", registry.address,
        )  # fmt: skip
        line = _one_line(code, err, registry)
        assert line.startswith(f"twinbuild: push {registry.address}/twinbuild-ci/cuda:"), line
        assert any(s.startswith("POST /v2/twinbuild-ci/cuda/blobs/") for s in registry.seen)
        after = _released(registry)
        assert not [s for s in after if s.startswith(("PUT", "POST"))], after
        assert registry.manifest_at("twinbuild-ci/cuda", "local-amd64") is None
    assert '"pushed"' not in record.read_text()  # a failed push records nothing


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_a_pull_ends_at_the_deadline_and_the_engine_stops(
    attack: str, engine: Engine, tmp_path: Path
) -> None:
    root = mini_project(tmp_path)
    with fake.serving() as registry:
        digest, _ = registry.image("twinbuild-ci/cuda", seed=attack)
        path = f"/v2/twinbuild-ci/cuda/manifests/{digest}"
        registry.attacks[f"GET {path}"] = ATTACKS[attack]
        ref = f"{registry.address}/twinbuild-ci/cuda@{digest}"
        code, err = _cli(root, tmp_path, "smoke", "--image", ref)
        line = _one_line(code, err, registry)
        assert line.startswith(f"twinbuild: pull {ref}"), line
        assert f"GET {path}" in registry.seen
        after = _released(registry)
        assert not [s for s in after if "/blobs/" in s], after
        assert engine.inspect_image(ref) is None


def test_the_deadline_names_what_sets_it(
    probe: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: the one line says what moved nothing and how to give it more time."""
    from twinbuild.errors import EngineError

    with fake.serving() as registry:
        registry.attacks["POST /v2/twinbuild-ci/probe/blobs/uploads/"] = fake.stall
        ref = f"{registry.address}/twinbuild-ci/probe:t"
        engine.tag(probe, ref)
        monkeypatch.setenv("TWINBUILD_REGISTRY_TIMEOUT", str(DEADLINE))
        with pytest.raises(EngineError) as refused:
            engine.push(ref)
        message = str(refused.value)
        assert "\n" not in message
        assert f"moved nothing for {DEADLINE}s" in message, message
        assert f"TWINBUILD_REGISTRY_TIMEOUT={DEADLINE} sets it" in message, message
        after = _released(registry)
        assert not [s for s in after if s.startswith(("PUT", "POST"))], after


def test_a_healthy_push_and_pull_go_through(
    probe: str, engine: Engine, session_registry: SessionRegistry
) -> None:
    """The same stream against Debian's real docker-registry: the digest, the layers sent, then
    again with every layer already there, and the pull by digest gives the very image."""
    ref = f"{session_registry.address}/twinbuild-ci/probe:deadline"
    engine.tag(probe, ref)
    first = engine.push(ref)
    assert first.digest.startswith("sha256:")
    assert first.ref == f"{session_registry.address}/twinbuild-ci/probe@{first.digest}"
    again = engine.push(ref)
    assert (again.digest, again.layers_sent, again.layers_present) == (first.digest, 0, 1)
    engine.remove_image(ref, prune=False)
    assert engine.pull(first.ref) == probe
