"""Build faults that a real engine cannot be made to show on demand, against a fake engine.

The shared fake (tests/fake_engine.py) records what it was asked; each fault must leave no tag
behind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import filelock
import pytest
import requests

from tests.fake_engine import FakeEngine
from tests.helpers import edit, image, mini_project
from tests.unit.inputs_reference import reference
from twinbuild.builder.build_options import BuilderChoice, BuildOptions
from twinbuild.builder.build_record import record_path
from twinbuild.builder.image import BuildResult, build_image
from twinbuild.engine.api import BuilderUnavailable
from twinbuild.errors import BuildFailed, DiskFull, EngineError, LockBusy
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import recipe_path, render

BUILT = "sha256:" + "b" * 64
GOOD: list[dict[str, Any]] = [
    {"stream": "Step 1/2 : FROM base\n"},
    {"stream": " ---> Using cache\n"},
    {"stream": "Step 2/2 : RUN pip install -r /tmp/pins.txt\n"},
    {"stream": " ---> Running in 0123456789ab\n"},
    {"aux": {"ID": BUILT}},
    {"stream": "Successfully built bbbbbbbbbbbb\n"},
]


def _build(
    root: Path, engine: FakeEngine, said: list[str] | None = None, builder: BuilderChoice = "auto"
) -> BuildResult:
    options = BuildOptions(root=root, profile="production", lock_timeout=0.3, builder=builder)
    manifest = load(root / "pins/manifest.toml")
    sink = said if said is not None else []
    return build_image(manifest, engine, image("rocm"), options, say=sink.append)


def test_a_complete_build_is_tagged_once_with_its_labels(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine(build_chunks=GOOD)
    said: list[str] = []
    result = _build(root, engine, said)
    assert engine.tagged == [(BUILT, "twinbuild/rocm:production-amd64")]
    call = engine.builds[0]
    manifest = load(root / "pins/manifest.toml")
    expected = reference(
        root,
        render(manifest, image("rocm"), "production"),
        manifest.variants["rocm"].base.digest,
        {"builder": "engine-api", "target": ""},
    )  # computed apart from the build: a constant or partial hash fails here
    assert call["labels"]["org.twinbuild.inputs-hash"] == expected == result.inputs_hash
    assert call["labels"]["org.twinbuild.variant"] == "rocm"
    assert call["labels"]["org.twinbuild.arch"] == "linux/amd64"
    assert call["network"] == "host"
    assert call["builder"] == "buildkit"
    assert call["buildargs"]["BASE_IMAGE"].startswith("rocm/sgl-dev:v0.5.6-rocm700-mi35x@sha256:")
    assert said[0].startswith("[rocm-amd64/production] step 1/2: FROM base (cached, ")
    # a step that runs says so when it starts (a cached one only when it is done)
    assert said[1] == "[rocm-amd64/production] step 2/2: RUN pip install -r /tmp/pins.txt: started"
    assert said[2].startswith(
        "[rocm-amd64/production] step 2/2: RUN pip install -r /tmp/pins.txt (ran, "
    )
    assert record_path(root, "production", image("rocm")).exists()


def holding(result: BuildResult) -> FakeEngine:
    """An engine that holds an untagged image built from ``result``'s inputs (rocm, production)."""
    engine = FakeEngine(build_chunks=GOOD)
    engine.add_image(BUILT, {
        "org.twinbuild.inputs-hash": result.inputs_hash,
        "org.twinbuild.variant": "rocm",
        "org.twinbuild.arch": "linux/amd64",
        "org.twinbuild.profile": "production",
    })  # fmt: skip
    return engine


def test_up_to_date_builds_nothing(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    first = _build(root, FakeEngine(build_chunks=GOOD))
    labels = {
        "org.twinbuild.inputs-hash": first.inputs_hash,
        "org.twinbuild.variant": "rocm",
        "org.twinbuild.arch": "linux/amd64",
        "org.twinbuild.profile": "production",
    }
    engine = holding(first)
    again = _build(root, engine)
    assert again.up_to_date
    assert engine.builds == []
    assert engine.tagged == [
        (BUILT, "twinbuild/rocm:production-amd64")
    ]  # found by label, then tagged
    # The same image is stale once a rocm pin moves: it must be built, not reused.
    edit(root / "pins/manifest.toml", 'version = "0.65.1"', 'version = "0.65.2"')
    moved = FakeEngine(build_chunks=GOOD)
    moved.add_image(BUILT, labels)
    third = _build(root, moved)
    assert not third.up_to_date
    assert third.inputs_hash != first.inputs_hash
    assert len(moved.builds) == 1


def test_failing_step_names_the_step_and_tags_nothing(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    chunks: list[dict[str, Any]] = [*GOOD[:4], {"stream": "ERROR: no matching distribution\n"},
              {"error": "The command '/bin/sh -c pip install' returned a non-zero code: 1"}]  # fmt: skip
    engine = FakeEngine(build_chunks=chunks)
    with pytest.raises(BuildFailed) as info:
        _build(root, engine)
    first_line = str(info.value).splitlines()[0]
    assert first_line.startswith(
        "rocm (linux/amd64): build failed at step 2/2: RUN pip install -r /tmp/pins.txt; nothing was tagged; "
        "whole log: "
    )
    assert "  | ERROR: The command '/bin/sh -c pip install' returned a non-zero code: 1" in str(
        info.value
    )
    assert engine.tagged == []


def test_engine_gone_mid_build(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    gone = requests.exceptions.ConnectionError("Connection aborted")
    engine = FakeEngine(build_chunks=GOOD[:3], build_then=gone)
    with pytest.raises(EngineError) as info:
        _build(root, engine)
    assert str(info.value) == (
        "unix:///fake.sock: the engine went away during the build of rocm "
        "(linux/amd64) (ConnectionError: Connection aborted); nothing was tagged"
    )
    assert engine.tagged == []


def test_disk_full(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    full: list[dict[str, Any]] = [
        *GOOD[:3],
        {"error": "write /var/lib/docker/tmp/x: no space left on device"},
    ]
    engine = FakeEngine(build_chunks=full)
    with pytest.raises(DiskFull) as info:
        _build(root, engine)
    assert str(info.value).startswith("rocm (linux/amd64): disk full during the build; see ")
    assert engine.tagged == []


def test_a_second_build_of_the_same_image_waits_then_gives_up(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    folder = record_path(root, "production", image("rocm")).parent
    folder.mkdir(parents=True)
    engine = FakeEngine(build_chunks=GOOD)
    said: list[str] = []
    with filelock.FileLock(folder / "build.lock"), pytest.raises(LockBusy) as info:
        _build(root, engine, said)
    assert str(info.value) == (
        f"twinbuild/rocm:production-amd64: still locked by another build after 0s "
        f"({folder / 'build.lock'}); wait for it or stop it"
    )
    assert said == [
        "twinbuild/rocm:production-amd64: another build of this image is running; waiting for it "
        f"({folder / 'build.lock'})"
    ]
    assert engine.builds == []
    assert engine.tagged == []


def test_an_engine_without_buildkit_gets_the_classic_builder(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine(build_chunks=GOOD, buildkit=False)
    said: list[str] = []
    _build(root, engine, said)
    assert [c["builder"] for c in engine.builds] == ["buildkit", "classic"]
    assert said[0] == "[rocm-amd64/production] no BuildKit in this engine: classic builder"
    assert engine.tagged == [(BUILT, "twinbuild/rocm:production-amd64")]


def test_builder_classic_never_asks_for_buildkit(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine(build_chunks=GOOD)
    _build(root, engine, builder="classic")
    assert [c["builder"] for c in engine.builds] == ["classic"]
    assert engine.tagged == [(BUILT, "twinbuild/rocm:production-amd64")]


def test_builder_buildkit_does_not_fall_back_and_tags_nothing(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine(build_chunks=GOOD, buildkit=False)
    with pytest.raises(BuilderUnavailable, match="no BuildKit"):
        _build(root, engine, builder="buildkit")
    assert [c["builder"] for c in engine.builds] == ["buildkit"]
    assert engine.tagged == []


def test_the_builder_choice_is_part_of_the_inputs_hash(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    hashes = {
        choice: _build(root, FakeEngine(build_chunks=GOOD), builder=choice).inputs_hash
        for choice in ("auto", "buildkit", "classic")
    }
    assert len(set(hashes.values())) == 3


def test_an_unchanged_recipe_is_not_parsed_again(tmp_path: Path) -> None:
    """The no-op build reads what a recipe copies from the remembered parse: the pin scanner (and
    dockerfile-parse) is not even imported. Checked in a fresh interpreter."""
    import subprocess
    import sys

    from twinbuild.builder.inputs import input_files

    root = mini_project(tmp_path)
    first = input_files(root, recipe_path("rocm", "local"), "local")  # parses, and remembers
    code = (
        "import sys; from pathlib import Path; from twinbuild.builder.inputs import input_files; "
        f"files = input_files(Path({str(root)!r}), Path('images/local/Dockerfile'), 'local'); "
        "print(len(files), 'twinbuild.recipe.scan' in sys.modules, 'dockerfile_parse' in sys.modules)"
    )
    again = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert again.stdout.split() == [str(len(first)), "False", "False"]


PLANTED = "sha256:" + "e" * 64


def _labels_of(result: BuildResult) -> dict[str, str]:
    return {
        "org.twinbuild.inputs-hash": result.inputs_hash,
        "org.twinbuild.variant": "rocm",
        "org.twinbuild.arch": "linux/amd64",
        "org.twinbuild.profile": "production",
    }


def test_in_ci_an_image_planted_with_the_builds_labels_is_not_its_result(tmp_path: Path) -> None:
    # Someone's earlier job on a shared engine made an image with the next build's labels and
    # even its tag; a fresh checkout in CI builds instead of taking it.
    digest = _build(mini_project(tmp_path / "a"), FakeEngine(build_chunks=GOOD))
    root = mini_project(tmp_path / "b")
    engine = FakeEngine(build_chunks=GOOD)
    engine.add_image(PLANTED, _labels_of(digest), "twinbuild/rocm:production-amd64")
    options = BuildOptions(root=root, profile="production", lock_timeout=0.3, adopt=False)
    manifest = load(root / "pins/manifest.toml")
    built = build_image(manifest, engine, image("rocm"), options, say=lambda _: None)
    assert not built.up_to_date
    assert built.image_id == BUILT
    assert len(engine.builds) == 1
    assert engine.tagged[-1] == (BUILT, "twinbuild/rocm:production-amd64")
    # What this checkout built (its record names it) is up to date on the next run, in CI too.
    again = build_image(manifest, engine, image("rocm"), options, say=lambda _: None)
    assert again.up_to_date
    assert len(engine.builds) == 1


def test_build_in_github_actions_adopts_nothing_and_reads_no_registry_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib

    from twinbuild.builder.build_options import BuildRequest
    from twinbuild.builder.image import build_images
    from twinbuild.engine import client

    digest = _build(mini_project(tmp_path / "a"), FakeEngine(build_chunks=GOOD))
    root = mini_project(tmp_path / "b")
    engine = FakeEngine(build_chunks=GOOD)
    engine.add_image(PLANTED, _labels_of(digest))
    monkeypatch.setattr(client, "connect", lambda: contextlib.nullcontext(engine))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("TWINBUILD_REGISTRY", "127.0.0.1:5999")  # where a cache would come from
    request = BuildRequest(
        manifest=root / "pins/manifest.toml", variant="rocm",
        options=BuildOptions(root=root, profile="production", lock_timeout=0.3),
    )  # fmt: skip
    [built] = build_images(request, say=lambda _: None)
    assert not built.up_to_date
    assert engine.builds[0]["cache_from"] == []
    # Outside Actions the same request takes the registry cache and the labelled image.
    monkeypatch.delenv("GITHUB_ACTIONS")
    fresh = mini_project(tmp_path / "c")
    engine2 = FakeEngine(build_chunks=GOOD)
    monkeypatch.setattr(client, "connect", lambda: contextlib.nullcontext(engine2))
    request = BuildRequest(
        manifest=fresh / "pins/manifest.toml", variant="rocm", no_registry_cache=False,
        options=BuildOptions(root=fresh, profile="production", lock_timeout=0.3, force=True),
    )  # fmt: skip
    build_images(request, say=lambda _: None)
    assert engine2.builds[0]["cache_from"] == ["127.0.0.1:5999/twinbuild-ci/rocm:production-amd64"]
