"""Build faults that a real engine cannot be made to show on demand, against a fake engine.

The shared fake (tests/fake_engine.py) records what it was asked; each fault must leave no tag
behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import filelock
import pytest

from tests.fake_engine import BUILT, FakeEngine, buildx_output
from tests.helpers import edit, image, mini_project
from tests.unit.inputs_reference import reference
from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.build_record import record_path
from twinbuild.builder.image import BuildResult, build_image
from twinbuild.errors import BuildFailed, DiskFull, EngineError, LockBusy
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import recipe_path, render

TAG = "twinbuild/rocm:production-amd64"
RUN_STEP = '[3/3] RUN echo "installing good" && cat /tmp/pins.txt'


def _build(root: Path, engine: FakeEngine, said: list[str] | None = None) -> BuildResult:
    options = BuildOptions(root=root, profile="production", lock_timeout=0.3)
    manifest = load(root / "pins/manifest.toml")
    sink = said if said is not None else []
    return build_image(manifest, engine, image("rocm"), options, say=sink.append)


def test_a_complete_build_is_tagged_once_with_its_labels(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine()
    said: list[str] = []
    result = _build(root, engine, said)
    target = engine.builds[0]
    assert target.tags == (TAG,)
    assert engine.images[TAG]["Id"] == BUILT == result.image_id
    manifest = load(root / "pins/manifest.toml")
    expected = reference(
        root,
        render(manifest, image("rocm"), "production"),
        manifest.variants["rocm"].base.digest,
        {"builder": "buildx", "target": ""},
    )  # computed apart from the build: a constant or partial hash fails here
    assert target.labels["org.twinbuild.inputs-hash"] == expected == result.inputs_hash
    assert target.labels["org.twinbuild.variant"] == "rocm"
    assert target.labels["org.twinbuild.arch"] == "linux/amd64"
    assert target.labels["org.twinbuild.left-out"] == ""  # production leaves nothing out
    assert target.network == "host"
    assert target.platform == "linux/amd64"
    assert target.args["BUILDKIT_INLINE_CACHE"] == "1"
    assert target.args["BASE_IMAGE"].startswith("rocm/sgl-dev:v0.5.6-rocm700-mi35x@sha256:")
    assert target.dockerfile == "images/rocm/Dockerfile"
    assert not target.context.exists()  # the context folder is gone once the build ends
    # from real buildx output: a cached step says so when done, one that runs when it starts too
    label = "[rocm-amd64/production]"
    assert f"{label} [2/3] COPY pins.txt /tmp/pins.txt (cached, 0.0s)" in said
    started = said.index(f"{label} {RUN_STEP}: started")
    assert said[started + 1] == f"{label} {RUN_STEP} (ran, 0.6s)"
    assert said[-1].startswith(f"{label} done in ")
    log = (record_path(root, "production", image("rocm")).parent / "build.log").read_text()
    assert f"{RUN_STEP[:40]} | installing good\n" in log  # a step's own output, decoded
    assert record_path(root, "production", image("rocm")).exists()


def holding(result: BuildResult) -> FakeEngine:
    """An engine that holds an untagged image built from ``result``'s inputs (rocm, production)."""
    engine = FakeEngine()
    engine.add_image(BUILT, {
        "org.twinbuild.inputs-hash": result.inputs_hash,
        "org.twinbuild.variant": "rocm",
        "org.twinbuild.arch": "linux/amd64",
        "org.twinbuild.profile": "production",
    })  # fmt: skip
    return engine


def test_up_to_date_builds_nothing(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    first = _build(root, FakeEngine())
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
    moved = FakeEngine()
    moved.add_image(BUILT, labels)
    third = _build(root, moved)
    assert not third.up_to_date
    assert third.inputs_hash != first.inputs_hash
    assert len(moved.builds) == 1


def test_failing_step_names_the_step_and_tags_nothing(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine(build_lines=buildx_output("failed"), build_exit=1)
    with pytest.raises(BuildFailed) as info:
        _build(root, engine)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(
        'rocm (linux/amd64): build failed at [3/3] RUN echo "ERROR: no matching distribution '
        'found for click==8.1.7" && exit 1; nothing was tagged; whole log: '
    )
    assert lines[-1] == (
        '  | ERROR: failed to solve: executor failed running [/bin/sh -c echo "ERROR: no '
        'matching distribution found for click==8.1.7" && exit 1]: exit code: 1'
    )
    assert TAG not in engine.images
    assert engine.tagged == []


def test_buildx_that_stops_with_no_failing_step_says_so_in_one_line(tmp_path: Path) -> None:
    # the engine went away mid-build: buildx's stream ends early, with its own last word
    good = buildx_output("good")
    cut = [
        *good[: good.index("}", 100) + 1],
        "ERROR: failed to solve: Unavailable: connection closed",
    ]
    engine = FakeEngine(build_lines=cut, build_exit=1)
    root = mini_project(tmp_path)
    with pytest.raises(EngineError) as info:
        _build(root, engine)
    log = record_path(root, "production", image("rocm")).parent / "build.log"
    assert str(info.value) == (
        "unix:///fake.sock: buildx stopped during the build of rocm (linux/amd64) with no step "
        "failing (exit 1: ERROR: failed to solve: Unavailable: connection closed); nothing was "
        f"tagged; whole log: {log}"
    )
    assert TAG not in engine.images


def test_disk_full(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    full = [
        *buildx_output("failed"),
        "ERROR: failed to solve: write /var/lib/x: no space left on device",
    ]
    engine = FakeEngine(build_lines=full, build_exit=1)
    with pytest.raises(DiskFull) as info:
        _build(root, engine)
    assert str(info.value).startswith("rocm (linux/amd64): disk full during the build; see ")
    assert TAG not in engine.images


def test_an_engine_without_buildkit_is_told_in_one_line_and_nothing_builds(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    engine = FakeEngine(buildkit=False)
    with pytest.raises(EngineError) as info:
        _build(root, engine)
    assert str(info.value) == (
        "unix:///fake.sock: the engine has no BuildKit (Docker 18.06.3-ce, API 1.38, linux); "
        "twinbuild builds with buildx, which needs a Linux engine of Docker 18.09 or newer: "
        "`twinbuild engine up` starts Debian's docker.io"
    )
    assert engine.builds == []
    assert TAG not in engine.images


def test_a_second_build_of_the_same_image_waits_then_gives_up(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    folder = record_path(root, "production", image("rocm")).parent
    folder.mkdir(parents=True)
    engine = FakeEngine()
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
    digest = _build(mini_project(tmp_path / "a"), FakeEngine())
    root = mini_project(tmp_path / "b")
    engine = FakeEngine()
    engine.add_image(PLANTED, _labels_of(digest), "twinbuild/rocm:production-amd64")
    options = BuildOptions(root=root, profile="production", lock_timeout=0.3, adopt=False)
    manifest = load(root / "pins/manifest.toml")
    built = build_image(manifest, engine, image("rocm"), options, say=lambda _: None)
    assert not built.up_to_date
    assert built.image_id == BUILT
    assert len(engine.builds) == 1
    assert engine.images["twinbuild/rocm:production-amd64"]["Id"] == BUILT
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

    digest = _build(mini_project(tmp_path / "a"), FakeEngine())
    root = mini_project(tmp_path / "b")
    engine = FakeEngine()
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
    assert engine.builds[0].cache_from == ()
    # Outside Actions the same request takes the registry cache and the labelled image.
    monkeypatch.delenv("GITHUB_ACTIONS")
    fresh = mini_project(tmp_path / "c")
    engine2 = FakeEngine()
    monkeypatch.setattr(client, "connect", lambda: contextlib.nullcontext(engine2))
    request = BuildRequest(
        manifest=fresh / "pins/manifest.toml", variant="rocm", no_registry_cache=False,
        options=BuildOptions(root=fresh, profile="production", lock_timeout=0.3, force=True),
    )  # fmt: skip
    build_images(request, say=lambda _: None)
    assert engine2.builds[0].cache_from == ("127.0.0.1:5999/twinbuild-ci/rocm:production-amd64",)


def test_ctrl_c_during_parallel_builds_stops_every_builds_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --jobs the builds run in worker threads, their buildx in process groups of its own:
    the terminal's Ctrl-C reaches the main thread alone, which stops each build's command. Each
    command here would run 60 s; stopped, it ends by SIGTERM instead of exiting 0."""
    import contextlib
    import signal
    import threading

    from twinbuild.builder.build_options import BuildRequest
    from twinbuild.builder.image import build_images
    from twinbuild.engine import client
    from twinbuild.engine.api import BuildOutcome, BuildTarget
    from twinbuild.util import process

    assert threading.current_thread() is threading.main_thread()  # where signals land
    main = threading.get_ident()
    started: list[str] = []
    codes: list[int] = []
    guard = threading.Lock()

    class StreamingEngine(FakeEngine):
        def build(
            self, target: BuildTarget, *, line: object, mirror: str, say: object
        ) -> BuildOutcome:
            def on_line(text: str) -> None:
                with guard:
                    started.append(text)
                    if len(started) == 2:  # both builds run: Ctrl-C
                        signal.pthread_kill(main, signal.SIGINT)

            code = process.stream(["sh", "-c", "echo up; exec sleep 60"], on_line=on_line,
                                  stop_grace=30)  # fmt: skip
            codes.append(code)
            return BuildOutcome(exit_code=code, image_id=None)

    # The process's SIGINT as a terminal's: Python's own handler, not blocked in this thread
    # (before util.signals.held() was fixed, a fuzz test's SIGTERM could leave both blocked in
    # the pytest worker, and this test then failed: test_signals.py).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    root = mini_project(tmp_path)
    engine = StreamingEngine()
    monkeypatch.setattr(client, "connect", lambda: contextlib.nullcontext(engine))
    request = BuildRequest(
        manifest=root / "pins/manifest.toml", jobs=2,
        options=BuildOptions(root=root, profile="production", lock_timeout=0.3),
    )  # fmt: skip
    try:
        with pytest.raises(KeyboardInterrupt):
            build_images(request, say=lambda _: None)
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    assert codes == [-signal.SIGTERM, -signal.SIGTERM]
    assert engine.tagged == []
