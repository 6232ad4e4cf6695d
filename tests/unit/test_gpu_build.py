"""What the GPU proof builds, with real processes: sources at their pinned commits (a git
checkout or a ``git archive`` tarball), a build bounded by its limit (its whole process group
killed), and the two kernels compiled by the toolkit ``gpu_cuda`` finds (where nvcc is here)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from twinbuild.smoke import gpu_build, gpu_cuda


def _repo(path: Path) -> str:
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    path.mkdir(parents=True)
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "setup.py").write_text("print('source')\n", encoding="utf-8")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def test_a_checkout_or_its_git_archive_unpacks_only_at_the_pinned_commit(tmp_path: Path) -> None:
    head = _repo(tmp_path / "src")
    gpu_build.unpack(tmp_path / "src", head, tmp_path / "a")
    assert (tmp_path / "a/setup.py").read_text(encoding="utf-8") == "print('source')\n"
    assert not (tmp_path / "a/.git").exists()
    tar = tmp_path / "src.tar"
    subprocess.run(["git", "-C", str(tmp_path / "src"), "archive", "-o", str(tar), "HEAD"],
                   check=True)  # fmt: skip
    assert gpu_build.tar_commit(tar) == head
    gpu_build.unpack(tar, head, tmp_path / "b")
    assert (tmp_path / "b/setup.py").is_file()
    other = "0" * 40
    with pytest.raises(gpu_build.Refused) as err:
        gpu_build.unpack(tar, other, tmp_path / "c")
    assert str(err.value) == f"{tar} holds {head}, the manifest pins {other}"
    with pytest.raises(gpu_build.Refused) as err:
        gpu_build.unpack(tmp_path / "src", other, tmp_path / "c")
    assert str(err.value) == f"{tmp_path / 'src'} is at {head}, the manifest pins {other}"
    with pytest.raises(gpu_build.Refused) as err:
        gpu_build.unpack(tmp_path / "nope.tar", other, tmp_path / "c")
    assert str(err.value) == f"{tmp_path / 'nope.tar'}: no such checkout or tarball"


#: How long the build's processes would run if nothing killed them, and the bound the test holds
#: the kill to: 150x the 2 s limit, so no load on the machine reaches it, and half the sleeps, so a
#: run that waited for them can never pass.
SLEEP_S, ENDS_WITHIN_S = 600, 300


def _gone_or_dead(pid: int, within_s: float = ENDS_WITHIN_S) -> bool:
    """The process is gone, or a zombie its new parent has not reaped yet, within ``within_s``
    (SIGKILL is delivered when the process next runs, later on a loaded machine)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_a_build_past_its_limit_is_killed_with_its_children(tmp_path: Path) -> None:
    """make's compilers are children of make: the whole process group goes at the limit."""
    pids = tmp_path / "pids"
    started = time.monotonic()
    rc = gpu_build.run_logged(
        ["sh", "-c", f"sleep {SLEEP_S} & echo $! > {pids}; sleep {SLEEP_S}"],
        log=tmp_path / "b.log", limit_s=2,
    )  # fmt: skip
    assert rc == 124
    assert time.monotonic() - started < ENDS_WITHIN_S  # the sleeps did not run out
    child = int(pids.read_text(encoding="utf-8"))
    assert _gone_or_dead(child)
    assert (tmp_path / "b.log").read_text(encoding="utf-8").endswith("killed at its limit of 2s\n")


def test_a_build_tool_that_is_missing_is_127_and_one_line_in_its_log(tmp_path: Path) -> None:
    log = tmp_path / "b.log"
    assert gpu_build.run_logged(["tb-no-such-make", "all"], log=log, limit_s=60) == 127
    assert log.read_text(encoding="utf-8") == (
        "$ tb-no-such-make all\ntb-no-such-make: not found on PATH; install tb-no-such-make\n"
    )
    assert gpu_build.run_logged(["sh", "-c", "echo built; exit 2"], log=log, limit_s=60) == 2
    assert log.read_text(encoding="utf-8").endswith("$ sh -c echo built; exit 2\nbuilt\n")


def test_without_a_toolkit_each_build_says_what_is_missing(tmp_path: Path) -> None:
    missing = "no usable CUDA toolkit: CUDA_HOME is unset; no nvcc on PATH"
    builder = gpu_build.HostBuilder(python="python3", sources=tmp_path, work=tmp_path / "w",
                                    logs=tmp_path / "l", toolkit=missing, cuda_major="13")  # fmt: skip
    for built in (builder.tms("tms", "torch_memory_saver", "0" * 40, 60),
                  builder.kernels("90", "80", 60), builder.perf("90", "0" * 40, 60)):  # fmt: skip
        assert built.path is None
        assert built.reason == missing


@pytest.mark.skipif(isinstance(gpu_cuda.find(), str), reason="no CUDA toolkit here")
def test_the_two_kernels_build_with_the_toolkit_found(tmp_path: Path) -> None:
    """nvcc of the toolkit found (a wrapper on PATH or not) compiles the kernel for this GPU's
    architecture and for another one, each for that one architecture alone."""
    toolkit = gpu_cuda.find()
    builder = gpu_build.HostBuilder(python="python3", sources=tmp_path, work=tmp_path / "w",
                                    logs=tmp_path / "l", toolkit=toolkit, cuda_major="13")  # fmt: skip
    built = builder.kernels("90", "80", 600)
    assert built.path is not None, built.reason
    assert (built.path / "kernel-ok.so").stat().st_size > 0
    assert (built.path / "kernel-wrong.so").stat().st_size > 0
    log = (tmp_path / "l/kernels.log").read_text(encoding="utf-8")
    assert "-gencode arch=compute_90,code=sm_90 -o" in log
    assert "-gencode arch=compute_80,code=sm_80 -o" in log
