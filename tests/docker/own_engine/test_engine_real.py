"""The real thing: start a private engine of our own, put the base image in it, stop it.

Its engine lives in a fresh folder (its own socket and data root), apart from the session's, since
one test here kills it; so this module runs beside the session engine's tests (tests/xdist_docker.py),
and every test here uses the ``private`` fixture. The base is the one every Docker test uses (the mini project's [local]
packages), from the root filesystem saved in the user's cache: mmdebstrap runs only the first
time on a machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.helpers import MINI, edit, mini_project, unscrubbed
from tests.session_engine import remove, scratch, tidy
from twinbuild.engine import base, client, daemon
from twinbuild.engine.daemon import EnginePaths, EngineState
from twinbuild.engine.host import run_command
from twinbuild.engine.wire import ping
from twinbuild.manifest.loader import load
from twinbuild.util.paths import cache_root

pytestmark = pytest.mark.docker

LOCAL = load(MINI / "pins/manifest.toml").local
SUITE, MIRROR, PACKAGES = LOCAL.suite, LOCAL.mirror, list(LOCAL.packages)


class Private:
    def __init__(
        self, cache: Path, paths: EnginePaths, state: EngineState, user_cache: Path
    ) -> None:
        self.cache, self.paths, self.state = cache, paths, state
        self.user_cache = user_cache  # wheels and saved base root filesystems live on there


@pytest.fixture(scope="module")
def private() -> Iterator[Private]:
    if os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        pytest.skip("starts a private dockerd: needs root on Debian/Ubuntu")
    cache = scratch("tb-")
    paths = EnginePaths.under(cache)
    user_cache = cache_root()
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DOCKER_HOST", raising=False)  # CI exports the shared engine's; not this one
        mp.setenv("TWINBUILD_CACHE", str(cache))
        if ping(daemon.DEFAULT_HOST):
            pytest.skip("an engine answers on the default socket; up() would use it")
        state = daemon.up(paths)
        try:
            yield Private(cache, paths, state, user_cache)
        finally:
            daemon.down(paths)
            remove(cache)


def test_up_starts_then_finds_it_running(private: Private) -> None:
    assert private.state.started is True
    assert private.state.docker_host == f"unix://{private.paths.socket}"
    assert (
        private.paths.env_file.read_text() == f"export DOCKER_HOST=unix://{private.paths.socket}\n"
    )
    again = daemon.up(private.paths)
    assert (again.started, again.pid) == (False, private.state.pid)
    assert daemon.docker_host(private.paths) == private.state.docker_host


def test_connect_and_info(private: Private) -> None:
    with client.connect() as eng:
        info = eng.info()
    assert info.docker_host == private.state.docker_host
    assert info.os_type == "linux"
    assert info.server_version


def test_base_builds_then_reuses(private: Private) -> None:
    ran: list[str] = []

    def run(argv: Sequence[str]) -> tuple[int, str]:
        ran.append(unscrubbed(argv)[1][0])
        return run_command(argv)

    with client.connect(private.state.docker_host) as eng:
        # Nothing is asked of mmdebstrap before ensure_base: on a fresh machine the session
        # engine's worker may still be installing it, under the cache's base lock.
        before = set((private.user_cache / "base").glob("*.tar"))
        first = base.ensure_base(
            eng,
            suite=SUITE,
            mirror=MIRROR,
            packages=PACKAGES,
            arch="linux/amd64",
            cache=private.user_cache,
            run=run,
        )
        assert first.built is True  # this engine's data root is new: the image was not there
        saved = base.saved_rootfs(private.user_cache, first.inputs_hash)
        # On a machine with no saved base, the session engine's worker may be making it while
        # this test waits for the cache's base lock; then this engine imports what it saved.
        if first.saved is not None:  # imported from the saved root filesystem: no mmdebstrap
            assert "mmdebstrap" not in ran
            assert first.saved == str(saved)
        else:  # the first time on this machine: mmdebstrap, and the tar is kept for next time
            assert saved not in before
            assert "mmdebstrap" in ran
            assert saved.is_file()
        assert eng.image_labels(first.tag)[base.INPUTS_LABEL] == first.inputs_hash
        assert eng.inspect_image(first.tag) is not None
        # slim, as base.SLIM says: no manuals, translations or docs, every licence kept (dpkg
        # keeps a package's symbolic links there, which hold no bytes)
        with tarfile.open(saved) as tar:
            files = [m.name for m in tar.getmembers() if m.isfile()]
        assert files, saved
        for gone in ("./usr/share/man/", "./usr/share/info/", "./usr/share/doc/"):
            kept = [f for f in files if f.startswith(gone) and not f.endswith("/copyright")]
            kept = [f for f in kept if f != "./usr/share/info/dir"]  # install-info's index
            assert not kept, kept[:5]
        assert "./usr/share/doc/git/copyright" in files
        alias = "./usr/share/locale/locale.alias"  # kept, for when a recipe installs locales
        assert not [f for f in files if f.startswith("./usr/share/locale/") and f != alias]
        # made in a scrubbed environment: the maintainer scripts' bytecode is not under the
        # PYTHONPYCACHEPREFIX that nox -s tests gives this process (it was, in FORMAT 3)
        if sys.pycache_prefix:
            assert not [f for f in files if f.startswith(f".{sys.pycache_prefix}/")]
        assert "./usr/lib/python3.11/__pycache__/os.cpython-311.pyc" in files

        ran.clear()
        second = base.ensure_base(
            eng,
            suite=SUITE,
            mirror=MIRROR,
            packages=PACKAGES,
            arch="linux/amd64",
            cache=private.user_cache,
            run=run,
        )
        assert second.built is False
        assert "mmdebstrap" not in ran
        assert second.image_id == first.image_id
        assert second.total_s < 5

        result = eng.run_container(
            first.tag, ["sh", "-c", "python3 -V && git --version && cat /proc/net/dev"]
        )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Python 3.11.")
    # network "none": loopback is the only interface
    interfaces = [line.split(":")[0].strip() for line in result.output.splitlines() if ":" in line]
    assert interfaces[-1:] == ["lo"]
    assert "eth0" not in result.output


def test_exec_in_a_started_container(private: Private) -> None:
    with client.connect(private.state.docker_host) as eng:
        (image,) = eng.images_by_label(base.INPUTS_LABEL)
        cid = eng.start_container(image.id)
        try:
            result = eng.exec(cid, ["python3", "-c", "print(6 * 7)"])
        finally:
            eng.remove_container(cid)
    assert (result.exit_code, result.output) == (0, "42\n")


def test_a_kept_data_root_starts_with_no_containers_and_only_the_bases_tags(
    private: Private,
) -> None:
    """What the session engine does to the data root it keeps between sessions before the tests
    see it (tests/session_engine.py): a container and a tag a crashed session left go; the base
    stays tagged."""
    host = private.state.docker_host
    with client.connect(host) as eng:
        made = base.ensure_base(
            eng, suite=SUITE, mirror=MIRROR, packages=PACKAGES, arch="linux/amd64",
            cache=private.user_cache,
        )  # fmt: skip
        eng.tag(made.image_id, "twinbuild-ci/left:over")
        cid = eng.start_container(made.image_id)
        assert eng.api.containers(all=True, quiet=True)
    tidy(host)
    with client.connect(host) as eng:
        assert eng.api.containers(all=True, quiet=True) == [], cid
        assert eng.inspect_image("twinbuild-ci/left:over") is None
        assert eng.inspect_image(made.tag) is not None


def _light_project(tmp_path: Path) -> Path:
    """The mini project without its two heavy ROCm wheels (numba, numpy): what these tests prove
    (an engine killed mid-build, prune) does not depend on them, and a fresh engine would
    install them for a minute of the run."""
    root = mini_project(tmp_path)
    manifest = root / "pins/manifest.toml"
    text = manifest.read_text()
    start, end = text.index("[pins.numba]\n"), text.index("[pins.megatron-lm]\n")
    manifest.write_text(text[:start] + text[end:])
    return root


def test_engine_killed_mid_build_tags_nothing(private: Private, tmp_path: Path) -> None:
    """A real fault: dockerd dies (SIGKILL) during a build. The build fails with exit 3 and the
    image the tag named before is still the one it names."""
    root = _light_project(tmp_path)
    env = {**os.environ, "DOCKER_HOST": private.state.docker_host,
           "TWINBUILD_CACHE": str(private.user_cache)}  # fmt: skip
    argv = [sys.executable, "-m", "twinbuild", "build", "--variant", "rocm", "--root", str(root),
            "--manifest", str(root / "pins/manifest.toml")]  # fmt: skip
    good = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert good.returncode == 0, good.stderr
    with client.connect(private.state.docker_host) as eng:
        before = (eng.inspect_image("twinbuild/rocm:local-amd64") or {}).get("Id")
    assert before

    marker = f"sleep 120 # {uuid.uuid4().hex}"
    edit(root / "images/local/Dockerfile", "FROM common AS rocm\n",
         f"FROM common AS rocm\nRUN {marker}\n")  # fmt: skip
    build = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    log = root / "build/local/rocm/amd64/build.log"
    deadline = time.monotonic() + 180
    while not (log.exists() and marker in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert private.state.pid is not None
    os.kill(private.state.pid, signal.SIGKILL)
    _, err = build.communicate(timeout=120)
    assert build.returncode == 3, err
    assert "buildx stopped during the build of rocm (linux/amd64) with no step failing" in err
    assert "nothing was tagged" in err

    private.state = daemon.up(private.paths)  # a fresh daemon on the same data root
    with client.connect(private.state.docker_host) as eng:
        assert (eng.inspect_image("twinbuild/rocm:local-amd64") or {}).get("Id") == before


def test_prune_removes_the_untagged_previous_build(private: Private, tmp_path: Path) -> None:
    """In this module's own engine: prune removes every untagged twinbuild image, which in the
    session's engine would include other tests' images."""
    root = _light_project(tmp_path)
    env = {**os.environ, "DOCKER_HOST": private.state.docker_host,
           "TWINBUILD_CACHE": str(private.user_cache)}  # fmt: skip
    recipe = root / "images/local/Dockerfile"
    ids = []
    for marker in (uuid.uuid4().hex, uuid.uuid4().hex):  # a layer only this build has
        edit(recipe, "FROM common AS rocm\n", f"FROM common AS rocm\nRUN echo {marker} > /x\n")
        built = subprocess.run(
            [sys.executable, "-m", "twinbuild", "build", "--variant", "rocm", "--root", str(root)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr
        with client.connect(private.state.docker_host) as eng:
            ids.append(str((eng.inspect_image("twinbuild/rocm:local-amd64") or {})["Id"]))
        edit(recipe, f"RUN echo {marker} > /x\n", "")
    pruned = subprocess.run(
        [sys.executable, "-m", "twinbuild", "prune", "--keep", "0"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert pruned.returncode == 0, pruned.stderr
    match = re.fullmatch(
        r"prune: removed (\d+) untagged twinbuild images, kept 0; reclaimed (\d+\.\d) MiB\n",
        pruned.stdout,
    )
    assert match, pruned.stdout
    assert int(match[1]) >= 1
    with client.connect(private.state.docker_host) as eng:
        assert eng.inspect_image(ids[0]) is None  # the first build, untagged by the second: gone
        assert eng.inspect_image("twinbuild/rocm:local-amd64") is not None  # tagged: never pruned
        assert eng.inspect_image(ids[1]) is not None


def test_down_stops_it(private: Private) -> None:
    stopped = daemon.down(private.paths)
    assert (stopped.stopped, stopped.pid) == (True, private.state.pid)
    assert not private.paths.pidfile.exists()
    assert ping(private.state.docker_host) is False
    assert daemon.down(private.paths).stopped is False
