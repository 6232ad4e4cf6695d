"""The output contract, command by command: JSON that parses, and a stdout that fails is one line.

Every reporting command that runs without an engine is run here for real, as a child process on
the mini project (committed, so plan, diff and evidence inputs have commits to read):

- with ``--format json`` its stdout is one JSON document, and its stderr holds no traceback;
- with stdout on ``/dev/full`` it exits 6 (DiskFull) with one line on stderr (``render ... >
  /dev/full`` once exited 0 having written nothing);
- with stdout a pipe whose reader is gone it ends quietly: exit 141 and nothing on stderr;
- with an ASCII-only stdout and a non-ASCII report it is one line and exit 2.

``registry env`` never writes an error where ``>> $GITHUB_ENV`` would append it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import mini_project
from tests.unit.gitrepos import git, init, isolate_git, needs_git

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
TIMEOUT_S = 60

#: Each reporting command that needs no engine, as run on the project (``{p}``: its root).
COMMANDS: dict[str, list[str]] = {
    "lint": ["lint"],
    "render": ["render", "cuda", "--profile", "production"],
    "pins table": ["pins", "table"],
    "pins bump": ["pins", "bump", "numba", "--version", "0.65.2", "--why", "numba 0.65.2",
                  "--dry-run"],
    "pins diff": ["pins", "diff"],
    "pins outdated": ["pins", "outdated", "--source", "git"],
    "plan": ["plan", "--base", "HEAD"],
    "bake": ["bake"],
    "import": ["import", str(FIXTURES / "real/miles/Dockerfile"),
               str(FIXTURES / "real/miles/Dockerfile.rocm"), "--out", "{p}/../draft.toml",
               "--force", "--allow-unrecognised"],
    "workflows check": ["workflows", "check", str(REPO / ".github/workflows/pr.yml")],
    "rerun-decision report": ["rerun-decision", "report", "--attempt", "1",
                              "--current", "{p}/../jobs.json"],
    "rerun-decision guard": ["rerun-decision", "guard", "--run", "{p}/../run.json"],
    "evidence inputs": ["evidence", "inputs", "--head", "HEAD"],
    "evidence check-push": ["evidence", "check-push", "--base", "HEAD", "--head", "HEAD"],
    "evidence keygen": ["evidence", "keygen", "--private", "{p}/../k.key",
                        "--public", "{p}/../k.pub"],
    "gpu-proof": ["gpu-proof", "--dry-run", "--variant", "cuda"],
}  # fmt: skip


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        isolate_git(patch, home)
        root = init(mini_project(tmp_path_factory.mktemp("contract")))
        git(root, "add", "-A")
        git(root, "commit", "-qm", "mini")
        jobs = {"jobs": [{"name": "GPU smoke (cuda)", "status": "completed",
                          "conclusion": "success"}]}  # fmt: skip
        (root.parent / "jobs.json").write_text(json.dumps(jobs))
        run = {"id": 42, "run_attempt": 1, "status": "completed", "conclusion": "failure",
               "path": ".github/workflows/nightly.yml"}  # fmt: skip
        (root.parent / "run.json").write_text(json.dumps(run))
        yield root


def _run(
    project: Path, argv: list[str], *, stdout: int | None = subprocess.PIPE, **env: str
) -> subprocess.CompletedProcess[str]:
    words = [a.replace("{p}", str(project)) for a in argv]
    for stale in ("k.key", "k.pub"):
        (project.parent / stale).unlink(missing_ok=True)
    environ = {
        **os.environ, "PYTHONPATH": str(REPO), "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(project.parent), **env,
    }  # fmt: skip
    environ.pop("GITHUB_ACTIONS", None)
    return subprocess.run(
        [sys.executable, "-m", "twinbuild", *words], cwd=project, env=environ, text=True,
        stdout=stdout, stderr=subprocess.PIPE, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


@needs_git
@pytest.mark.parametrize("name", list(COMMANDS))
def test_json_parses(project: Path, name: str) -> None:
    proc = _run(project, [*COMMANDS[name], "--format", "json"])
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)


@needs_git
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_full_disk_is_one_line_and_exit_6(project: Path, name: str) -> None:
    with open(os.devnull.replace("null", "full"), "w") as full:  # noqa: PTH123 (a device)
        proc = _run(project, COMMANDS[name], stdout=full.fileno())
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 6, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("twinbuild: ")]
    assert lines[-1] == (
        "twinbuild: stdout: no space left on device; the output is incomplete, free space"
    )
    assert proc.stderr.count("stdout: no space left") == 1


@needs_git
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_closed_pipe_ends_quietly(project: Path, name: str) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before a byte is written: `| head -0`
    try:
        proc = _run(project, COMMANDS[name], stdout=write)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr
    assert "Broken pipe" not in proc.stderr
    assert proc.returncode == 141, proc.stderr
    assert not [line for line in proc.stderr.splitlines() if "stdout" in line]


@needs_git
def test_an_ascii_stdout_is_one_line_naming_the_character(project: Path) -> None:
    proc = _run(project, ["pins", "table"], PYTHONIOENCODING="ascii")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith("twinbuild: stdout: cannot write U+")
    assert "PYTHONIOENCODING=utf-8" in proc.stderr
    assert "Traceback" not in proc.stderr


@needs_git
def test_help_on_a_full_disk_is_one_line_too(project: Path) -> None:
    with open(os.devnull.replace("null", "full"), "w") as full:  # noqa: PTH123 (a device)
        proc = _run(project, ["pins", "bump", "--help"], stdout=full.fileno())
    assert proc.returncode == 6
    assert "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr


def test_registry_env_never_writes_an_error_to_stdout(tmp_path: Path) -> None:
    """``twinbuild registry env >> $GITHUB_ENV`` once appended 'private registry is not
    running ...' as a line of the env file; the error belongs on stderr, stdout stays empty."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TWINBUILD_CACHE": str(tmp_path / "cache"),
           "TWINBUILD_REGISTRY_PORT": "9"}  # fmt: skip
    env.pop("TWINBUILD_REGISTRY", None)
    for action in ("env", "status"):
        proc = subprocess.run(
            [sys.executable, "-m", "twinbuild", "registry", action], env=env, cwd=tmp_path,
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
        assert proc.returncode == 3
        assert proc.stdout == ""
        assert proc.stderr.startswith("twinbuild: private registry is not running")


def test_engine_status_without_an_engine_says_so_on_stderr(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TWINBUILD_CACHE": str(tmp_path / "cache"),
           "DOCKER_HOST": f"unix://{tmp_path}/none.sock"}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "twinbuild", "engine", "status"], env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 3
    assert proc.stdout == ""
    assert (
        proc.stderr
        == f"twinbuild: no engine answers at unix://{tmp_path}/none.sock (DOCKER_HOST)\n"
    )
    as_json = subprocess.run(
        [sys.executable, "-m", "twinbuild", "engine", "status", "--format", "json"], env=env,
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout)["running"] is False


def test_quiet_says_nothing_but_errors_and_verbose_is_accepted_everywhere(project: Path) -> None:
    noisy = _run(project, ["lint"])
    assert "declared floating refs" in noisy.stderr
    quiet = _run(project, ["lint", "-q"])
    assert quiet.stderr == ""
    assert quiet.stdout == noisy.stdout
    assert _run(project, ["lint", "-v"]).returncode == 0
