"""GitHub Actions I/O read back the way the runner reads it: no value can forge another output,
no message can start a second workflow command, and the event payload is read strictly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.unit.github_runner import runner_outputs
from twinbuild.errors import ConfigError
from twinbuild.util import github


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command line split as the runner splits it, then unescaped."""
    m = re.fullmatch(r"::(\w+)(?: ([^:]*))?::(.*)", line)
    assert m is not None, line
    unescape = {"%25": "%", "%0D": "\r", "%0A": "\n", "%3A": ":", "%2C": ","}

    def plain(text: str) -> str:
        return re.sub(r"%(25|0D|0A|3A|2C)", lambda x: unescape[x.group(0)], text)

    props = dict(p.split("=", 1) for p in (m.group(2) or "").split(",") if p)
    return m.group(1), {k: plain(v) for k, v in props.items()}, plain(m.group(3))


def test_a_value_with_a_newline_cannot_set_another_output(tmp_path: Path) -> None:
    out = tmp_path / "output"
    forged = "cuda-build\nverdict=passed"
    github.write_outputs(
        {"verdict": "failed", "jobs": forged}, who="test", environ={"GITHUB_OUTPUT": str(out)}
    )
    assert runner_outputs(out.read_text()) == {"verdict": "failed", "jobs": forged}


def test_a_value_cannot_close_its_block_early(tmp_path: Path) -> None:
    out = tmp_path / "output"
    # The delimiter a fixed-delimiter writer would use, then a forged output after it.
    forged = "a\nEOF\nany=true\nghadelimiter_\nreasons<<EOF"
    github.write_outputs(
        {"any": "false", "reasons": forged}, who="test", environ={"GITHUB_OUTPUT": str(out)}
    )
    assert runner_outputs(out.read_text()) == {"any": "false", "reasons": forged}


def test_outputs_append_and_single_line_values_stay_plain(tmp_path: Path) -> None:
    out = tmp_path / "output"
    out.write_text("earlier=1\n")
    github.write_outputs({"cuda": "true"}, who="test", environ={"GITHUB_OUTPUT": str(out)})
    assert out.read_text() == "earlier=1\ncuda=true\n"


def test_outputs_need_the_variable_and_write_nothing_without_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        github.write_outputs({"a": "b"}, who="plan", environ={})
    assert str(info.value) == (
        "plan --github-output: GITHUB_OUTPUT is not set; run it in a GitHub Actions step or drop "
        "--github-output"
    )


@pytest.mark.parametrize("name", ["a=b", "a<<b", "a\nb", "", "1a"])
def test_output_names_are_plain_words(name: str) -> None:
    with pytest.raises(ValueError, match="step output name"):
        github.format_outputs({name: "x"})


def test_an_annotation_message_cannot_start_a_second_command() -> None:
    line = github.annotation("error", "50% off\r\n::warning::forged", file="a.toml", line=3)
    assert "\n" not in line
    assert "\r" not in line
    assert parse_command(line) == (
        "error",
        {"file": "a.toml", "line": "3"},
        "50% off\r\n::warning::forged",
    )


def test_an_annotation_property_cannot_add_another_property() -> None:
    line = github.annotation("warning", "m", file="x,line=99", title="T:1,2")
    assert parse_command(line) == ("warning", {"file": "x,line=99", "title": "T:1,2"}, "m")
    assert github.annotation("notice", "plain") == "::notice::plain"


def test_summaries_append_with_a_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    github.append_summary(path, "## one")
    github.append_summary(path, "## two\n")
    github.append_summary(None, "## nowhere")
    assert path.read_text() == "## one\n## two\n"
    assert github.step_summary({"GITHUB_STEP_SUMMARY": str(path)}) == path
    assert github.step_summary({}) is None


def test_the_event_payload_is_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "event.json"
    path.write_text('{"pull_request": {"number": 1}, "pull_request": {"number": 2}}')
    with pytest.raises(ConfigError, match="duplicate key 'pull_request'"):
        github.event({"GITHUB_EVENT_PATH": str(path)})
    path.write_text("[]")
    with pytest.raises(ConfigError) as info:
        github.event({"GITHUB_EVENT_PATH": str(path)})
    assert str(info.value) == (
        f"$GITHUB_EVENT_PATH {path}: the GitHub event payload is not a JSON object"
    )
    path.write_text(json.dumps({"pull_request": {"number": 7}}))
    assert github.event({"GITHUB_EVENT_PATH": str(path)}) == {"pull_request": {"number": 7}}
    assert github.event({}) == {}


def test_a_lint_finding_annotation_keeps_its_file_and_line() -> None:
    from twinbuild.lint.findings import Finding

    finding = Finding(path="pins/a,line=1.toml", line=42, code="TB001", message="x\n::error::y")
    assert parse_command(finding.github()) == (
        "error",
        {"file": "pins/a,line=1.toml", "line": "42", "title": "TB001"},
        "x\n::error::y",
    )
