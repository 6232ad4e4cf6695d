"""Every option of every command reaches the library: the parser is walked, not listed.

For each command the library function its handler calls is replaced by one that records the
options object and stops; each option is then given a value other than its default, and the
recorded object must carry it in the field named after the option's ``dest``. A new option that the
handler does not pass on fails here, and so does a new command without a row in ``LIBRARY``.

The output contract's options (``-q``, ``-v``, ``--format``) are the CLI's own: ``-q``/``-v`` reach
``twinbuild.util.output``'s level (and the options object too where the library uses them, as
build's and smoke's ``verbose``), ``--format`` the handler's rendering of the result, which
``tests/unit/test_output_contract.py`` runs for real.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from twinbuild.cli.main import GROUPS, build_parser, main, parser_for
from twinbuild.util import output

#: dests the CLI itself consumes (the output contract), not a library options object
OUTPUT_DESTS = frozenset({"quiet", "verbose", "format"})

# command words -> "module:function" the handler passes its options object to (first argument)
LIBRARY: dict[tuple[str, ...], str] = {
    ("lint",): "twinbuild.lint.checks:lint_project",
    ("lock",): "twinbuild.closure.lock_command:lock_all",
    ("render",): "twinbuild.builder.render_command:render_manifest",
    ("engine",): "twinbuild.engine.daemon:control",
    ("base",): "twinbuild.engine.base:base_for",
    ("build",): "twinbuild.builder.image:build_images",
    ("plan",): "twinbuild.builder.plan:plan_change",
    ("bake",): "twinbuild.builder.bake:bake_images",
    ("smoke",): "twinbuild.smoke.runner:smoke_images",
    ("gpu-proof",): "twinbuild.smoke.proof:prove",
    ("import",): "twinbuild.importer.run:run_import",
    ("workflows", "check"): "twinbuild.ci.workflows:check_workflows",
    ("rerun-decision", "report"): "twinbuild.ci.rerun:report",
    ("rerun-decision", "guard"): "twinbuild.ci.rerun:check_guard",
    ("evidence", "record"): "twinbuild.cli.evidence_handlers:record",
    ("evidence", "sign"): "twinbuild.cli.evidence_handlers:sign",
    ("evidence", "verify"): "twinbuild.cli.evidence_handlers:verify",
    ("evidence", "inputs"): "twinbuild.cli.evidence_handlers:inputs",
    ("evidence", "gate"): "twinbuild.cli.evidence_handlers:gate",
    ("evidence", "trigger"): "twinbuild.cli.evidence_handlers:trigger",
    ("evidence", "check-push"): "twinbuild.evidence.push_check:check_push",
    ("evidence", "keygen"): "twinbuild.cli.evidence_handlers:keygen",
    ("pins", "table"): "twinbuild.pins.locked_table:locked_table",
    ("pins", "bump"): "twinbuild.pins.bump:bump_pin",
    ("pins", "diff"): "twinbuild.pins.diff:diff_pins",
    ("pins", "adopt-release"): "twinbuild.pins.adopt_release:adopt_release",
    ("variants",): "twinbuild.ci.matrix:run_variants",
    ("binfmt",): "twinbuild.engine.binfmt:binfmt",
    ("pins", "outdated"): "twinbuild.pins.outdated:outdated_pins",
    ("prune",): "twinbuild.engine.prune:prune_images",
    ("registry",): "twinbuild.engine.registry:run",
    ("push",): "twinbuild.ship.push:push_images",
    ("release",): "twinbuild.ship.release:release_image",
}

# values an option must have to pass the handler's own parsing (PIN=PATH and the like)
SAMPLES: dict[str, str] = {"--mirror": "pin=/sentinel-mirrors"}


class Reached(Exception):
    def __init__(self, options: object) -> None:
        super().__init__("reached the library")
        self.options = options


def leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
        return
    for action in subs:
        for name, child in action.choices.items():
            yield from leaves(child, (*words, name))


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
    ]


def _value(action: argparse.Action, tag: str) -> tuple[list[str], Any]:
    """Words that set ``action`` to something other than its default, and the value expected."""
    flag = action.option_strings[0] if action.option_strings else None
    if isinstance(action, argparse._StoreConstAction):  # store_true/false too
        return [flag or ""], action.const
    if action.choices is not None:
        choice = next(c for c in action.choices if c != action.default)
        return ([flag] if flag else []) + [str(choice)], choice
    if action.type is int:
        number = 7 if action.default != 7 else 8
        return ([flag] if flag else []) + [str(number)], number
    if action.type is float:
        return ([flag] if flag else []) + ["3.5"], 3.5
    if callable(action.type) and action.type is not str:  # a bounded number, e.g. --max-age-days
        for sample in ("3.5", "7", "8"):
            try:
                bounded = action.type(sample)
            except (argparse.ArgumentTypeError, TypeError, ValueError):
                continue
            if bounded != action.default:
                return ([flag] if flag else []) + [sample], bounded
    text = SAMPLES.get(flag or "", f"/sentinel-{tag}")
    return ([flag] if flag else []) + [text], text


def _argv(parser: argparse.ArgumentParser, chosen: argparse.Action) -> tuple[list[str], Any]:
    """Words giving ``chosen`` a non-default value, plus whatever the parser requires, in order;
    and the value ``chosen`` should then carry."""
    words, expected = _value(chosen, chosen.dest)
    argv: list[str] = []
    grouped: set[int] = set()
    for group in parser._mutually_exclusive_groups:
        members = list(group._group_actions)
        grouped |= {id(a) for a in members}
        if group.required and chosen not in members:
            argv += _value(members[0], members[0].dest)[0]
    for action in _options(parser):
        if action is chosen:
            argv += words
        elif id(action) not in grouped and (action.required or not action.option_strings):
            argv += _value(action, action.dest)[0]
    return argv, expected


def _carried(options: object, dest: str) -> list[object]:
    """The values of fields named ``dest`` in ``options`` and the dataclasses it holds."""
    found: list[object] = []
    if not dataclasses.is_dataclass(options) or isinstance(options, type):
        return found
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.name == dest:
            found.append(value)
        found += _carried(value, dest)
    return found


def _matches(value: object, expected: object) -> bool:
    if value == expected:
        return True
    if isinstance(expected, str) and not isinstance(value, bool):
        return expected.rpartition("=")[2].rstrip("/") in str(value)
    return False


def _assert_typed(options: object) -> None:
    """Options are frozen, keyword-only, slotted dataclasses, and so is every one they hold."""
    kind = type(options)
    assert dataclasses.is_dataclass(options), f"{kind.__name__} is not a dataclass"
    first = dataclasses.fields(options)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(options, first, None)
    assert "__slots__" in vars(kind), f"{kind.__name__} has no slots"
    for f in dataclasses.fields(options):
        assert f.kw_only, f"{kind.__name__}.{f.name} is not keyword-only"
        value = getattr(options, f.name)
        if dataclasses.is_dataclass(value):
            _assert_typed(value)


CASES = [
    pytest.param(
        words, index, id=f"{' '.join(words)} {'/'.join(action.option_strings) or action.dest}"
    )
    for words, parser in leaves(build_parser())
    for index, action in enumerate(_options(parser))
]


def test_every_option_says_what_it_is_for() -> None:
    """``--help`` explains every option and argument of every command (28 of 126 once did not)."""
    silent = [
        f"{' '.join(words)} {'/'.join(a.option_strings) or a.dest}"
        for words, parser in leaves(build_parser())
        for a in _options(parser)
        if not (a.help or "").strip()
    ]
    assert not silent


def test_every_command_has_the_output_options() -> None:
    for words, parser in leaves(build_parser()):
        flags = {f for a in parser._actions for f in a.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose", "--format"} <= flags, " ".join(words)


def test_every_command_has_a_library_row() -> None:
    commands = {words for words, _ in leaves(build_parser())}
    assert commands == set(LIBRARY)


@pytest.mark.parametrize(("words", "index"), CASES)
def test_option_reaches_the_library(
    words: tuple[str, ...], index: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    parser = dict(leaves(build_parser()))[words]
    action = _options(parser)[index]
    dest = action.dest
    module, _, name = LIBRARY[words].partition(":")

    def record(options: object, *args: object, **kwargs: object) -> Any:
        raise Reached(options)

    monkeypatch.setattr(f"{module}.{name}", record)
    (tmp_path / "pins").mkdir()
    (tmp_path / "pins/manifest.toml").touch()  # a checkout: commands find their root by it
    monkeypatch.chdir(tmp_path)
    argv, expected = _argv(parser, action)
    with pytest.raises(Reached) as reached:
        main([*words, *argv])
    options = reached.value.options
    _assert_typed(options)
    values = _carried(options, dest)
    if dest in OUTPUT_DESTS and not values:
        if dest != "format":  # the level main set for this run
            assert getattr(output.level(), dest) is True
        output.configure()
        return
    output.configure()
    assert values, f"{' '.join(words)}: no field {dest!r} in {type(options).__name__}"
    assert any(_matches(v, expected) for v in values), f"{dest}: {values!r} != {expected!r}"


def test_each_command_alone_parses_as_the_whole_parser_does() -> None:
    """``main`` builds only the named command's group (``parser_for``): each group's COMMANDS are
    exactly what it registers, and every command's own parser, help and all, is the same either
    way."""
    whole = dict(leaves(build_parser()))
    for group in GROUPS:
        alone = argparse.ArgumentParser(prog="twinbuild")
        group.register(alone.add_subparsers(dest="command"))
        registered = [a for a in alone._actions if isinstance(a, argparse._SubParsersAction)]
        assert tuple(registered[0].choices) == group.COMMANDS, group.__name__
        for command in group.COMMANDS:
            assert parser_for([command, "--help"]) is build_parser(command)
            mine = dict(leaves(build_parser(command)))
            assert set(mine) == {w for w in whole if w[0] in group.COMMANDS}, command
            for words, parser in mine.items():
                assert parser.format_help() == whole[words].format_help(), words
                assert parser.format_usage() == whole[words].format_usage(), words
    for argv in ([], ["--help"], ["--version"], ["nonsense"], ["-q", "lint"]):
        assert parser_for(argv) is build_parser(), argv


@pytest.mark.parametrize(
    "argv",
    [["lint", "--bogus"], ["lint", "--version"], ["pins"], ["pins", "nope"], ["lint", "-h"]],
)
def test_a_command_alone_says_what_the_whole_parser_says(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    said = []
    for parser in (build_parser(argv[0]), build_parser()):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(argv)
        said.append((info.value.code, *capsys.readouterr()))
    assert said[0] == said[1]
