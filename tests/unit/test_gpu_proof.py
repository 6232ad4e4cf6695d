"""The GPU proof: its --dry-run (CI runs it), the rehearsal of the whole flow on this CPU host,
its budget, its output folder, the script, and its bad input.

The proof itself needs a GPU host (docs/smoke.md). Here the rehearsal runs the same flow, budget
logic, incremental report and three outputs on a fake GPU layer (``gpu_rehearse``, ``gpu_fake``):
real processes, real tarballs checked against the pinned commits, a clock the test controls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from twinbuild.cli.main import main
from twinbuild.errors import ConfigError, FindingsError
from twinbuild.manifest.loader import load
from twinbuild.smoke import gpu, gpu_rehearse, gpu_report
from twinbuild.smoke.gpu_build import PRE_FIX_TMS
from twinbuild.smoke.gpu_host import Machine
from twinbuild.smoke.gpu_probe import Ran, Shell, Verdict
from twinbuild.smoke.proof import CASES, Proof, ProofOptions, Row, prove

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/gpu-proof.sh"
MANIFEST = ROOT / "pins/manifest.toml"
THREE = {"report.jsonl", "table.md", "logs.tar.gz"}


def _script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})}, check=False,
    )  # fmt: skip


def _options(tmp_path: Path, **more: object) -> ProofOptions:
    return ProofOptions(manifest=MANIFEST, out=tmp_path / "out", work=tmp_path / "work",
                        rehearse=True, **more)  # type: ignore[arg-type]  # fmt: skip


def _rehearsal(options: ProofOptions) -> Machine:
    assert options.work is not None
    return gpu_rehearse.machine(load(MANIFEST), options.variant, options.sources, options.work)


def _statuses(lines: list[dict[str, object]]) -> dict[str, object]:
    return {str(x["check"]): x["status"] for x in lines if x["kind"] == "check"}


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


def test_the_cases_are_in_the_budgets_priority_order() -> None:
    groups = [c.group for c in CASES]
    order = ["host", "memory-saver", "device", "all-reduce"]
    assert groups == sorted(groups, key=order.index)
    assert groups[0] == "host"
    assert groups[-1] == "all-reduce"


@dataclass(frozen=True, slots=True)
class Whole:
    options: ProofOptions
    proof: Proof
    printed: list[str]


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Whole:
    """One whole rehearsal (the default budget), shared by the tests that read it."""
    options = _options(tmp_path_factory.mktemp("whole"))
    printed: list[str] = []
    proof = prove(options, echo=printed.append, say=lambda _l: None,
                  machine=_rehearsal(options))  # fmt: skip
    return Whole(options=options, proof=proof, printed=printed)


def test_the_rehearsal_proves_every_check_one_h200_can_run(whole: Whole) -> None:
    """The whole flow on the fake H200: every check proven but the two all-reduce rows, which
    one GPU skips; OUT holds the three files and nothing else; the table printed is OUT's."""
    options, proof, printed = whole.options, whole.proof, whole.printed
    statuses = {r.case.check: r.status for r in proof.rows}
    assert [r.case.check for r in proof.rows] == [c.check for c in CASES]
    for check, status in statuses.items():
        want = "skipped" if check.startswith("all-reduce") else "proven"
        assert status == want, (check, proof.rows)
    rows = {r.case.check: r for r in proof.rows}
    assert rows["all-reduce"].healthy.message.startswith("one GPU: an all-reduce on one GPU")
    assert {p.name for p in options.out.iterdir()} == THREE
    lines = gpu_report.read(options.out / "report.jsonl")
    assert lines[0]["kind"] == "host"
    assert lines[-1]["kind"] == "end"
    assert _statuses(lines) == statuses
    assert lines[0]["gpu"]["model"] == "NVIDIA H200"
    table = (options.out / "table.md").read_text(encoding="utf-8")
    assert table.rstrip("\n") == printed[0]
    assert "11 proven, 0 healthy only, 2 skipped, 0 not run, 0 failed" in table
    with tarfile.open(options.out / "logs.tar.gz") as bundle:
        names = bundle.getnames()
    assert "checks/memory-saver-free.log" in names
    assert "tms.log" in names


def test_torch_mode_crashing_at_exit_after_its_reading_is_a_note(whole: Whole) -> None:
    """The fake torch mode dies of SIGSEGV at exit after its complete reading, as
    torch_memory_saver#56 reports; upstream ignores that exit code, so the row passes with a note.
    Its broken case (expandable_segments, refused by the package) still fails."""
    proof = whole.proof
    row = next(r for r in proof.rows if r.case.check == "memory-saver-torch-mode")
    assert row.status == "proven"
    assert row.healthy.notes == (
        "torch_memory_saver torch mode: exited -11 after a complete reading (torch mode's known "
        "crash at interpreter exit, torch_memory_saver#56/#37; upstream's test_examples.py "
        "ignores torch mode's exit code): Fatal Python error: Segmentation fault "
        "Garbage-collecting",
    )
    assert row.broken.message == (
        "torch_memory_saver torch mode: exited 1: RuntimeError: TorchMemorySaver is disabled for "
        "the current process because expandable_segments is not supported yet."
    )
    # The cpu-backup broken case fails on the check's own judgement of its reading.
    backup = next(r for r in proof.rows if r.case.check == "memory-saver-cpu-backup")
    assert "resume did not restore the region's bytes" in backup.broken.message
    free = next(r for r in proof.rows if r.case.check == "memory-saver-free")
    assert free.case.abort_only.startswith("the pre-fix package ends the process inside cudaFree")


def test_a_30s_budget_leaves_a_valid_report_of_the_rows_it_finished(
    tmp_path: Path, whole: Whole
) -> None:
    """30 modelled seconds (the rehearsal's clock moves only by what each step stands for, so
    the cut lands in the same place on any machine): the rows that ran are the full run's, the
    rest are "not run", the report is valid line by line, and the proof says the budget ran out."""
    options = _options(tmp_path / "cut", budget_s=30)
    with pytest.raises(FindingsError) as err:
        prove(options, echo=lambda _l: None, say=lambda _l: None, machine=_rehearsal(options))
    assert str(err.value) == (
        "gpu-proof: the 30s budget ran out before 9 checks (first: memory-saver-free); the "
        "report keeps the 4 that ran"
    )
    lines = gpu_report.read(options.out / "report.jsonl")
    assert {p.name for p in options.out.iterdir()} == THREE
    statuses = _statuses(lines)
    assert statuses["torch-backend"] == statuses["matmul"] == "proven"
    finished = {c: s for c, s in statuses.items() if s != "not run"}
    assert finished == {
        r.case.check: r.status for r in whole.proof.rows if r.case.check in finished
    }
    assert set(statuses) - set(finished) == {
        "memory-saver-free", "memory-saver-torch-mode", "memory-saver-tags",
        "memory-saver-cpu-backup", "driver-toolkit", "visible-devices", "gpu-arch-declared",
        "torch-arch", "kernel-arch",
    }  # fmt: skip
    end = lines[-1]
    assert end["kind"] == "end"
    assert float(end["spent_s"]) <= 30
    assert "not run: the budget ran out" in json.dumps(lines)


def test_a_run_stopped_midway_keeps_every_finished_row(tmp_path: Path) -> None:
    """Killed in the middle of a check (here: its fifth command raises, as a SIGTERM would),
    the report holds every check that finished, each line whole, and the table shows them."""
    options = _options(tmp_path)
    machine = _rehearsal(options)
    calls = {"n": 0}

    def dying(deadline: float, log: Path) -> Shell:
        inner = machine.runner(deadline, log)

        def run(argv: Sequence[str]) -> Ran:
            calls["n"] += 1
            if calls["n"] == 9:
                raise KeyboardInterrupt
            return inner(argv)

        return run

    with pytest.raises(KeyboardInterrupt):
        prove(options, echo=lambda _l: None, say=lambda _l: None,
              machine=replace(machine, runner=dying))  # fmt: skip
    lines = gpu_report.read(options.out / "report.jsonl")
    # SIGKILL in the middle of the next line's write: that line is left out, the rest read.
    whole = (options.out / "report.jsonl").read_bytes()
    (options.out / "report.jsonl").write_bytes(whole + b'{"kind": "check", "che')
    assert gpu_report.read(options.out / "report.jsonl") == lines
    (options.out / "report.jsonl").write_bytes(whole + b'{"kind": "check", "che\n')
    with pytest.raises(ConfigError, match=f"report.jsonl:{len(lines) + 1}: not a JSON line"):
        gpu_report.read(options.out / "report.jsonl")
    done = [x["check"] for x in lines if x["kind"] == "check"]
    assert done == ["torch-backend", "memory-saver-free", "memory-saver-torch-mode"]
    table = (options.out / "table.md").read_text(encoding="utf-8")
    assert "| memory-saver-torch-mode |" in table
    assert "10 to come" in table
    assert {p.name for p in options.out.iterdir()} == THREE


def test_sources_at_other_commits_are_refused_naming_both(tmp_path: Path) -> None:
    """The same sources layout with tarballs of other commits: the builds refuse them, the
    memory-saver rows skip saying why, and nothing claims the package was tested."""
    wrong = "0123456789abcdef0123456789abcdef01234567"
    sources = gpu_rehearse.standin_sources(tmp_path / "sources", {
        "torch_memory_saver": wrong, "torch_memory_saver-prefix": PRE_FIX_TMS, "nccl-tests": wrong,
    })  # fmt: skip
    options = _options(tmp_path, sources=sources)
    proof = prove(options, echo=lambda _l: None, say=lambda _l: None, machine=_rehearsal(options))
    row = next(r for r in proof.rows if r.case.check == "memory-saver-free")
    assert row.status == "skipped"
    pinned = load(MANIFEST).find("torch-memory-saver")
    assert pinned is not None
    assert row.healthy.message == (
        f"no torch_memory_saver: {sources / 'torch_memory_saver.tar'} holds {wrong}, the "
        f"manifest pins {pinned.common.commit}"
    )


def test_a_row_is_proven_only_when_healthy_passes_and_broken_fails() -> None:
    case = CASES[0]

    def v(outcome: str) -> Verdict:
        return Verdict(check=case.check, outcome=outcome, reasons=("r",))  # type: ignore[arg-type]

    assert Row(case=case, healthy=v("passed"), broken=v("failed")).status == "proven"
    assert Row(case=case, healthy=v("passed"), broken=v("passed")).status == "FAILED"
    assert Row(case=case, healthy=v("failed"), broken=v("failed")).status == "FAILED"
    assert Row(case=case, healthy=v("passed"), broken=v("skipped")).status == "healthy only"
    assert Row(case=case, healthy=v("skipped"), broken=v("skipped")).status == "skipped"
    cut = Row(case=case, healthy=v("skipped"), broken=v("skipped"), not_run=True)
    assert cut.status == "not run"


def test_a_gpu_without_its_stack_fails_every_check_that_runs(tmp_path: Path) -> None:
    """A host that shows a GPU but whose interpreter does not exist: every check that runs
    fails (none passes vacuously), and the proof says which failed first."""
    options = _options(tmp_path)
    machine = replace(_rehearsal(options), python="/nonexistent/python")
    with pytest.raises(FindingsError) as err:
        prove(options, echo=lambda _l: None, say=lambda _l: None, machine=machine)
    assert str(err.value).startswith(
        "gpu-proof: 10 checks do not hold; first: torch-backend: healthy run failed:"
    )
    statuses = _statuses(gpu_report.read(options.out / "report.jsonl"))
    assert {c for c, s in statuses.items() if s != "FAILED"} == {
        "kernel-arch", "all-reduce", "all-reduce-bandwidth",
    }  # fmt: skip
    assert set(statuses.values()) == {"FAILED", "skipped"}


def test_the_script_on_a_gpu_less_host_proves_nothing_and_leaves_three_files(
    tmp_path: Path,
) -> None:
    """This CPU host, for real: no nvidia-smi, no GPU. Every check skips with that reason, the
    proof fails (nothing proven), and OUT holds the report, the table and the bundle alone."""
    (tmp_path / "sources").mkdir()
    out = tmp_path / "out"
    run = _script(str(tmp_path / "sources"), str(out), "--budget", "60",
                  env={"PATH": "/usr/bin:/bin", "TWINBUILD_CACHE": str(tmp_path / "cache")})  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    assert "nothing proven: every check skipped (no nvidia GPU on this machine" in run.stderr
    assert {p.name for p in out.iterdir()} == THREE
    end = gpu_report.read(out / "report.jsonl")[-1]
    assert end["counts"] == {"proven": 0, "healthy only": 0, "skipped": 13, "not run": 0,
                             "FAILED": 0}  # fmt: skip
    assert run.stdout.splitlines()[0] == "| check | healthy | broken case | broken | status |"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "GPU proof on a bare GPU host"),
        (("only-sources",), "usage: scripts/gpu-proof.sh SOURCES OUT [--budget SECONDS]"),
        (("{tmp}/nope", "{tmp}/out"), "{tmp}/nope: no such folder (the carried sources)"),
        (("{tmp}", "{tmp}/out", "--budget", "²"), "--budget ²: not a whole number of seconds"),
        (("{tmp}", "{tmp}/out", "--budget"), "--budget takes one number of seconds"),
        (("{tmp}", "{tmp}/out", "--fast"), "unknown argument '--fast'"),
    ],
)
def test_the_scripts_bad_input_exits_2_with_one_line(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    run = _script(*(a.format(tmp=tmp_path) for a in args))
    assert run.returncode == 2
    assert message.format(tmp=tmp_path) in run.stderr
    assert not (tmp_path / "out").exists()


def test_dry_run_of_an_unknown_variant_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["gpu-proof", "--dry-run", "--variant", "nosuch", "--manifest", str(MANIFEST)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert "variants.nosuch: unknown variant 'nosuch'" in err[0]
    assert "cu13" in err[0]
    assert "rocm720-mi35x" in err[0]


def test_nvidia_smi_printing_a_non_utf8_byte_is_read_with_replacement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real nvidia-smi on PATH printing 0xff (a mangled product name): detection reads it with
    U+FFFD in its place instead of crashing with UnicodeDecodeError."""
    smi = tmp_path / "bin/nvidia-smi"
    smi.parent.mkdir()
    smi.write_bytes(
        b"#!/bin/sh\n"
        b'case "$*" in\n'
        b"  *name,driver_version*) printf 'NVIDIA H200 \\377, 580.95.05\\n' ;;\n"
        b"  *compute_cap*) printf '9.0\\n' ;;\n"
        b"  *) printf 'CUDA Version: 13.0 \\377|\\n' ;;\n"
        b"esac\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:/usr/bin:/bin")
    info = gpu.detect("nvidia")
    assert info is not None
    assert (info.model, info.driver, info.runtime, info.archs) == (
        "NVIDIA H200 \ufffd",
        "580.95.05",
        "13.0",
        ("9.0",),
    )


def test_the_library_path_holds_the_runtime_and_nccl_of_torchs_wheels(tmp_path: Path) -> None:
    """scripts/gpu-lib.sh's tb_library_path (scripts/gpu-host-tools.sh's) finds the CUDA 13
    runtime (nvidia/cu13/lib, the layout of torch's cu130 wheels) and NCCL (nvidia/nccl/lib) in
    the interpreter's site folders: what the preload library and all_reduce_perf need."""
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


def test_the_rehearsal_on_eight_gpus_builds_and_proves_all_reduce(tmp_path: Path) -> None:
    """Eight fake H200s (an HGX board, where the manifest declares a 225 GB/s floor): the budget
    reaches all-reduce last, all_reduce_perf is built (for sm_90 alone) and both rows are
    proven: -c 0 runs without validation, a floor 1.5x the measured bandwidth is not met."""
    options = _options(tmp_path)
    assert options.work is not None
    machine = gpu_rehearse.machine(load(MANIFEST), "cu13", None, options.work, gpus=8)
    proof = prove(options, echo=lambda _l: None, say=lambda _l: None, machine=machine)
    assert {r.case.check: r.status for r in proof.rows} == {c.check: "proven" for c in CASES}
    rows = {r.case.check: r for r in proof.rows}
    perf = options.work / "nccl-tests-ae98985f5599-sm90/all_reduce_perf"
    assert rows["all-reduce"].broken.reasons[0] == (
        f"{perf} ran without its correctness check (validation: 0)"
    )
    assert rows["all-reduce-bandwidth"].healthy.readings["floor_gbs"] == 225
    lines = gpu_report.read(options.out / "report.jsonl")
    builds = [x["name"] for x in lines if x["kind"] == "build"]
    assert builds == ["tms", "tms-prefix", "kernels", "all_reduce_perf"]
