"""Issue 41's bad-input cases, each kept as a regression test at the CLI boundary: the same
sandbox, write fence, time bound and checks as the generated examples (``cli.go``), with the one
input that once crashed, hung, wrote outside the repository or said the wrong thing.

The generated classes that grew from them (digits that are not ASCII in every numeric field, a
link in every written path, a signal at any point of a writing command) are in
``test_fuzz_cli.py``.
"""

from __future__ import annotations

import http.server
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.fuzz import cli
from tests.helpers import serving

M = "pins/manifest.toml"
_count = itertools.count()
RECIPES = Path(__file__).resolve().parents[1] / "fixtures" / "recipes"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cli.template(tmp_path_factory.mktemp("template"))


@pytest.fixture
def box(template: Path, tmp_path: Path) -> cli.Sandbox:
    return cli.sandbox(template, tmp_path / f"case-{next(_count)}")


def _last(ran: cli.Ran) -> str:
    return ran.err.rstrip("\n").rpartition("\n")[2]


def _edit(box: cli.Sandbox, old: str, new: str) -> None:
    path = box.repo / M
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# -- 1. digits that are not ASCII -----------------------------------------------------------------


@pytest.mark.parametrize("count", ["\u00b2", "\u0661\u0662", "\uff11"])
@pytest.mark.parametrize("argv", [["lint"], ["render", "cuda"]])
def test_a_build_arg_count_in_other_digits_is_one_line(
    box: cli.Sandbox, count: str, argv: list[str]
) -> None:
    _edit(box, "[local]", f'[build_args]\nKERNELS_GB_PER_JOB = "{count}"\n\n[local]')
    ran = cli.go(box, argv)
    assert ran.code == 2, ran
    assert "build_args.KERNELS_GB_PER_JOB" in ran.err
    assert f"{count!r}: a count (GB per job, threads, jobs) is a whole number 1-4096" in ran.err


@pytest.mark.parametrize("value", ["\u00b2", "0", "\u0661\u0662", "3601", " 30"])
def test_the_index_timeout_is_ascii_seconds_and_0_is_refused(box: cli.Sandbox, value: str) -> None:
    argv = ["pins", "outdated", "--source", "pypi", "--index-url", "http://127.0.0.1:9/simple"]
    ran = cli.go(box, argv, {"TWINBUILD_INDEX_TIMEOUT": value})
    assert ran.code == 2, ran
    assert _last(ran) == (
        f"twinbuild: $TWINBUILD_INDEX_TIMEOUT: {value!r} is not a whole number from 1 to 3600; "
        "set whole seconds, e.g. 30, or unset it for the default"
    )


def test_a_repository_id_option_in_other_digits_names_the_option(box: cli.Sandbox) -> None:
    argv = ["evidence", "gate", "--head", "HEAD", "--base", "HEAD", "--pr", "42"]
    ran = cli.go(box, [*argv, "--repository-id", "\u0661\u0662"])
    assert ran.code == 2, ran
    assert _last(ran).startswith("twinbuild: --repository-id: '\u0661\u0662' is not a whole")
    assert "GITHUB_REPOSITORY_ID" not in ran.err


# -- 2, 3. links and the wrong kind of file where pins goes ------------------------------------


def _outside_pins(box: cli.Sandbox) -> bytes:
    outside = box.root / "outside"
    (box.repo / "pins").rename(outside)
    (box.repo / "pins").symlink_to(outside)
    return (outside / "manifest.toml").read_bytes()


def test_pins_bump_through_a_pins_link_to_outside_writes_nothing(box: cli.Sandbox) -> None:
    before = _outside_pins(box)
    ran = cli.go(box, ["pins", "bump", "numba", "--version", "0.66.0", "--why", "demo"])
    assert ran.code == 2, ran
    assert "outside the repository and the cache" in _last(ran)
    assert (box.root / "outside" / "manifest.toml").read_bytes() == before
    assert sorted(p.name for p in (box.root / "outside").iterdir()) == ["manifest.toml"]


def test_import_force_through_a_pins_link_to_outside_writes_nothing(box: cli.Sandbox) -> None:
    for name in ("cuda.Dockerfile", "rocm.Dockerfile"):
        (box.repo / name).write_bytes((RECIPES / name).read_bytes())
    before = _outside_pins(box)
    argv = ["import", "--force", "--out", M, "cuda.Dockerfile", "rocm.Dockerfile"]
    ran = cli.go(box, argv)
    assert ran.code == 2, ran
    assert "outside the repository and the cache" in _last(ran)
    assert (box.root / "outside" / "manifest.toml").read_bytes() == before


@pytest.mark.parametrize("kind", ["fifo", "self-link", "file", "dangling"])
def test_a_pins_that_is_no_folder_never_falls_back_to_a_parent(box: cli.Sandbox, kind: str) -> None:
    inner = box.repo / "inner"
    inner.mkdir()
    pins = inner / "pins"
    if kind == "fifo":
        os.mkfifo(pins)
    elif kind == "self-link":
        pins.symlink_to("pins")
    elif kind == "file":
        pins.write_text("")
    else:
        pins.symlink_to("nowhere")
    here = Path.cwd()
    box_inner = cli.Sandbox(root=box.root, repo=inner, cache=box.cache, home=box.home)
    ran = cli.go(box_inner, ["lint"])
    assert Path.cwd() == here
    assert ran.code == 2, ran
    assert _last(ran).startswith(f"twinbuild: {pins}: is ")
    assert "not a folder" in _last(ran)


# -- 4, 5. signals and SIGKILL ---------------------------------------------------------------------

#: A SIGTERM sent by the process to itself the moment it starts importing the command line (the
#: heavy imports): the handler must already be there.
_EARLY = """
import os, signal, sys
fired = []
def hook(event, args):
    if event == "import" and args[0] == "twinbuild.cli.main" and not fired:
        fired.append(1)
        os.kill(os.getpid(), signal.SIGTERM)
sys.addaudithook(hook)
sys.argv = ["twinbuild", "lint"]
from twinbuild.__main__ import main
raise SystemExit(main())
"""


def test_sigterm_while_the_command_line_is_imported_is_the_documented_ending(
    tmp_path: Path,
) -> None:
    done = subprocess.run(  # noqa: PLW1510 - the code is what is checked
        [sys.executable, "-c", _EARLY], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done
    assert done.stderr == "twinbuild: stopped by SIGTERM; nothing half-done was kept\n"


def test_the_script_enters_where_the_signal_handling_is_installed() -> None:
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "twinbuild"]
    assert script.value == "twinbuild.__main__:main"


#: Run a twinbuild command, SIGKILLed at the rename that would finish the write it names.
_KILLED_AT = """
import os, pathlib, signal, sys
real = pathlib.Path.replace
def replace(self, target):
    if self.name.startswith(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, target)
pathlib.Path.replace = replace
from twinbuild.cli.main import main
raise SystemExit(main(sys.argv[2:]))
"""


def _killed(folder: Path, prefix: str, *argv: str) -> None:
    done = subprocess.run(  # noqa: PLW1510 - the code is what is checked
        [sys.executable, "-c", _KILLED_AT, prefix, *argv], cwd=folder, capture_output=True,
        timeout=120, env={**os.environ, "TWINBUILD_CACHE": str(folder / "cache")},
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done


def test_a_keygen_killed_between_its_keys_is_finished_by_the_rerun(tmp_path: Path) -> None:
    from twinbuild.cli.main import main

    _killed(tmp_path, ".k.pub.", "evidence", "keygen", "--private", "k.pem", "--public", "k.pub")
    left = sorted(p.name for p in tmp_path.iterdir() if p.name != "cache")
    assert left[-1] == "k.pem", left
    assert len(left) == 3, left  # and both temporaries
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        code = main(["evidence", "keygen", "--private", "k.pem", "--public", "k.pub"])
    finally:
        os.chdir(here)
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["k.pem", "k.pub"]
    assert "BEGIN PUBLIC KEY" in (tmp_path / "k.pub").read_text()


def test_a_killed_write_leaves_a_temporary_file_the_next_run_removes(box: cli.Sandbox) -> None:
    argv = ["pins", "bump", "numba", "--version", "0.66.0", "--why", "demo"]
    _killed(box.repo, ".manifest.toml.", *argv)
    left = [p.name for p in (box.repo / "pins").iterdir()]
    assert len(left) == 2, left
    assert any(n.startswith(".manifest.toml.") for n in left), left
    ran = cli.go(box, argv)  # its check: no temporary file left anywhere in the sandbox
    assert ran.code == 0, ran
    assert [p.name for p in (box.repo / "pins").iterdir()] == ["manifest.toml"]


# -- 6, 7. what is shown, and the rest -------------------------------------------------------------


def test_pins_table_shows_a_versions_esc_and_newline_escaped(box: cli.Sandbox) -> None:
    _edit(box, 'version = "0.65.1"', 'version = "0.65.1\\u001b[31m|x\\nrow"')
    ran = cli.go(box, ["pins", "table"])
    assert ran.code == 0, ran
    assert "\x1b" not in ran.out
    (row,) = [line for line in ran.out.splitlines() if line.startswith("| numba ")]
    assert "`==0.65.1\\x1b[31m\\|x\\nrow`" in row
    assert row.count(" | ") == ran.out.splitlines()[2].count(" | ")  # no new column either


def test_pins_table_with_stdout_closed_is_one_line(box: cli.Sandbox) -> None:
    done = subprocess.run(  # noqa: PLW1510 - the code is what is checked
        [sys.executable, "-m", "twinbuild", "pins", "table"], cwd=box.repo, stdout=None,
        stderr=subprocess.PIPE, text=True, timeout=60, pass_fds=(), close_fds=True,
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr == (
        "twinbuild: stdout: is closed (the command was started with >&-); its output was not "
        "written, give it a stdout (> /dev/null to drop the output)\n"
    )


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ("GITHUB_REPOSITORY_ID=7\nGITHUB_REPOSITORY_ID=8\n",
         "env.txt:2: GITHUB_REPOSITORY_ID is given twice (also '7' above); give it once"),
        ("GITHUB_REPOSITORY=o/r\x1b[2J\n",
         "env.txt:1: GITHUB_REPOSITORY: 'o/r\\x1b[2J' holds a control character"),
        ("GITHUB_REPOSITORY_ID=\u0661\u0662\n",
         "env.txt:1: GITHUB_REPOSITORY_ID: '\u0661\u0662' is not a whole number"),
    ],
)  # fmt: skip
def test_an_env_file_with_a_name_twice_or_a_control_character_is_refused(
    box: cli.Sandbox, lines: str, said: str
) -> None:
    (box.repo / "env.txt").write_text(lines)
    argv = ["evidence", "gate", "--head", "HEAD", "--base", "HEAD", "--pr", "42"]
    ran = cli.go(box, [*argv, "--env-file", "env.txt"])
    assert ran.code == 2, ran
    assert _last(ran).startswith(f"twinbuild: {said}")


@pytest.mark.parametrize("reviews", ["fifo", "dir", "/dev/null"])
def test_reviews_errors_name_the_reviews_answer(box: cli.Sandbox, reviews: str) -> None:
    argv = ["evidence", "gate", "--head", "HEAD", "--base", "HEAD", "--pr", "42"]
    ran = cli.go(box, [*argv, "--reviews", reviews], {"GITHUB_REPOSITORY_ID": "7"})
    assert ran.code == 2, ran
    assert _last(ran).endswith("pass the reviews answer file itself")
    assert "evidence" not in _last(ran)


def test_a_look_alike_variant_names_the_character_that_differs(box: cli.Sandbox) -> None:
    ran = cli.go(box, ["render", "\u0441uda"])
    assert ran.code == 2, ran
    assert "did you mean 'cuda'? (U+0441 CYRILLIC SMALL LETTER ES at position 1" in _last(ran)


class _Answers(http.server.BaseHTTPRequestHandler):
    """A tags list and an index page that are not what they claim: ``/v2/...`` answers
    ``{}``/``[]``, ``/simple/...`` garbage; ``/drip/`` drips one byte a tenth of a second."""

    tags = b"{}"
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        if self.path.startswith("/drip/"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(600):  # a minute at most, whoever stops listening first
                try:
                    self.wfile.write(b"<")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.1)
            return
        body = self.tags if self.path.startswith("/v2/") else b"\x00\xffnot a page at all"
        kind = "application/json" if self.path.startswith("/v2/") else "text/plain"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def answers() -> Iterator[int]:
    _Answers.asked = []
    with serving(_Answers) as port:
        yield port


@pytest.mark.parametrize("tags", [b"{}", b"[]", b'{"tags": {}}', b'{"tags": [1]}'])
def test_a_malformed_tags_answer_is_said_so(box: cli.Sandbox, answers: int, tags: bytes) -> None:
    _Answers.tags = tags
    argv = ["pins", "outdated", "--source", "registry", "--base-registry", f"127.0.0.1:{answers}"]
    ran = cli.go(box, argv, {"TWINBUILD_REGISTRY_TIMEOUT": "5"})
    assert ran.code == 3, ran
    assert "the registry's tags answer is malformed" in ran.err
    assert "unknown" not in ran.out


def test_a_garbage_index_answer_is_said_so(box: cli.Sandbox, answers: int) -> None:
    index = f"http://127.0.0.1:{answers}/simple/"
    ran = cli.go(box, ["pins", "outdated", "--source", "pypi", "--index-url", index])
    assert ran.code == 3, ran
    assert "answered something malformed ('text/plain', not a simple API page)" in ran.err


def test_a_dripping_index_is_bounded_for_the_whole_command(box: cli.Sandbox, answers: int) -> None:
    """Twelve pins, one request at a time, each dripping until its 1 s deadline: the command's
    index budget (2 s) is spent on the first two, the rest are never sent."""
    pin = '[pins.extra{}]\nkind = "pypi"\nversion = "1.0"\nwhy = "x"\n\n'
    extra = "".join(pin.format(i) for i in range(9))
    _edit(box, "[pins.numba]", f"{extra}[pins.numba]")
    index = f"http://127.0.0.1:{answers}/drip/"
    argv = ["pins", "outdated", "--source", "pypi", "--index-url", index, "--jobs", "1"]
    ran = cli.go(box, argv, {"TWINBUILD_INDEX_TIMEOUT": "1"})
    assert ran.code == 3, ran
    assert "(12 of 12 not asked)" in ran.err
    assert 1 <= len(_Answers.asked) <= 4, _Answers.asked  # of 12 pins; 2 fit the budget
