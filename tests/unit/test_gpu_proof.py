"""The GPU proof: its --dry-run (CI runs it), its verdicts, and its bad input.

The proof itself needs a GPU host (docs/smoke.md); here it runs for real where it can: the
script's --dry-run, the whole script on this GPU-less machine (every build step and check
skips with its reason, and a proof that proves nothing fails), and its bookkeeping.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from twinbuild.errors import FindingsError
from twinbuild.smoke import gpu
from twinbuild.smoke.gpu_probe import Verdict
from twinbuild.smoke.proof import CASES, ProofOptions, Row, prove, run_proof

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/gpu-proof.sh"


def _script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})}, check=False,
    )  # fmt: skip


def test_dry_run_lists_each_check_and_its_broken_case() -> None:
    run = _script("--dry-run")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "| check | proves | broken case it must fail on |"
    rows = [line.split(" | ") for line in lines[2:]]
    assert [r[0].lstrip("| ") for r in rows] == [c.check for c in CASES]
    assert all(r[2].strip(" |") for r in rows)  # every check names its broken case
    assert any("pre-fix torch_memory_saver" in line for line in lines)
    assert any("another architecture" in line for line in lines)
    assert any("floor 1.5x above the measured" in line for line in lines)


def test_usage_and_a_missing_sources_folder_are_bad_input(tmp_path: Path) -> None:
    assert _script().returncode == 2
    run = _script(str(tmp_path / "nope"))
    assert run.returncode == 2
    assert "nope" in run.stderr


def _tarball(tmp_path: Path, name: str) -> str:
    """A `git archive` tarball of a commit that is not the pinned one; returns that commit."""
    repo = tmp_path / f"{name}-repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "setup.py").write_text("raise SystemExit('not the pinned source')\n", encoding="utf-8")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    out = tmp_path / "sources" / f"{name}.tar"
    out.parent.mkdir(exist_ok=True)
    subprocess.run([*git, "archive", "-o", str(out), "HEAD"], check=True)
    return head


def test_the_script_refuses_other_commits_and_proves_nothing_without_a_gpu(
    tmp_path: Path,
) -> None:
    """No network, no GPU, sources at the wrong commits: each build step says why it failed, every
    check skips with its reason, the report is written, and the proof fails: nothing proven."""
    wrong = _tarball(tmp_path, "torch_memory_saver")
    _tarball(tmp_path, "torch_memory_saver-prefix")
    _tarball(tmp_path, "nccl-tests")
    out = tmp_path / "out"
    run = _script(str(tmp_path / "sources"), str(out), env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 1, run.stdout + run.stderr
    log = (out / "logs/tms.log").read_text(encoding="utf-8")
    assert f"holds {wrong}, the manifest pins b5588e83de86412a48689a6583a4b567e75f7acc" in log
    assert "gpu-proof: tms: failed" in run.stderr
    assert "nothing proven: every check skipped (no nvidia GPU on this machine" in run.stderr
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["counts"] == {"proven": 0, "healthy only": 0, "skipped": 13, "FAILED": 0}


def test_a_row_is_proven_only_when_healthy_passes_and_broken_fails() -> None:
    case = CASES[0]

    def v(outcome: str) -> Verdict:
        return Verdict(check=case.check, outcome=outcome, reasons=("r",))  # type: ignore[arg-type]

    assert Row(case=case, healthy=v("passed"), broken=v("failed")).status == "proven"
    assert Row(case=case, healthy=v("passed"), broken=v("passed")).status == "FAILED"
    assert Row(case=case, healthy=v("failed"), broken=v("failed")).status == "FAILED"
    assert Row(case=case, healthy=v("passed"), broken=v("skipped")).status == "healthy only"
    assert Row(case=case, healthy=v("skipped"), broken=v("skipped")).status == "skipped"


def test_a_gpu_without_its_stack_fails_every_check(tmp_path: Path) -> None:
    """A host that shows a GPU but whose Python has no torch: every check runs and fails (none
    passes vacuously, none is skipped), and the proof says which failed first."""
    info = gpu.GpuInfo(vendor="nvidia", model="NVIDIA H200", driver="580.159.03",
                           runtime="13.0", count=1)  # fmt: skip
    options = ProofOptions(manifest=ROOT / "pins/manifest.toml", python="/nonexistent/python",
                           tms=tmp_path, report=tmp_path / "r.json", timeout_s=10)  # fmt: skip
    proof = run_proof(options, detect=lambda _platform: info)
    statuses = {r.case.check: r.status for r in proof.rows}
    assert set(statuses.values()) == {"FAILED"}, statuses
    with pytest.raises(FindingsError) as err:
        prove(options, echo=lambda _line: None, detect=lambda _platform: info)
    assert str(err.value).startswith(
        "gpu-proof: 13 checks do not hold; first: torch-backend: healthy run failed:"
    )
    assert json.loads((tmp_path / "r.json").read_text())["host"]["gpu"]["model"] == "NVIDIA H200"


def test_the_library_path_holds_the_runtime_and_nccl_of_torchs_wheels(tmp_path: Path) -> None:
    """scripts/gpu-lib.sh's tb_library_path finds the CUDA 13 runtime (nvidia/cu13/lib, the
    layout of torch's cu130 wheels) and NCCL (nvidia/nccl/lib) in the interpreter's site folders:
    what the preload library and all_reduce_perf need on a bare host."""
    site = (
        tmp_path / "user" / f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    )
    for lib in ("nvidia/cu13/lib/libcudart.so.13", "nvidia/nccl/lib/libnccl.so.2"):
        (site / lib).parent.mkdir(parents=True)
        (site / lib).touch()
    run = subprocess.run(
        ["bash", "-c", ". scripts/gpu-lib.sh && tb_library_path"], cwd=ROOT, capture_output=True,
        text=True, check=False, timeout=60,
        env={**os.environ, "PYTHON": sys.executable, "PYTHONUSERBASE": str(tmp_path / "user"),
             "CUDA_HOME": str(tmp_path / "no-cuda")},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    dirs = run.stdout.strip().split(":")
    assert str(site / "nvidia/cu13/lib") in dirs
    assert str(site / "nvidia/nccl/lib") in dirs


#: What gpu_scripts.DEVICES prints on one H200 with torch 2.11+cu130 and driver 580.159.03 (the
#: lent GPU machine's versions); with CUDA_VISIBLE_DEVICES=99 torch sees none.
H200 = {
    "vendor": "nvidia", "available": True, "count": 1, "nodes": 1, "archs": ["9.0"],
    "names": ["NVIDIA H200"],
    "arch_list": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
    "env": {"CUDA_VISIBLE_DEVICES": None, "HIP_VISIBLE_DEVICES": None, "ROCR_VISIBLE_DEVICES": None},
    "driver": "580.159.03", "driver_cuda": 13000, "cu_init": 0,
    "libcuda": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.03", "rocm": "",
    "torch_cuda": "13.0", "torch_hip": None,
}  # fmt: skip


def test_the_device_rows_turn_one_reading_into_a_healthy_and_a_broken_case(
    tmp_path: Path,
) -> None:
    """The proof's own bookkeeping on the reading shape of an H200 host: the driver, declared
    architecture and torch architecture rows pass on the reading and fail on their broken case
    (the interpreter is a stand-in printing that reading; the checks themselves are real)."""
    hidden = {**H200, "available": False, "count": 0, "archs": [], "names": [], "arch_list": [],
              "env": {**H200["env"], "CUDA_VISIBLE_DEVICES": "99"}}  # type: ignore[dict-item]  # fmt: skip
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        f"if [ \"$CUDA_VISIBLE_DEVICES\" = 99 ]; then echo '{json.dumps(hidden)}'; "
        f"else echo '{json.dumps(H200)}'; fi\n",
        encoding="utf-8",
    )
    python.chmod(0o755)
    info = gpu.GpuInfo(vendor="nvidia", model="NVIDIA H200", driver="580.159.03",
                           runtime="13.0", count=1)  # fmt: skip
    options = ProofOptions(
        manifest=ROOT / "pins/manifest.toml",
        python=str(python),
        report=tmp_path / "r.json",
        timeout_s=30,
        perf=tmp_path / "all_reduce_perf",  # never run: one GPU
    )
    rows = {r.case.check: r for r in run_proof(options, detect=lambda _p: info).rows}
    for check in ("driver-toolkit", "gpu-arch-declared", "torch-arch", "visible-devices"):
        assert rows[check].status == "proven", (check, rows[check])
    assert rows["driver-toolkit"].broken.reasons == (
        "the driver supports CUDA 13.0, older than CUDA 13.1 that torch is built for: update "
        "the host's driver, or install the CUDA forward-compatibility package",
    )
    assert rows["torch-arch"].broken.readings["arch_list"] == [
        "sm_75", "sm_80", "sm_86", "sm_100", "sm_120", "compute_120",
    ]  # fmt: skip
    # One GPU: both all-reduce rows are skipped, healthy and broken, never passed.
    for check in ("all-reduce", "all-reduce-bandwidth"):
        assert rows[check].status == "skipped"
        assert rows[check].healthy.message.startswith("one GPU: an all-reduce on one GPU moves")
        assert rows[check].broken.outcome == "skipped"
    assert rows["memory-saver-free"].status == "skipped"  # no --tms: nothing was built
    # The stand-in prints no kernel listing: the kernel check fails on it, never passes.
    assert rows["kernel-arch"].healthy.message.startswith("kernel listing: incomplete reading")
