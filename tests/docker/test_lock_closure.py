"""Issue 38's "done when", against the real thing: a real package index on 127.0.0.1
(tests/pyindex.py), the real uv behind ``twinbuild lock``, real builds of a mini project's local
image on the session engine, and ``twinbuild smoke --image`` on what they made (marked docker).

The project floats one pin (``lockproof-float``: no version, on the cuda image alone) that pulls
in a dependency, beside an exact pin on every image; every package comes from the test index.
It is locked once, built with an empty wheel cache, a newer release of the floating package is
published, and it is built again with another empty wheel cache. One module-wide world holds
the two builds; each test reads them, and a test that changes the lock does it in a copy.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MINI, image, mini_project, run_twinbuild
from tests.pyindex import PyIndex
from tests.unit.gitrepos import commit_all, git, init, isolate_git
from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.image import build_image
from twinbuild.engine.client import Engine, connect
from twinbuild.errors import EngineError, FindingsError
from twinbuild.manifest.loader import load
from twinbuild.smoke import collect

# The session engine's tests run on one xdist worker, one after another (tests/xdist_docker.py):
# they share the session engine, where image tags are global.
pytestmark = pytest.mark.docker

FLOAT = "lockproof-float"
DEP = "lockproof-dep"
STEADY = "lockproof-steady"
#: The interpreter the local recipe's pip layers install into (images/local/Dockerfile).
VENV_PYTHON = "/opt/venv/bin/python"

PINS = f"""
[pins.{FLOAT}]
kind = "pypi"
range = ""
variants = ["cuda"]
asymmetry = "test: the cuda image alone floats, so a new release moves its lock alone"
floating = "test: no version; the lock decides"
why = "a floating pin with a dependency"

[pins.{STEADY}]
kind = "pypi"
version = "1.0"
layer = "late"
why = "an exact pin on every image, in the local recipe's second pip layer"
"""


def _manifest() -> str:
    """The mini project's variants and [local] table, with pins that all live on the test index
    (its own pins name PyPI packages and GitHub repositories, out of reach of this test)."""
    text = (MINI / "pins/manifest.toml").read_text()
    return text[: text.index("[pins.")] + PINS


@dataclass(frozen=True, slots=True, kw_only=True)
class World:
    """What the module's tests share: the locked project, the index and the two builds."""

    project: Path  # the mini project, a git checkout, committed with its lock
    index: PyIndex
    env: dict[str, str]  # what `twinbuild` runs with: the session engine, pip on the index
    engine: Engine
    before: str  # the image built before the newer release was published
    after: str  # the image built after it, from an empty wheel cache too
    fetched_after: tuple[str, ...]  # the paths the second build asked of the index
    lock_out: str  # what the first `twinbuild lock` said


def _build(world_root: Path, engine: Engine, cache: Path) -> str:
    """A forced local build of the cuda image with ``cache`` as its (empty) wheel cache."""
    options = BuildOptions(root=world_root, profile="local", force=True, cache=cache)
    manifest = load(world_root / "pins/manifest.toml")
    result = build_image(manifest, engine, image("cuda"), options, say=lambda _: None)
    return result.image_id


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("lock-closure")
    made: list[str] = []
    with (
        pytest.MonkeyPatch.context() as mp,
        PyIndex(tmp / "index") as index,
        connect() as engine,
    ):
        isolate_git(mp, tmp / "home")
        # the host's pip (the wheelhouse's) asks the test index; nothing else has these names
        mp.setenv("PIP_INDEX_URL", index.url)
        index.publish(DEP, "1.0")
        for version in ("0.9", "1.0"):
            index.publish(FLOAT, version, (f"{DEP}>=1",))
        index.publish(STEADY, "1.0")
        project = init(mini_project(tmp))
        (project / "pins/manifest.toml").write_text(_manifest())
        # what a build writes, ignored as the repository's own .gitignore does
        (project / ".gitignore").write_text("build/\n.twinbuild/\n")
        env = dict(os.environ)
        locked = run_twinbuild(project, env, "lock", "--index-url", index.url)
        assert locked.returncode == 0, locked.stderr
        commit_all(project, "mini, locked")
        try:
            made.append(_build(project, engine, tmp / "wheels-before"))
            index.publish(FLOAT, "2.0", (f"{DEP}>=1",))
            index.served.clear()
            made.append(_build(project, engine, tmp / "wheels-after"))
            yield World(
                project=project, index=index, env=env, engine=engine, before=made[0],
                after=made[1], fetched_after=tuple(index.served), lock_out=locked.stdout,
            )  # fmt: skip
        finally:
            for image_id in dict.fromkeys(reversed(made)):
                with contextlib.suppress(EngineError):
                    engine.remove_image(image_id, force=True, prune=False)


def _closure(engine: Engine, image_id: str) -> dict[str, tuple[str, str]]:
    """Every distribution the image's interpreter sees, as the smoke collector reports it:
    name -> (version, PEP 610 direct_url)."""
    ran = engine.run_container(image_id, collect.argv(VENV_PYTHON, {}))
    assert ran.exit_code == 0, ran.output[-2000:]
    found = collect.parse(ran.output)["distributions"]
    return {
        d["name"].lower(): (d["version"], json.dumps(d["direct_url"], sort_keys=True))
        for d in found
    }


def _smoke(world: World, image_id: str, report_dir: Path, root: Path | None = None) -> Any:
    """``twinbuild smoke --image`` of ``image_id`` as a person runs it: its exit code and the
    report's tests by id."""
    root = root or world.project
    ran = run_twinbuild(
        root, world.env, "smoke", "--image", image_id, "--root", str(root),
        "--report-dir", str(report_dir),
    )  # fmt: skip
    (report,) = report_dir.glob("smoke-cuda-amd64-local*.json")
    tests = {t["id"]: t for t in json.loads(report.read_text())["tests"]}
    return ran, tests


def _closure_tests(tests: dict[str, Any]) -> dict[str, Any]:
    return {k: t for k, t in tests.items() if k.startswith("test_conformance.py::test_closure")}


def test_fresh_cache_builds_around_a_new_release_install_identical_closures(
    world: World,
) -> None:
    before = _closure(world.engine, world.before)
    after = _closure(world.engine, world.after)
    assert before[FLOAT][0] == "1.0"
    assert after == before
    # the second build really fetched from the index, and exactly the locked file
    files = [p for p in world.fetched_after if p.endswith(".whl")]
    assert f"/files/{FLOAT.replace('-', '_')}-1.0-py3-none-any.whl" in files
    assert not [p for p in files if "-2.0-" in p]


def test_upgrade_moves_that_package_plan_names_its_image_smoke_fails_the_old_one(
    world: World, tmp_path: Path
) -> None:
    copy = tmp_path / "proj"
    shutil.copytree(world.project, copy, symlinks=True)
    upgraded = run_twinbuild(
        copy, world.env, "lock", "--upgrade", "--index-url", world.index.url, "--format", "json"
    )
    assert upgraded.returncode == 0, upgraded.stderr
    report = json.loads(upgraded.stdout)
    moved = {(i["image"], m["name"], m["old"], m["new"]) for i in report["images"]
             for m in i["moved"]}  # fmt: skip
    assert moved, upgraded.stdout
    assert {(name, old, new) for _, name, old, new in moved} == {(FLOAT, "1.0", "2.0")}
    assert all("cuda" in img and "rocm" not in img for img, *_ in moved), moved
    assert report["rebuild"].startswith("cuda"), report["rebuild"]
    assert "rocm" not in report["rebuild"]
    text = run_twinbuild(copy, world.env, "lock", "--index-url", world.index.url)
    assert text.returncode == 0, text.stderr
    assert "rebuild: nothing" in text.stdout, text.stdout

    planned = run_twinbuild(copy, world.env, "plan", "--base", "HEAD", "--format", "json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    builds = {i["name"]: i["reasons"] for i in plan["images"] if i["build"]}
    assert set(builds) == {"cuda-amd64"}, plan
    # Every reason is a lock of its own that moved, and names the package that moved in it.
    assert all(
        "changed (its lock): lockproof-float 1.0 -> 2.0" in r for r in builds["cuda-amd64"]
    ), builds
    assert git(copy, "status", "--porcelain", "--", "pins/manifest.toml", "images") == ""

    ran, tests = _smoke(world, world.before, tmp_path / "smoke", root=copy)
    _fails_one_closure_check(ran, tests, locked="2.0", found="1.0")


def _fails_one_closure_check(
    ran: subprocess.CompletedProcess[str], tests: dict[str, dict[str, Any]], *, locked: str,
    found: str,
) -> None:  # fmt: skip
    """The smoke run failed exactly one check, the floating package's closure check, naming
    the lock's version, the image's and that a layer brought it."""
    assert ran.returncode == FindingsError.exit_code, ran.stdout + ran.stderr
    failed = [t for t in tests.values() if t["outcome"] == "failed"]
    assert [t["id"] for t in failed] == [f"test_conformance.py::test_closure[{FLOAT}]"], [
        t["message"] for t in failed
    ]
    message = failed[0]["message"]
    assert FLOAT in message
    assert f"(lock {locked}, image {found}, brought by layer)" in message, message


def test_untouched_image_passes_the_closure_check(world: World, tmp_path: Path) -> None:
    ran, tests = _smoke(world, world.after, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    closure = _closure_tests(tests)
    assert closure
    assert all(t["outcome"] == "passed" for t in closure.values()), closure
    assert f"test_conformance.py::test_closure[{FLOAT}]" in closure
    assert "test_conformance.py::test_closure_holds_nothing_else" in closure


def _force_older(world: World, context: Path) -> str:
    """The #2600 class: a layer on the built image force-installs the OLDER release of a locked
    package, its wheel taken from the test index into the context (the build has no network)."""
    context.mkdir()
    wheel = f"{FLOAT.replace('-', '_')}-0.9-py3-none-any.whl"
    shutil.copy(world.index.root / "files" / wheel, context / wheel)
    (context / "Dockerfile").write_text(
        f"FROM {world.after}\nCOPY {wheel} /tmp/{wheel}\n"
        f"RUN pip install --no-deps --force-reinstall --no-index /tmp/{wheel}\n"
    )
    stream = world.engine.api.build(
        path=str(context), network_mode="none", rm=True, forcerm=True, decode=True
    )
    image_id, log = None, []
    for chunk in stream:
        log.append(str(chunk.get("stream") or chunk.get("error") or ""))
        if "aux" in chunk:
            image_id = chunk["aux"].get("ID")
    assert image_id, "build failed:\n" + "".join(log)[-2000:]
    return str(image_id)


def test_layer_that_forces_an_older_locked_package_fails_one_closure_check(
    world: World, tmp_path: Path
) -> None:
    forced = _force_older(world, tmp_path / "context")
    try:
        assert _closure(world.engine, forced)[FLOAT][0] == "0.9"
        ran, tests = _smoke(world, forced, tmp_path / "smoke")
    finally:
        with contextlib.suppress(EngineError):
            world.engine.remove_image(forced, force=True, prune=False)
    _fails_one_closure_check(ran, tests, locked="1.0", found="0.9")
    assert (
        _closure_tests(tests)["test_conformance.py::test_closure_holds_nothing_else"]["outcome"]
        == "passed"
    )
