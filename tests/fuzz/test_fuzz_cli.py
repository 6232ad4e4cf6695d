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
import signal
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fuzz import cli
from tests.fuzz.strategies import as_bytes, fragment, json_edit, mutated

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
    ran = cli.go(box, argv, env)
    if after is not None:
        after(box)
    shutil.rmtree(box.root)  # passed: a deep run makes tens of thousands of sandboxes
    return ran


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


# -- issue 41's classes: other digits, links where a command writes, a signal at any point ---------

#: A whole number as it may be typed or pasted: ASCII digits around digits of another script
#: (Arabic-Indic, fullwidth, superscripts: ``str.isdigit()`` accepts them, ``int()`` reads some).
OTHER_DIGITS = st.builds(
    lambda a, b, c: a + b + c,
    st.text("0123456789", max_size=2),
    st.text(
        st.characters(categories=("Nd", "No"), exclude_characters="0123456789"),
        min_size=1, max_size=3,
    ),
    st.text("0123456789", max_size=2),
)  # fmt: skip


def _numeric_options() -> list[tuple[tuple[str, ...], str]]:
    """Every option of every command that takes a number (by its argparse type)."""
    found = []
    for command in COMMANDS:
        for action in command.parser._actions:
            kind = getattr(action.type, "__qualname__", "")
            if action.option_strings and kind.startswith(("whole_number", "days")):
                found.append((command.words, max(action.option_strings, key=len)))
    return found


NUMERIC_OPTIONS = _numeric_options()
_GATE = ("evidence", "gate", "--head", "HEAD", "--base", "HEAD", "--pr", "42")
_OUTDATED = ("pins", "outdated", "--index-url", "http://127.0.0.1:9/simple", "--source", "pypi")
#: Every number read from the environment, with a command that reads it first thing.
NUMERIC_VARIABLES = (
    ("TWINBUILD_REGISTRY_TIMEOUT", ("pins", "outdated", "--source", "registry")),
    ("TWINBUILD_REGISTRY_PORT", ("registry", "env")),
    ("TWINBUILD_INDEX_TIMEOUT", _OUTDATED),
    ("GITHUB_REPOSITORY_ID", _GATE),
)


def test_every_numeric_option_is_found() -> None:
    flags = {flag for _, flag in NUMERIC_OPTIONS}
    assert {"--jobs", "--keep", "--pr", "--attempt", "--port", "--max-age-days"} <= flags


@settings(max_examples=_examples(40))
@given(data=st.data())
def test_other_digits_in_any_numeric_field_are_one_line_naming_it(
    template: Path, tmp_path: Path, data: st.DataObject
) -> None:
    digits = data.draw(OTHER_DIGITS, label="digits")
    box = _box(template, tmp_path)
    field = data.draw(st.sampled_from(["option", "variable", "--repository-id", "build arg"]))
    env: dict[str, str] = {}
    if field == "option":
        words, name = data.draw(st.sampled_from(NUMERIC_OPTIONS), label="option")
        argv = [*words, name, digits]
    elif field == "variable":
        name, words = data.draw(st.sampled_from(NUMERIC_VARIABLES), label="variable")
        argv, env = list(words), {name: digits}
    elif field == "--repository-id":
        name, argv = field, [*_GATE, field, digits]
    else:
        name = data.draw(st.sampled_from(["KERNELS_GB_PER_JOB", "APEX_THREADS", "NVCC_JOBS"]))
        manifest = box.repo / "pins/manifest.toml"
        text = manifest.read_text().replace(
            "[local]", f'[build_args]\n{name} = "{digits}"\n\n[local]'
        )
        manifest.write_text(text)
        argv = data.draw(
            st.sampled_from([["lint"], ["render", "cuda"], ["bake", "--out", "b.json"]])
        )
    ran = _run(box, argv, env)
    assert ran.code == 2, ran
    assert name.lstrip("-") in ran.err.rstrip("\n").rpartition("\n")[2], ran


#: Commands that write a file, and the path each writes (relative to the repository).
WRITERS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("pins", "bump", "numba", "--version", "0.66.0", "--why", "demo"), "pins/manifest.toml"),
    (("import", "--force", "--out", "drafts/m.toml", "cuda.Dockerfile", "rocm.Dockerfile"),
     "drafts/m.toml"),
    (("import", "--force", "--out", "pins/manifest.toml", "cuda.Dockerfile", "rocm.Dockerfile"),
     "pins/manifest.toml"),
    (("evidence", "keygen", "--private", "../home/k.pem", "--public", "keys/x.pub"),
     "keys/x.pub"),
)  # fmt: skip
# (bake is not among them: any link among the image inputs refuses it first, the sandbox's too)
_RECIPES = Path(__file__).resolve().parents[1] / "fixtures" / "recipes"


def _writable(box: cli.Sandbox) -> None:
    """What the writers need beside the mini project: the recipes import reads, the folders."""
    for name in ("cuda.Dockerfile", "rocm.Dockerfile"):
        (box.repo / name).write_bytes((_RECIPES / name).read_bytes())
    for folder in ("drafts", "keys"):
        (box.repo / folder).mkdir(exist_ok=True)
    box.home.mkdir(parents=True, exist_ok=True)


@settings(max_examples=_examples(24))
@given(data=st.data())
def test_a_link_in_any_written_path_never_leads_outside(
    template: Path, tmp_path: Path, data: st.DataObject
) -> None:
    """One part of the written path (its folder or the file) is a link: out of the repository
    (to a folder beside it) the write is refused and nothing there changes; within it, it goes
    through."""
    words, written = data.draw(st.sampled_from(WRITERS), label="writer")
    box = _box(template, tmp_path)
    _writable(box)
    parts = Path(written).parts
    cut = data.draw(st.integers(1, len(parts)), label="link at")
    linked = box.repo.joinpath(*parts[:cut])
    outside = data.draw(st.booleans(), label="outside")
    away = (box.root / "away") if outside else (box.repo / "away")
    away.mkdir()
    target = away / linked.name
    if linked.exists():
        linked.rename(target)
    elif cut < len(parts):
        target.mkdir()
    linked.symlink_to(target)
    before = {p: p.read_bytes() for p in away.rglob("*") if p.is_file()}
    ran = _run(box, list(words)) if not outside else cli.go(box, list(words))
    if outside:
        assert ran.code == 2, ran
        assert "outside the repository and the cache" in ran.err, ran
        assert {p: p.read_bytes() for p in away.rglob("*") if p.is_file()} == before
    else:
        assert ran.code == 0, ran


class _Interrupter:
    """Sends this process SIGTERM at the ``at``-th file-changing event while armed: a signal at
    any point of a command's writes (an audit hook cannot be removed, so it is added once)."""

    EVENTS = frozenset({"open", "os.rename", "os.replace", "os.link", "os.mkdir", "os.remove"})

    def __init__(self) -> None:
        self.at = -1
        self.seen = 0
        self.fired = False
        sys.addaudithook(self)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if self.at < 0 or event not in self.EVENTS:
            return
        if event == "open" and not _writes(args):
            return
        self.seen += 1
        if self.seen == self.at:
            self.at, self.fired = -1, True
            os.kill(os.getpid(), signal.SIGTERM)

    def arm(self, at: int) -> None:
        self.at, self.seen, self.fired = at, 0, False


def _writes(args: tuple[Any, ...]) -> bool:
    """An ``open`` audit event's (path, mode, flags) opens for writing."""
    mode, flags = args[1], args[2]
    by_mode = isinstance(mode, str) and bool(set(mode) & set("wax+"))
    return by_mode or (isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR)))


_INTERRUPT: list[_Interrupter] = []


def _whole(path: Path) -> bool:
    """``path`` holds a whole file of its kind (a manifest that parses, a whole public key)."""
    text = path.read_text()
    if path.suffix == ".toml":
        tomllib.loads(text)
        return True
    return text.startswith("-----BEGIN PUBLIC KEY-----") and text.endswith(
        "-----END PUBLIC KEY-----\n"
    )


@settings(max_examples=_examples(30))
@given(data=st.data())
def test_a_sigterm_at_any_point_of_a_write_keeps_all_or_nothing(
    template: Path, tmp_path: Path, data: st.DataObject
) -> None:
    words, written = data.draw(st.sampled_from(WRITERS), label="writer")
    at = data.draw(st.integers(1, 24), label="at event")
    box = _box(template, tmp_path)
    _writable(box)
    target = box.repo / written
    before = target.read_bytes() if target.exists() else None
    if not _INTERRUPT:
        _INTERRUPT.append(_Interrupter())
    interrupter = _INTERRUPT[0]
    interrupter.arm(at)
    try:
        ran = cli.go(box, list(words))
    finally:
        interrupter.arm(-1)
    assert ran.code in (0, 130), ran
    if ran.code == 130:
        assert ran.err.endswith("twinbuild: stopped by SIGTERM; nothing half-done was kept\n")
    after = target.read_bytes() if target.exists() else None
    # all or nothing: the file as it was, or whole (a signal during the rename lands after it)
    assert after == before or _whole(target), after
    if words[:2] == ("evidence", "keygen"):  # both keys or neither
        assert (box.home / "k.pem").exists() == (after is not None), ran
    shutil.rmtree(box.root)
