"""The shell of validate.yml's evidence steps and of gate.yml, run as the workflows run them.

The `run:` scripts are read from the workflow files (never copied here) and run with bash, in the
same folder layout (`tool/`, `branch/`, `unsigned/`), with the same environment variables and a
local bare repository as `origin`. The `uses:` steps are done by the test the way the actions do
them (clone, download the artifact), and `pip install` is replaced by `twinbuild` on PATH.
The evidence must end up committed on validate/pr-7, and the gate must accept the PR head.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import edit, mini_project
from tests.unit.evidence_builders import REPO, REPO_ID, smoke_report
from tests.unit.gate_repos import copy_builder_code
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.evidence import keygen
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.model import PLATFORMS

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
PR = 7
BRANCH = f"validate/pr-{PR}"
# Stand-ins for `pip install`: the steps we do not run, exactly as the workflows write them.
INSTALLS = {"python -m pip install ./tool", "python -m pip install ."}
_EXPR = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")

pytestmark = needs_git


def _steps(workflow: str, job: str) -> list[dict[str, Any]]:
    data = yaml.safe_load((WORKFLOWS / workflow).read_text(encoding="utf-8"))
    steps: list[dict[str, Any]] = data["jobs"][job]["steps"]
    return steps


def _expand(text: str, contexts: Mapping[str, str]) -> str:
    """Replace each ``${{ expr }}`` the way Actions would; an unknown one fails the test."""

    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        assert expr in contexts, f"the test does not know ${{{{ {expr} }}}}; teach it"
        return contexts[expr]

    return _EXPR.sub(one, text)


def _run_step(
    step: dict[str, Any], workspace: Path, env: Mapping[str, str], contexts: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    script = workspace.parent / "step.sh"
    script.write_text(_expand(step["run"], contexts), encoding="utf-8")
    step_env = {**env, **{k: _expand(str(v), contexts) for k, v in step.get("env", {}).items()}}
    cwd = workspace / step.get("working-directory", ".")
    # GitHub's default shell for run: steps on Linux.
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=cwd, env=step_env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def _run_steps(
    steps: list[dict[str, Any]],
    workspace: Path,
    env: Mapping[str, str],
    contexts: Mapping[str, str],
) -> list[str]:
    """Run every `run:` step but the installs; return what they printed."""
    out = []
    for step in steps:
        if "run" not in step or step["run"].strip() in INSTALLS:
            continue
        proc = _run_step(step, workspace, env, contexts)
        assert proc.returncode == 0, f"step {step.get('name', step['run'])!r}:\n{proc.stderr}"
        out += proc.stdout.splitlines()
    return out


def _twinbuild_on_path(folder: Path) -> Path:
    """`twinbuild` as `pip install` would put it on PATH: this checkout's package."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "twinbuild"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m twinbuild "$@"\n')
    exe.chmod(0o755)
    return folder


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    isolate_git(monkeypatch, tmp_path / "home")
    bin_dir = _twinbuild_on_path(tmp_path / "bin")
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_REPOSITORY_ID": str(REPO_ID),
        "GITHUB_ACTOR": "maintainer",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "RUNNER_NAME": "hosted-1",
        "RUNNER_ENVIRONMENT": "github-hosted",
    }


def test_validate_commits_signed_evidence_and_the_gate_accepts_the_pr(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # origin: main with the keys, the PR head at refs/pull/7/head, pushed by a maintainer to
    # validate/pr-7.
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = mini_project(tmp_path)
    copy_builder_code(work)
    pair = keygen(tmp_path / "secret" / "ci.key", work / "evidence/keys/ci.pub")
    git(work, "init", "-q", "-b", "main")
    base = commit_all(work, "main")
    edit(work / "pins/manifest.toml", 'version = "0.4.2"', 'version = "0.4.3"')
    head = commit_all(work, "bump flash-linear-attention")
    git(work, "push", "-q", str(origin), f"{base}:refs/heads/main")
    git(work, "push", "-q", str(origin), f"{head}:refs/pull/{PR}/head")
    git(work, "push", "-q", str(origin), f"{head}:refs/heads/{BRANCH}")
    found = commit_inputs(head, repo=work)

    push_env = {
        **env,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_SHA": head,
        "GITHUB_REF": f"refs/heads/{BRANCH}",
        "GITHUB_REF_NAME": BRANCH,
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/validate.yml@refs/heads/{BRANCH}",
    }
    # validate.yml, smoke job: its record step, on a checkout of the pushed branch, after a smoke
    # run that wrote its report.
    unsigned = tmp_path / "sign" / "unsigned"
    for platform in PLATFORMS:
        smoke_ws = tmp_path / f"smoke-{platform}"
        git(tmp_path, "clone", "-q", "--branch", BRANCH, str(origin), str(smoke_ws))
        _twinbuild_on_path(smoke_ws / ".venv" / "bin")
        report = smoke_report(platform, manifest_digest=found.manifest_digest)
        report["image"]["inputs_hash"] = found.inputs[platform]
        (smoke_ws / f"smoke-{platform}").mkdir()
        (smoke_ws / f"smoke-{platform}" / f"smoke-{platform}-production.json").write_text(
            json.dumps(report)
        )
        record = [
            s for s in _steps("validate.yml", "smoke") if "evidence record" in s.get("run", "")
        ]
        assert len(record) == 1
        _run_steps(record, smoke_ws, push_env, {"matrix.platform": platform})
        # actions/upload-artifact + download-artifact (pattern evidence-*, path unsigned)
        shutil.copytree(smoke_ws / f"evidence-{platform}", unsigned / f"evidence-{platform}")

    # validate.yml, sign job: tool/ is the default branch, branch/ the validate branch as data.
    sign_ws = tmp_path / "sign"
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(sign_ws / "tool"))
    git(tmp_path, "clone", "-q", "--branch", BRANCH, str(origin), str(sign_ws / "branch"))
    sign_contexts = {
        "secrets.TWINBUILD_EVIDENCE_KEY": pair.private_path.read_text(),
        "github.token": "ghs_not_a_real_token",
    }
    printed = _run_steps(_steps("validate.yml", "sign"), sign_ws, push_env, sign_contexts)
    assert [line.split(": ", 1)[1] for line in printed if "verdict" in line] == [
        f"cuda signed by {pair.keyid[:16]}, verdict passed",
        f"rocm signed by {pair.keyid[:16]}, verdict passed",
    ]
    tip = git(origin, "rev-parse", f"refs/heads/{BRANCH}")
    assert git(origin, "rev-parse", f"{tip}^") == head  # one evidence commit on the PR head
    assert git(origin, "ls-tree", "--name-only", tip, "evidence/").splitlines() == [
        "evidence/cuda.dsse.json",
        "evidence/keys",
        "evidence/rocm.dsse.json",
    ]

    # gate.yml: the default branch checked out, the PR and its evidence fetched as data.
    gate_ws = tmp_path / "gate"
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(gate_ws))
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "pull_request": {"number": PR, "base": {"sha": base}, "head": {"sha": head}},
                "repository": {"id": REPO_ID, "default_branch": "main"},
            }
        )
    )
    summary = tmp_path / "summary.md"
    gate_env = {
        **env,
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    gate_contexts = {
        "github.token": "ghs_not_a_real_token",
        "github.event.pull_request.number": str(PR),
        "github.event.pull_request.base.sha": base,
        "github.event.pull_request.head.sha": head,
    }
    printed = _run_steps(_steps("gate.yml", "gate"), gate_ws, gate_env, gate_contexts)
    verdicts = [line.split(";") for line in printed if line.startswith(("cuda:", "rocm:"))]
    assert [(v[0].split(" on ")[0], v[1].rsplit(", ", 1)[0]) for v in verdicts] == [
        (p, f" run 4242 attempt 1 on refs/heads/{BRANCH}, commit {head[:12]}")
        for p in ("cuda: 2 passed, 0 skipped", "rocm: 2 passed, 0 skipped")
    ]
    assert summary.read_text().startswith("## Evidence gate: accepted\n")
