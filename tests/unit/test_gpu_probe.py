"""The GPU checks' plumbing, with real processes: timeouts, crashes, output that is not JSON,
skips that are never passes. The judgements themselves are tested in test_gpu_checks.py,
test_gpu_arch.py and test_gpu_collective.py."""

from __future__ import annotations

import ast
import json
import stat
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from twinbuild.manifest.model import BandwidthFloor
from twinbuild.smoke import gpu_host, gpu_probe
from twinbuild.smoke.gpu_budget import Monotonic
from twinbuild.smoke.gpu_probe import Probe, Ran, Shell
from twinbuild.smoke.proof import CASES

SUITE = Path(gpu_probe.__file__).with_name("suite") / "test_gpu.py"


def _python(tmp_path: Path, body: str) -> str:
    """A stand-in interpreter: a shell script in place of the image's Python."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def local_shell(seconds: int) -> Shell:
    """The proof's shell on this machine, its step ending ``seconds`` (and a minute) from now."""
    clock = Monotonic()
    log = Path(tempfile.gettempdir()) / "gpu-probe.log"
    return gpu_host.local_shell(clock, clock.now() + seconds + 60, log)


def _probe(python: str, **more: object) -> Probe:
    return Probe(vendor="nvidia", variant="cuda", python=python, toolkit="13.0", **more)  # type: ignore[arg-type]


def test_a_hang_is_killed_and_fails_marked_hung(tmp_path: Path) -> None:
    probe = _probe(_python(tmp_path, "sleep 30"), timeout_s=1)
    verdict = gpu_probe.torch_backend(local_shell(1), probe)
    assert (verdict.outcome, verdict.hung) == ("failed", True)
    assert verdict.message.startswith(
        "torch GPU backend: did not finish within its timeout (exit 124)"
    )


def test_a_crash_or_no_json_fails_with_its_output(tmp_path: Path) -> None:
    crash = _probe(_python(tmp_path, "echo 'Segmentation fault' >&2; exit 139"))
    verdict = gpu_probe.matmul(local_shell(30), crash)
    assert (verdict.outcome, verdict.message) == (
        "failed", "GPU matmul: exited 139: Segmentation fault",
    )  # fmt: skip
    (tmp_path / "two").mkdir()
    chatty = _probe(_python(tmp_path / "two", "echo hello"))
    assert (
        gpu_probe.matmul(local_shell(30), chatty).message == "GPU matmul: printed no JSON: 'hello'"
    )


def test_the_env_reaches_the_script(tmp_path: Path) -> None:
    echo = _python(
        tmp_path, 'printf \'{"available": true, "count": 1, "cuda": "%s", "hip": null}\\n\' "$TB_X"'
    )
    probe = _probe(echo, env={"TB_X": "13.0"})
    assert gpu_probe.torch_backend(local_shell(30), probe).outcome == "passed"
    bare = _probe(echo)
    verdict = gpu_probe.torch_backend(local_shell(30), bare, env={"TB_X": ""})
    assert verdict.reasons == ("expected a CUDA build of torch, found cuda='' hip=None",)


def test_the_preload_checks_fail_when_the_package_is_missing(tmp_path: Path) -> None:
    probe = _probe(
        _python(
            tmp_path,
            "echo \"ModuleNotFoundError: No module named 'torch_memory_saver'\" >&2; exit 1",
        )
    )
    for check in gpu_probe.SAVER_CHECKS:
        verdict = gpu_probe.memory_saver(local_shell(30), probe, check)
        assert verdict.outcome == "failed", check
        assert "No module named 'torch_memory_saver'" in verdict.message


def test_all_reduce_skips_one_gpu_and_a_missing_binary_never_passes() -> None:
    def never(argv: object) -> Ran:
        raise AssertionError("all_reduce_perf must not run")

    probe = _probe("python3", perf="/usr/local/bin/all_reduce_perf")
    results, bandwidth = gpu_probe.all_reduce(never, probe, gpus=1, model="NVIDIA H200")
    assert (results.outcome, bandwidth.outcome) == ("skipped", "skipped")
    assert results.message.startswith("one GPU: an all-reduce on one GPU moves no data")
    none = gpu_probe.all_reduce(never, _probe("python3"), gpus=8, model="NVIDIA H200")
    assert [v.outcome for v in none] == ["skipped", "skipped"]
    zero = gpu_probe.all_reduce(never, probe, gpus=0, model="")
    assert [v.outcome for v in zero] == ["failed", "failed"]


def test_all_reduce_of_a_binary_that_cannot_run_fails_both(tmp_path: Path) -> None:
    header = (
        "# nThread 1 nGpus 2 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 1 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0"
    )
    error = "vm: Test NCCL failure common.cu:1005"
    perf = _python(tmp_path, f"echo '{header}'; echo '{error}' >&2; exit 2")
    floor = BandwidthFloor(gpu="NVIDIA H200", gpus=2, busbw_gbs=100.0, source="test")
    probe = _probe("python3", perf=perf, floors=(floor,))
    results, bandwidth = gpu_probe.all_reduce(local_shell(30), probe, gpus=2, model="NVIDIA H200")
    assert results.outcome == "failed"
    assert results.reasons == (
        f"{perf} exited 2: {header}\n{error}",
        f"{perf} printed no result rows: {header}\n{error}",
        f"{perf}: out of bounds values None",
        f"{perf}: bus bandwidth None GB/s on 2 GPUs (zero at sizes []); GPUs that communicate "
        "move bytes",
    )
    assert bandwidth.outcome == "failed"
    assert bandwidth.message.startswith(f"{perf} did not complete")


def test_every_suite_check_is_a_probe_check_and_in_the_proof() -> None:
    """The smoke suite's GPU tests and the proof's rows are the same checks."""
    failing = _probe("/nonexistent/python", perf="/nonexistent/perf")
    shell = local_shell(5)
    reading = {"archs": ["9.0"], "count": 2, "names": ["NVIDIA H200"], "arch_list": ["sm_90"]}
    produced = {
        gpu_probe.torch_backend(shell, failing).check,
        gpu_probe.matmul(shell, failing).check,
        gpu_probe.driver(reading, failing).check,
        gpu_probe.visible(reading, failing).check,
        gpu_probe.declared_arch(reading, failing).check,
        gpu_probe.torch_arch(reading, failing).check,
        gpu_probe.kernel_arch(shell, failing, reading, files=["/x"]).check,
        *(gpu_probe.memory_saver(shell, failing, c).check for c in gpu_probe.SAVER_CHECKS),
        *(v.check for v in gpu_probe.all_reduce(shell, failing, gpus=2, model="NVIDIA H200")),
    }
    assert produced == {c.check for c in CASES}
    tree = ast.parse(SUITE.read_text(encoding="utf-8"))
    tests = [
        n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
    ]
    assert len(tests) == len(CASES)


#: The torch-mode reading of a healthy run (what gpu_scripts.MEMORY_SAVER_TORCH prints last).
TORCH_DONE = {
    "stage": "done", "hook_mode": "torch", "region_bytes": 512 << 20, "free_before": 100 << 30,
    "free_paused": (100 << 30) + (514 << 20), "free_resumed": 100 << 30,
    "usable_after_resume": True,
}  # fmt: skip


def _crashing(tmp_path: Path, lines: list[dict[str, object]]) -> str:
    """An interpreter that prints ``lines`` and then dies of SIGSEGV, as torch mode can at exit."""
    body = "ulimit -c 0\n" + "".join(f"echo '{json.dumps(line)}'\n" for line in lines)
    return _python(tmp_path, body + "kill -SEGV $$")


def test_torch_mode_judges_a_complete_reading_and_notes_the_crash_at_exit(tmp_path: Path) -> None:
    """Upstream judges torch mode by what the work reported, not the exit code (its
    test_examples.py L99; torch_memory_saver#56): a crash after the complete reading is a note,
    and the reading is still judged (a bad one fails)."""
    probe = _probe(_crashing(tmp_path, [{"stage": "configured"}, TORCH_DONE]))
    verdict = gpu_probe.memory_saver(local_shell(30), probe, "memory-saver-torch-mode")
    assert verdict.outcome == "passed"
    assert verdict.notes[0].startswith(
        "torch_memory_saver torch mode: exited -11 after a complete reading (torch mode's known "
        "crash at interpreter exit, torch_memory_saver#56/#37"
    )
    (tmp_path / "bad").mkdir()
    unusable = {**TORCH_DONE, "usable_after_resume": False}
    bad = _probe(_crashing(tmp_path / "bad", [unusable]))
    verdict = gpu_probe.memory_saver(local_shell(30), bad, "memory-saver-torch-mode")
    assert verdict.reasons == (
        "the tensor was not usable after resume (a kernel on it gave wrong values)",
    )


def test_a_crash_before_the_complete_reading_fails_torch_mode(tmp_path: Path) -> None:
    probe = _probe(_crashing(tmp_path, [{"stage": "configured", "hook_mode": "torch"}]))
    verdict = gpu_probe.memory_saver(local_shell(30), probe, "memory-saver-torch-mode")
    assert verdict.outcome == "failed"
    assert verdict.message.startswith("torch_memory_saver torch mode: exited -11")
    assert verdict.notes == ()


def test_preload_mode_is_judged_by_its_exit_code_as_upstream_does(tmp_path: Path) -> None:
    """Only torch mode forgives a crash at exit: a preload check that crashes after a complete
    reading fails (upstream judges preload mode by ``proc.exitcode == 0``)."""
    done = {"stage": "done", "hook_mode": "preload", "preload_active": True,
            "ld_preload": "/x/torch_memory_saver_hook_mode_preload.so", "paused_tag": "grad_buffer",
            "kept_tag": "default", "paused_bytes": 1 << 28, "kept_bytes": 1 << 28,
            "free_before": 0, "free_paused": 1 << 28, "kept_exact": True}  # fmt: skip
    library = {"library": "/x/lib.so", "ld_preload": "/x/lib.so"}
    body = (
        'case "$*" in *configure_subprocess*) '
        f"echo '{json.dumps(library)}'; exit 0 ;; esac\n"
        f"ulimit -c 0\necho '{json.dumps(done)}'\nkill -SEGV $$"
    )
    verdict = gpu_probe.memory_saver(local_shell(30), _probe(_python(tmp_path, body)),
                                     "memory-saver-tags")  # fmt: skip
    assert verdict.outcome == "failed"
    assert verdict.message.startswith("torch_memory_saver tagged regions: exited -11")


def test_the_shell_keeps_a_stray_byte_and_says_a_missing_program(tmp_path: Path) -> None:
    shell = local_shell(30)
    ran = shell(["sh", "-c", "printf 'ok\\377\\n'; printf 'warn\\376' >&2; exit 3"])
    assert (ran.rc, ran.stdout, ran.stderr) == (3, "ok\ufffd\n", "warn\ufffd")
    missing = shell(["tb-no-such-python", "-c", "pass"])
    assert (missing.rc, missing.stderr) == (127, "tb-no-such-python: not found on PATH; "
                                                 "install tb-no-such-python")  # fmt: skip


def test_a_command_past_its_steps_deadline_goes_with_its_children(tmp_path: Path) -> None:
    """The proof's shell ends a command at its step's deadline whatever the command's own
    ``timeout`` says, and takes the processes it started along (a GPU script's children)."""
    pids = tmp_path / "pids"
    clock = Monotonic()
    shell = gpu_host.local_shell(clock, clock.now() + 2, tmp_path / "step.log")
    started = clock.now()
    ran = shell(["timeout", "1200", "sh", "-c", f"sleep 600 & echo $! > {pids}; sleep 600"])
    assert ran.rc == 124
    assert ran.stderr == "killed: its step's limit was spent"
    # The 600 s sleeps and the 1200 s timeout did not run out: the 2 s step limit ended it
    # (bound wide enough that no load on a CI machine reaches it).
    assert clock.now() - started < 300
    child = int(pids.read_text(encoding="utf-8"))
    stat = Path(f"/proc/{child}/stat")
    # Gone, or a zombie its new parent has not reaped yet: killed either way, not sleeping
    # (SIGKILL lands when the process next runs: later on a loaded machine, within 30 s here).
    for _ in range(300):
        try:
            if stat.read_text(encoding="utf-8").rsplit(")", 1)[1][1] in "ZX":
                break
        except OSError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"pid {child} still runs after its step's deadline")
    # A step whose deadline has passed starts nothing.
    late = gpu_host.local_shell(clock, clock.now() - 1, tmp_path / "step.log")
    assert late(["touch", str(tmp_path / "never")]).rc == 124
    assert not (tmp_path / "never").exists()


def test_the_kernel_tool_runs_through_the_shell_on_each_file_the_script_found(
    tmp_path: Path,
) -> None:
    """The kernel script (this machine's Python) finds the files and the tool on PATH and starts
    nothing; the check runs the tool once per file through its shell, under its timeout, with the
    probe's environment. A file that is not there is never handed to the tool."""
    tools = tmp_path / "bin"
    tools.mkdir()
    tool = tools / "cuobjdump"
    tool.write_text('#!/bin/sh\necho "ELF file    1: $(basename "$2").1.$(cat "$2").cubin"\n',
                    encoding="utf-8")  # fmt: skip
    tool.chmod(0o755)
    ok, wrong = tmp_path / "ok.so", tmp_path / "wrong.so"
    ok.write_text("sm_90", encoding="utf-8")
    wrong.write_text("sm_80", encoding="utf-8")
    shell, ran = local_shell(60), []

    def recorded(argv: Sequence[str]) -> Ran:
        ran.append(list(argv))
        return shell(argv)

    probe = _probe(sys.executable, env={"PATH": f"{tools}:/usr/bin:/bin"})
    reading = {"archs": ["9.0"]}
    good = gpu_probe.kernel_arch(recorded, probe, reading, files=[str(ok)], modules=[])
    assert (good.outcome, good.readings["targets"]) == ("passed", {"ok.so": ["sm_90"]})
    assert ran[1][-3:] == [str(tool), "--list-elf", str(ok)]
    assert ran[1][:4] == ["timeout", "-k", "10", str(gpu_probe.KERNEL_TOOL_TIMEOUT_S)]
    ran.clear()
    bad = gpu_probe.kernel_arch(recorded, probe, reading, files=[str(wrong), "/nonexistent.so"],
                                modules=[])  # fmt: skip
    assert bad.outcome == "failed"
    assert len(ran) == 2  # the script, and the tool on the one file that is there
    assert bad.reasons[0].startswith(f"wrong.so ({wrong}) is built for sm_80")
