"""The whole command line on any input: argv from the real parser, environment variables, state
files and API answers, each through ``main()`` in a sandbox of its own (``tests/fuzz/cli.py``).

The rules are the suite's (``conftest.py``): a result within 10 s, nothing written outside the
example's folder; and what a person sees: a documented exit code, no traceback, a failure said in
one ``twinbuild:`` line, no temporary file left behind. Issue 29's 83 failures were each one of
these rules broken at this boundary, behind readers the library-level properties already covered.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fuzz import cli
from tests.fuzz.conftest import time_bound
from tests.fuzz.strategies import as_bytes, fragment, json_edit, mutated
from tests.write_fence import fenced

COMMANDS = cli.commands()
_count = itertools.count()


def _examples(ci: int) -> int:
    """``ci`` examples in the default profile; the deep profile's own count otherwise."""
    current = settings().max_examples
    return ci if current <= 120 else current


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cli.template(tmp_path_factory.mktemp("template"))


def _box(template: Path, tmp_path: Path) -> cli.Sandbox:
    return cli.sandbox(template, tmp_path / f"example-{next(_count)}")


def _run(
    box: cli.Sandbox,
    argv: list[str],
    env: Any = None,
    after: Callable[[cli.Sandbox], None] | None = None,
) -> cli.Ran:
    # the repository, twinbuild's cache and HOME only (``bake --out ../x.json`` lands beside the
    # repository, still inside the example's folder); devices too, as in every unit test:
    # opening /dev/null (a child's stdin) or /dev/full (a step summary named there, refused once
    # open) writes no file
    fence = (box.repo, box.cache, box.home, Path(os.devnull).parent, *_runner_files(box, env))
    with fenced(*fence), time_bound(), cli.entered(box, env or {}):
        ran = cli.run(argv)
    cli.check(ran, box)
    if after is not None:
        after(box)
    shutil.rmtree(box.root)  # passed: a deep run makes tens of thousands of sandboxes
    return ran


def _runner_files(box: cli.Sandbox, env: Any) -> list[Path]:
    """The files a runner hands over for writing ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY): they
    lie where the runner puts them, outside the repository (an example may name ``../``)."""
    named = [(env or {}).get(name) for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")]
    return [box.repo / v for v in named if isinstance(v, str) and v and v.isprintable()]


def test_every_command_is_generated() -> None:
    names = {" ".join(c.words) for c in COMMANDS}
    assert {"lint", "pins bump", "evidence gate", "bake", "release", "import"} <= names
    assert "engine" in names  # generated with status or env only
    assert len(names) >= 25


@settings(max_examples=_examples(100))
@given(data=st.data())
def test_any_argv(template: Path, tmp_path: Path, data: st.DataObject) -> None:
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    argv = data.draw(cli.argv(command), label="argv")
    box = _box(template, tmp_path)
    before = (box.repo / "pins/manifest.toml").read_bytes()

    def unchanged(box: cli.Sandbox) -> None:
        if argv[0] != "import" and argv[:2] != ["pins", "bump"]:  # nothing else writes it
            assert (box.repo / "pins/manifest.toml").read_bytes() == before

    _run(box, argv, after=unchanged)


@settings(max_examples=_examples(60))
@given(data=st.data())
def test_any_environment(template: Path, tmp_path: Path, data: st.DataObject) -> None:
    words, names = data.draw(st.sampled_from(cli.ENV_COMMANDS), label="command")
    env = data.draw(cli.environment(names), label="environment")
    _run(_box(template, tmp_path), list(words), env)


@settings(max_examples=_examples(40))
@given(
    words=st.sampled_from(cli.STATE_COMMANDS),
    state=st.lists(
        st.tuples(
            st.sampled_from(cli.STATE_FILES),
            st.sampled_from(cli.STATE_KINDS),
            st.sampled_from(cli.STATE_BYTES),
        ),
        min_size=1,
        max_size=3,
        unique_by=lambda s: s[0],
    ),
)
def test_any_state_files(
    template: Path, tmp_path: Path, words: tuple[str, ...], state: list[tuple[str, str, bytes]]
) -> None:
    box = _box(template, tmp_path)
    for name, kind, data in state:
        cli.put_state(box, name, kind, data)
    _run(box, list(words), {"DOCKER_HOST": ""})


@st.composite
def _answer(draw: st.DrawFn) -> tuple[str, bytes, tuple[str, ...]]:
    seed, name, words = draw(st.sampled_from(cli.ANSWERS))
    edited = json.dumps(draw(json_edit(json.loads(seed))))
    spoilt = draw(cli.spoiled(seed))
    data = draw(
        as_bytes(mutated([seed, edited, spoilt]))
        | st.sampled_from([edited, spoilt]).map(str.encode)
    )
    return name, data, words


@settings(max_examples=_examples(60))
@given(answer=_answer())
def test_any_api_answer(
    template: Path, tmp_path: Path, answer: tuple[str, bytes, tuple[str, ...]]
) -> None:
    name, data, words = answer
    box = _box(template, tmp_path)
    (box.repo / name).write_bytes(data)
    _run(box, list(words), cli.ANSWER_ENV)


# -- issue 41: a url pin whose file name says its version ---------------------------------------

FILE_NAMED = """
[pins.vmmfix]
kind = "url"
url = "https://example.invalid/releases/download/rocm720-v0.5.16/libhsa-runtime64.so.1.18.70200.vmmfix"
sha256 = ""
version = "1.18.70200"
installs = "the ROCr of soname 1.18.70200: v0.5.16 is the wheels release's tag"
install = "file"
path = "/opt/twinbuild/downloads/libhsa-runtime64.so.1.18.70200.vmmfix"
variants = ["rocm"]
asymmetry = "fuzz: only ROCm needs the patched runtime"
floating = "fuzz: the release publishes no sha256"
why = "fuzz: a url pin whose file name says its version"
"""
_VERSIONS = st.sampled_from(["99.1.0", "1.18.70201", "1.18.70200", "\u00b2", "1.18.70200.1", ""])
_NEW_URL = "https://example.invalid/releases/download/rocm720-v0.5.17/libhsa-runtime64.so.{}.vmmfix"


@settings(max_examples=_examples(30))
@example(version="99.1.0", url=None, sha256=None)  # the case: exit 2, nothing written
@example(version="1.18.70201", url=_NEW_URL.format("1.18.70201"), sha256=None)  # it moves
@given(
    version=_VERSIONS | fragment,
    url=st.none() | _VERSIONS.map(_NEW_URL.format) | fragment,
    sha256=st.none() | st.just("ab" * 32) | fragment,
)
def test_a_bump_moves_every_field_that_names_the_version_or_refuses(
    template: Path, tmp_path: Path, version: str, url: str | None, sha256: str | None
) -> None:
    """``pins bump rocr-vmm-fix --version 99.1.0 --why x`` once exited 0 and kept a url whose file
    name said 1.18.70200. Any bump of such a pin either leaves a manifest whose url and path name
    the new version (and that lints clean), or writes nothing."""
    box = _box(template, tmp_path)
    manifest = box.repo / "pins/manifest.toml"
    manifest.write_text(manifest.read_text() + FILE_NAMED)
    before = manifest.read_bytes()
    argv = ["pins", "bump", "vmmfix", "--version", version, "--why", "fuzz: a new build"]
    if url is not None:  # with its checksum: a bump without one would fetch the new file
        argv += ["--url", url, "--sha256", sha256 or "ab" * 32]
    elif sha256 is not None:
        argv += ["--sha256", sha256]

    def moved_or_kept(box: cli.Sandbox) -> None:
        from twinbuild.lint.checks import lint_manifest
        from twinbuild.manifest.loader import load
        from twinbuild.manifest.url_version import file_versions

        if manifest.read_bytes() == before:
            return
        pin = load(manifest).pins["vmmfix"]
        assert pin.common.version == version
        assert file_versions(pin.common.url or "") == [version]
        assert file_versions(pin.common.path or "") == [version]
        assert lint_manifest(load(manifest)).findings == []

    ran = _run(box, argv, after=moved_or_kept)
    if url is None:  # the case: where the new file lives cannot be guessed
        assert ran.code == 2, ran
    if (version, url, sha256) == ("1.18.70201", _NEW_URL.format("1.18.70201"), None):
        assert ran.code == 0, ran
