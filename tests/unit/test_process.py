"""The one command runner, against real programs: what a command gets, how it ends, what is said.

Ctrl-C during a command (an install runs to its end, anything else stops at once) is
tests/unit/test_host.py's, through the engine's host runner that uses this one.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from twinbuild.errors import ConfigError
from twinbuild.util import process

ROOT = Path(__file__).resolve().parents[2]
SH = shutil.which("sh") or "/bin/sh"


def test_a_command_answers_with_its_status_and_both_streams() -> None:
    done = process.run([SH, "-c", "echo out; echo err >&2; exit 3"], timeout=None)
    assert (done.code, done.out, done.err, done.ok) == (3, "out\n", "err\n", False)
    assert done.argv == (SH, "-c", "echo out; echo err >&2; exit 3")


def test_merged_keeps_the_order_the_program_wrote() -> None:
    done = process.run([SH, "-c", "echo 1; echo 2 >&2; echo 3"], timeout=None, merged=True)
    assert (done.out, done.err) == ("1\n2\n3\n", "")


def test_text_is_utf8_with_a_replacement_and_binary_is_the_bytes() -> None:
    argv = [SH, "-c", r"printf 'caf\303\251 \377'"]
    assert process.run(argv, timeout=None).out == "café \ufffd"
    assert process.run(argv, timeout=None, binary=True).out == b"caf\xc3\xa9 \xff"


def test_stdin_is_closed_or_what_it_is_given() -> None:
    assert process.run(["cat"], timeout=None).out == ""  # never waits on our stdin
    assert process.run(["cat"], timeout=None, input=b"asked").out == "asked"


def test_env_is_set_on_top_of_this_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TB_INHERITED", "kept")
    done = process.run(
        [SH, "-c", 'echo "$TB_INHERITED $TB_ADDED"'], timeout=None, env={"TB_ADDED": "added"}
    )
    assert done.out == "kept added\n"
    assert "TB_ADDED" not in os.environ


def test_scrubbed_leaves_the_named_variables_and_no_prompts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TB_SECRET", "token")
    monkeypatch.setenv("TMPDIR", "/tmp")
    done = process.run(process.scrubbed(["env"]), timeout=None)
    seen = dict(line.split("=", 1) for line in done.out.splitlines())
    assert "TB_SECRET" not in seen
    assert seen["TMPDIR"] == "/tmp"
    assert seen["PATH"] == os.environ["PATH"]
    assert set(seen) <= {*process.ROOT_ENVIRONMENT, *process.NONINTERACTIVE}
    assert {k: seen[k] for k in process.NONINTERACTIVE} == process.NONINTERACTIVE


def test_a_command_past_its_timeout_is_killed_with_what_it_started() -> None:
    # the shell's child holds the output open: only killing the whole group ends the wait
    argv = [SH, "-c", "echo started; sleep 60; echo never"]
    with pytest.raises(process.CommandTimedOut) as info:
        process.run(argv, timeout=2)
    assert str(info.value) == f"{' '.join(argv)}: still running after 2s; stopped"
    assert info.value.out == "started\n"
    assert isinstance(info.value, ConfigError)  # one line, exit 2, never a traceback


def test_what_names_the_command_in_the_line() -> None:
    with pytest.raises(process.CommandTimedOut, match=r"^the suite: still running after 1.5s"):
        process.run(["sleep", "60"], timeout=1.5, what="the suite")


def test_a_missing_program_is_one_line_saying_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(process.CommandMissing) as info:
        process.run(["tb-no-such-program"], timeout=None)
    assert str(info.value) == "tb-no-such-program: not found on PATH; install tb-no-such-program"
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")  # not executable
    with pytest.raises(process.CommandMissing) as info:
        process.run([str(plain)], timeout=None)
    assert str(info.value) == (
        f"{plain}: cannot be run (Permission denied); check that it is a program you may run"
    )


def test_a_logged_command_appends_both_streams_in_order_and_answers_its_status(
    tmp_path: Path,
) -> None:
    log = tmp_path / "build.log"
    log.write_bytes(b"$ before\n")
    argv = [SH, "-c", "echo out; echo >&2 err; printf 'caf\\351\\n'; exit 3"]
    assert process.run_to_log(argv, log=log, timeout=None, env={"TB_X": "1"}) == 3
    assert log.read_bytes() == b"$ before\nout\nerr\ncaf\xe9\n"  # the program's bytes, as written
    assert process.run_to_log([SH, "-c", 'echo "$TB_X" "$PWD"'], log=log, timeout=None,
                              env={"TB_X": "on top"}, cwd=tmp_path) == 0  # fmt: skip
    assert log.read_text(encoding="utf-8", errors="replace").endswith(f"on top {tmp_path}\n")


def test_a_logged_command_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    # the shell's child would keep running (and writing to the log) were only the shell killed
    log = tmp_path / "build.log"
    pids = tmp_path / "pids"
    argv = [SH, "-c", f"echo started; sleep 60 & echo $! > {pids}; sleep 60; echo never"]
    with pytest.raises(process.CommandTimedOut, match=r"^the build: still running after 2s"):
        process.run_to_log(argv, log=log, timeout=2, what="the build")
    assert log.read_text(encoding="utf-8") == "started\n"
    child = Path(f"/proc/{int(pids.read_text(encoding='utf-8'))}/stat")
    for _ in range(300):  # gone, or a zombie not reaped yet: SIGKILL lands when it next runs
        try:
            if child.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                break
        except OSError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"{child} still runs after its timeout")


def test_a_logged_program_that_is_missing_is_the_same_one_line(tmp_path: Path) -> None:
    with pytest.raises(process.CommandMissing, match=r"^tb-no-such-program: not found on PATH"):
        process.run_to_log(["tb-no-such-program"], log=tmp_path / "b.log", timeout=None)


def test_a_detached_command_outlives_the_call_and_writes_its_log(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    marker = tmp_path / "done"
    pid = process.spawn_detached([SH, "-c", f"echo up; echo >&2 warn; : > {marker}"], log)
    os.waitpid(pid, 0)
    assert marker.exists()
    assert log.read_text() == "up\nwarn\n"


def _gone(pid: int) -> bool:
    """``pid`` ended (or is a zombie not reaped yet: SIGKILL lands when it next runs), waiting
    for it at most 30 s."""
    stat = Path(f"/proc/{pid}/stat")
    for _ in range(300):
        try:
            if stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_a_streamed_command_hands_over_each_line_as_it_is_written(tmp_path: Path) -> None:
    # the program writes its second line only once the first was handed over: lines that came
    # at the end (or in a buffer) would leave it waiting out its 60 s, then exit 9
    seen = tmp_path / "seen"
    script = (
        f"echo one; echo >&2 err; i=0; while [ ! -e {seen} ]; do i=$((i+1)); "
        "[ $i -gt 600 ] && exit 9; sleep 0.1; done; printf 'two\\r\\ncaf\\377\\n'; "
        'echo "$TB_ADDED $PWD"; exit 3'
    )
    lines: list[str] = []

    def on_line(text: str) -> None:
        lines.append(text)
        seen.touch()

    code = process.stream([SH, "-c", script], on_line=on_line, stop_grace=30,
                          env={"TB_ADDED": "on top"}, cwd=tmp_path)  # fmt: skip
    assert code == 3
    assert lines == ["one", "err", "two", "caf\ufffd", f"on top {tmp_path}"]


def test_an_interrupted_stream_asks_the_command_to_stop_and_lets_it_finish(
    tmp_path: Path,
) -> None:
    # SIGTERM reaches the whole group: the shell's own handler runs, its child goes too
    said = tmp_path / "said"
    pids = tmp_path / "pids"
    # the child says its pid once it runs a program of its own (a forked shell not yet there
    # would take SIGTERM as its parent's trap and carry on)
    script = (
        f"trap 'echo cancelled > {said}; exit 5' TERM; "
        f"{SH} -c 'echo $$ > {pids}; exec sleep 60' & "
        f"until [ -s {pids} ]; do sleep 0.1; done; echo up; wait"
    )

    def on_line(text: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the build runs

    with pytest.raises(KeyboardInterrupt):
        process.stream([SH, "-c", script], on_line=on_line, stop_grace=30)
    assert said.read_text(encoding="utf-8") == "cancelled\n"  # its grace, used
    assert _gone(int(pids.read_text(encoding="utf-8")))


def test_a_streamed_command_that_will_not_stop_is_killed_after_its_grace(tmp_path: Path) -> None:
    # both the shell and its sleep ignore SIGTERM: only the SIGKILL after the grace ends them
    pids = tmp_path / "pids"
    script = f"trap '' TERM; sleep 60 & echo $! > {pids}; echo up; wait"

    def on_line(text: str) -> None:
        raise RuntimeError("the reader failed")

    with pytest.raises(RuntimeError, match="the reader failed"):
        process.stream([SH, "-c", script], on_line=on_line, stop_grace=1)
    assert _gone(int(pids.read_text(encoding="utf-8")))


def test_stop_streams_stops_a_stream_a_worker_thread_runs(tmp_path: Path) -> None:
    # a Ctrl-C reaches the main thread alone; the worker's command ends, and its status says so
    import signal
    import threading

    started = threading.Event()
    codes: list[int] = []

    def worker() -> None:
        codes.append(process.stream([SH, "-c", "echo up; exec sleep 60"],
                                    on_line=lambda _: started.set(), stop_grace=30))  # fmt: skip

    thread = threading.Thread(target=worker)
    thread.start()
    assert started.wait(30)
    process.stop_streams()
    thread.join(30)
    assert not thread.is_alive()
    assert codes == [-signal.SIGTERM]


def test_a_streamed_program_that_is_missing_is_the_same_one_line() -> None:
    with pytest.raises(process.CommandMissing, match=r"^tb-no-such-program: not found on PATH"):
        process.stream(["tb-no-such-program"], on_line=print, stop_grace=1)


def _starts_processes(path: Path) -> list[int]:
    """Lines of ``path`` that call subprocess.run, Popen or check_output (by any spelling)."""
    starters = {"run", "Popen", "check_output", "call"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        called = (
            isinstance(node, ast.Attribute)
            and node.attr in starters
            and isinstance(node.value, ast.Name)
            and node.value.id == "subprocess"
        )
        imported = (
            isinstance(node, ast.ImportFrom)
            and node.module == "subprocess"
            and bool({a.name for a in node.names} & starters)
        )
        if called or imported:
            found.append(getattr(node, "lineno", 0))
    return sorted(found)


#: Modules that still start a process themselves, and why each may. Each must still do so: an
#: entry that no longer applies fails, so the list only shrinks.
ELSEWHERE: dict[str, str] = {}


def test_only_the_runner_starts_processes() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / "twinbuild").rglob("*.py"))
        if (lines := _starts_processes(path))
    }
    assert sorted(found) == sorted({"twinbuild/util/process.py", *ELSEWHERE})


def test_the_check_sees_each_spelling(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "import subprocess\nfrom subprocess import check_output\n"
        "subprocess.run(['x'])\nsubprocess.Popen(['x'])\nsubprocess.CompletedProcess([], 0)\n"
    )
    assert _starts_processes(path) == [2, 3, 4]


def test_no_text_under_twinbuild_but_the_runner_names_a_process_start() -> None:
    """What issue 42 asks of ``git grep -n "subprocess\\.\\(run\\|Popen\\|check_output\\)"
    twinbuild``, asked of every file under twinbuild/ (any kind, as git grep reads them): only
    util/process.py. Scripts run inside an image (smoke/gpu_scripts.py) start nothing either: a
    check runs the vendor's tool through its own shell (gpu_probe.kernel_arch)."""
    pattern = re.compile(r"subprocess\.(run|Popen|check_output)")
    found = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "twinbuild").rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and pattern.search(path.read_text(encoding="utf-8", errors="replace"))
    )
    assert found == ["twinbuild/util/process.py"]


def test_only_env_is_the_whole_environment_the_command_gets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uv's resolution must not be steered by the caller's UV_* variables: ``only_env`` hands the
    command exactly the mapping given, nothing of this process's environment."""
    monkeypatch.setenv("UV_INDEX_URL", "http://steered.invalid/simple")
    env = shutil.which("env") or "/usr/bin/env"
    shown = process.run([env], timeout=30, env={"ONLY": "this"}, only_env=True).out
    assert shown.splitlines() == ["ONLY=this"]
    on_top = process.run([env], timeout=30, env={"ONLY": "this"}).out.splitlines()
    assert "ONLY=this" in on_top
    assert "UV_INDEX_URL=http://steered.invalid/simple" in on_top
