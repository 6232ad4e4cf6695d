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
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz import cli
from tests.fuzz.strategies import as_bytes, json_edit, mutated

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
