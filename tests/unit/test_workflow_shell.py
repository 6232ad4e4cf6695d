"""The shell of validate.yml, validate-gpu.yml and gate.yml, run as the workflows run them.

The `run:` scripts are read from the workflow files (never copied here) and run with bash, in the
same folder layout (`tool/`, `data/`, `image/`, `unsigned/`, `signed/`), with the same environment
variables and a local bare repository as `origin`. The `uses:` steps are done by the test the way
the actions do them (clone, upload and download an artifact), `pip install` is replaced by
`twinbuild` on PATH, and `gh api` by a stand-in that answers with GitHub's list-reviews shape. The
steps that need a registry and a GPU (login, the smoke run itself) are the ones not run: the test
writes the report the smoke run writes. The evidence must end up committed on validate/pr-7, by
git objects alone, and the gate must accept the PR head.
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

from tests.helpers import MINI_VARIANTS, edit, image, mini_project
from tests.unit import fake_github
from tests.unit.evidence_builders import REPO, REPO_ID, smoke_report
from tests.unit.gate_repos import copy_builder_code, copy_codeowners
from tests.unit.github_runner import runner_outputs
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from tests.unit.reviews import LEVELS, OWNER, permission, reviews_file
from twinbuild.evidence import keygen, load_trusted, verify
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.loader import load

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
PR = 7
BRANCH = f"validate/pr-{PR}"
# Stand-ins for `pip install`: the steps we do not run, exactly as the workflows write them
# (tests/unit/test_locks.py checks that each installs from a hash-checked lock).
_LOCKED = (
    "python -m pip install --require-hashes -r {where}locks/{lock}.txt"
    " && python -m pip install --no-deps --no-build-isolation {tool}"
)
INSTALLS = {
    _LOCKED.format(where="./tool/", lock="gate", tool="./tool"),
    _LOCKED.format(where="", lock="gate", tool="."),
    "python3 -m venv .venv && "
    + _LOCKED.format(where="./tool/", lock="image", tool="./tool").replace(
        "python -m", ".venv/bin/python -m"
    ),
    "python3 -m venv .venv && "
    + _LOCKED.format(where="", lock="image", tool=".").replace("python -m", ".venv/bin/python -m"),
}
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


#: Steps of validate-gpu.yml's smoke job that need a registry or a GPU; the test does their part.
NEEDS_A_GPU = ("Log the engine in", "Smoke that digest", "Log out")
SHA_RE = re.compile(r"[0-9a-f]{40}")


def _run_job(
    workflow: str,
    job: str,
    workspace: Path,
    env: Mapping[str, str],
    contexts: Mapping[str, str],
    *,
    skip: tuple[str, ...] = (),
) -> list[str]:
    steps = [s for s in _steps(workflow, job) if not str(s.get("name", "")).startswith(skip)]
    return _run_steps(steps, workspace, env, contexts)


def _fake_gh(folder: Path, reviews: Path) -> None:
    """`gh api --paginate --slurp repos/OWNER/REPO/pulls/N/reviews...`, answered from a file."""
    gh = folder / "gh"
    gh.write_text(
        "#!/bin/sh\n"
        f'[ "$1 $2 $3 $4" = "api --paginate --slurp repos/{REPO}/pulls/{PR}/reviews?per_page=100" ]'
        ' || { echo "gh: unexpected call: $*" >&2; exit 1; }\n'
        f'cat "{reviews}"\n'
    )
    gh.chmod(0o755)


def _workflow_run_event(path: Path, head: str) -> Path:
    """The workflow_run payload GitHub sends when the validation build finished."""
    repo = {"id": REPO_ID, "full_name": REPO}
    path.write_text(
        json.dumps(
            {
                "action": "completed",
                "workflow_run": {
                    "id": 5150, "name": "validate", "path": ".github/workflows/validate.yml",
                    "event": "push", "status": "completed", "conclusion": "success",
                    "head_branch": BRANCH, "head_sha": head, "run_attempt": 1,
                    "repository": repo, "head_repository": repo,
                },
                "repository": {**repo, "default_branch": "main"},
            }
        )
    )  # fmt: skip
    return path


def test_validate_commits_signed_evidence_and_the_gate_accepts_the_pr(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # origin: main with the keys and the owners, the PR head at refs/pull/7/head, pushed by a
    # maintainer to validate/pr-7.
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = mini_project(tmp_path)
    copy_builder_code(work)
    copy_codeowners(work)
    pair = keygen(tmp_path / "secret" / "ci.key", work / "evidence/keys/ci.pub")
    git(work, "init", "-q", "-b", "main")
    base = commit_all(work, "main")
    edit(work / "pins/manifest.toml", 'version = "0.4.2"', 'version = "0.4.3"')
    head = commit_all(work, "bump flash-linear-attention")
    git(work, "push", "-q", str(origin), f"{base}:refs/heads/main")
    git(work, "push", "-q", str(origin), f"{head}:refs/pull/{PR}/head")
    git(work, "push", "-q", str(origin), f"{head}:refs/heads/{BRANCH}")
    found = commit_inputs(head, repo=work)
    images = {
        p: f"127.0.0.1:5000/twinbuild/{p}@sha256:{n * 64}"
        for p, n in zip(MINI_VARIANTS, "34", strict=True)
    }

    # validate.yml (the PR's code): the build job hands the pushed digest on as an artifact.
    build_env = {**env, "GITHUB_EVENT_NAME": "push", "GITHUB_SHA": head}
    artifacts = tmp_path / "artifacts"
    for platform in MINI_VARIANTS:
        build_ws = tmp_path / f"build-{platform}"
        build_ws.mkdir()
        contexts = {
            "matrix.name": f"{platform}-amd64",
            "steps.push.outputs.image": images[platform],
        }
        handoff = [
            s for s in _steps("validate.yml", "build") if "pushed digest" in s.get("name", "")
        ]
        _run_steps(handoff, build_ws, build_env, contexts)
        shutil.copytree(build_ws / f"image-{platform}-amd64", artifacts / f"image-{platform}-amd64")

    # validate-gpu.yml (the default branch's): GitHub starts it with the finished run's payload.
    privileged_env = {
        **env,
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_EVENT_PATH": str(_workflow_run_event(tmp_path / "workflow_run.json", head)),
        "GITHUB_SHA": base,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/validate-gpu.yml@refs/heads/main",
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
    }
    (tmp_path / "runner-temp").mkdir()
    trigger_ws = tmp_path / "trigger"
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(trigger_ws))
    outputs = tmp_path / "trigger-outputs"
    outputs.write_text("")
    _run_job(
        "validate-gpu.yml",
        "trigger",
        trigger_ws,
        {**privileged_env, "GITHUB_OUTPUT": str(outputs)},
        {"github.token": "ghs_not_a_real_token", "github.event.workflow_run.head_branch": BRANCH},
    )
    trigger = runner_outputs(outputs.read_text())
    assert trigger == {"commit": head, "pr": str(PR), "branch": BRANCH, "run-id": "5150"}
    needs = {f"needs.trigger.outputs.{k}": v for k, v in trigger.items()}
    token = {"github.token": "ghs_not_a_real_token"}

    # smoke job: default-branch twinbuild in tool/, the validated commit as git objects.
    unsigned = tmp_path / "sign" / "unsigned"
    for platform in MINI_VARIANTS:
        smoke_ws = tmp_path / f"smoke-{platform}"
        git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(smoke_ws / "tool"))
        _twinbuild_on_path(smoke_ws / ".venv" / "bin")
        leg = f"{platform}-amd64"
        shutil.copytree(artifacts / f"image-{leg}", smoke_ws / "image")  # download-artifact
        contexts = {
            "matrix.variant": platform, "matrix.arch": "linux/amd64", "matrix.name": leg,
            **needs, **token,
        }  # fmt: skip
        done = []
        for step in _steps("validate-gpu.yml", "smoke"):
            name = str(step.get("name", ""))
            if "run" not in step or str(step["run"]).strip() in INSTALLS:
                continue
            if name.startswith(NEEDS_A_GPU):
                if name.startswith("Smoke that digest"):  # what the smoke run leaves behind
                    assert (smoke_ws / "image/image").read_text().strip() == images[platform]
                    digest = load(smoke_ws / "data/pins/manifest.toml").digest()
                    report = smoke_report(platform, manifest_digest=digest)
                    report["image"]["digest"] = images[platform]
                    (smoke_ws / f"smoke-{leg}").mkdir()
                    (smoke_ws / f"smoke-{leg}/smoke-{leg}-production.json").write_text(
                        json.dumps(report)
                    )
                continue
            _run_steps([step], smoke_ws, privileged_env, contexts)
            done.append(name)
        assert done == [
            "The validated commit, as git objects (never checked out, never run)",
            "Record evidence (unsigned; the sign job signs it)",
        ]
        manifest = git(work, "cat-file", "blob", f"{head}:pins/manifest.toml")
        assert (smoke_ws / "data/pins/manifest.toml").read_text().strip() == manifest
        # actions/upload-artifact + download-artifact (pattern evidence-*, path unsigned)
        shutil.copytree(smoke_ws / f"evidence-{leg}", unsigned / f"evidence-{leg}")

    # sign job: tool/ is the default branch; the branch is only ever git objects.
    sign_ws = tmp_path / "sign"
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(sign_ws / "tool"))
    sign_contexts = {
        **needs,
        **token,
        "secrets.TWINBUILD_EVIDENCE_KEY": pair.private_path.read_text(),
    }
    printed = _run_job("validate-gpu.yml", "sign", sign_ws, privileged_env, sign_contexts)
    assert [line.split(": ", 1)[1] for line in printed if "verdict" in line] == [
        f"cuda (linux/amd64) signed by {pair.keyid[:16]}, verdict passed",
        f"rocm (linux/amd64) signed by {pair.keyid[:16]}, verdict passed",
    ]
    tip = git(origin, "rev-parse", f"refs/heads/{BRANCH}")
    assert git(origin, "rev-parse", f"{tip}^") == head  # one evidence commit on the PR head
    assert git(origin, "ls-tree", "--name-only", tip, "evidence/").splitlines() == [
        "evidence/cuda-amd64.dsse.json",
        "evidence/keys",
        "evidence/rocm-amd64.dsse.json",
    ]
    assert git(origin, "diff", "--name-only", head, tip).splitlines() == [
        "evidence/cuda-amd64.dsse.json",
        "evidence/rocm-amd64.dsse.json",
    ]
    recorded = verify(
        sign_ws / "signed/cuda-amd64.dsse.json", trusted=load_trusted(work / "evidence/keys")
    )
    assert recorded.statement.predicate.build.inputs_hash == found.inputs[image("cuda")]
    assert recorded.statement.predicate.source.ref == f"refs/heads/{BRANCH}"
    assert recorded.statement.predicate.run.event == "workflow_run"

    # gate.yml: the default branch checked out, the PR and its evidence fetched as data.
    printed, summary = _gate_steps(tmp_path, env, origin, head, base, reviews=[])
    verdicts = [
        line.split(";") for line in printed if line.startswith(("cuda-amd64:", "rocm-amd64:"))
    ]
    assert [(v[0].split(" on ")[0], v[1].rsplit(", ", 1)[0]) for v in verdicts] == [
        (p, f" run 4242 attempt 1 on refs/heads/{BRANCH}, commit {head[:12]}")
        for p in ("cuda-amd64: 2 passed, 0 skipped", "rocm-amd64: 2 passed, 0 skipped")
    ]
    assert summary.read_text().startswith("## Evidence gate: accepted\n")


def _gate_steps(
    tmp_path: Path,
    env: Mapping[str, str],
    origin: Path,
    head: str,
    base: str,
    *,
    reviews: list[tuple[str, str, str]],
    check: bool = True,
) -> tuple[list[str], Path]:
    """gate.yml's steps, in a fresh checkout of the default branch; (printed lines, summary).
    GitHub's API (which the gate asks whether each approving owner can write) answers LEVELS."""
    with fake_github.serving() as github:
        for login, level in LEVELS.items():
            where = f"/repos/{REPO}/collaborators/{login}/permission"
            github.answer(where, permission(login, level))
        return _gate_steps_asking(
            github, tmp_path, env, origin, head, base, reviews=reviews, check=check
        )


def _gate_steps_asking(
    github: fake_github.FakeGitHub,
    tmp_path: Path,
    env: Mapping[str, str],
    origin: Path,
    head: str,
    base: str,
    *,
    reviews: list[tuple[str, str, str]],
    check: bool,
) -> tuple[list[str], Path]:
    gate_ws = tmp_path / "gate"
    shutil.rmtree(gate_ws, ignore_errors=True)
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(gate_ws))
    bin_dir = tmp_path / "gh-bin"
    bin_dir.mkdir(exist_ok=True)
    _fake_gh(bin_dir, reviews_file(tmp_path / "reviews-answer.json", *reviews))
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
    summary.write_text("")
    runner_temp = tmp_path / "gate-temp"
    runner_temp.mkdir(exist_ok=True)
    gate_env = {
        **env,
        "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_API_URL": github.url,
    }
    contexts = {
        "github.token": "ghs_not_a_real_token",
        "github.event.pull_request.number": str(PR),
        "github.event.pull_request.head.sha": head,
    }
    if check:
        return _run_steps(_steps("gate.yml", "gate"), gate_ws, gate_env, contexts), summary
    out = []
    for step in _steps("gate.yml", "gate"):
        if "run" not in step or step["run"].strip() in INSTALLS:
            continue
        proc = _run_step(step, gate_ws, gate_env, contexts)
        out.append(proc)
    last = out[-1]
    return [str(last.returncode), *last.stderr.splitlines()], summary


def test_the_gate_step_refuses_a_new_key_until_a_code_owner_approves_the_head(
    tmp_path: Path, env: dict[str, str]
) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = mini_project(tmp_path)
    copy_builder_code(work)
    copy_codeowners(work)
    git(work, "init", "-q", "-b", "main")
    base = commit_all(work, "main")
    keygen(tmp_path / "mallory" / "m.key", work / "evidence/keys/mallory.pub")
    head = commit_all(work, "trust one more key")
    git(work, "push", "-q", str(origin), f"{base}:refs/heads/main")
    git(work, "push", "-q", str(origin), f"{head}:refs/pull/{PR}/head")
    refused, summary = _gate_steps(tmp_path, env, origin, head, base, reviews=[], check=False)
    assert refused[0] == "9"
    assert refused[1].startswith("twinbuild: evidence/keys/mallory.pub: trust root: ")
    assert summary.read_text().startswith("## Evidence gate: refused\n- evidence/keys/")
    printed, _ = _gate_steps(tmp_path, env, origin, head, base, reviews=[(OWNER, "APPROVED", head)])
    # the gate step asked GitHub (with the job's token) whether the owner can write
    assert f"(@{OWNER}: maintain; permissions from GitHub)" in printed[-2]
    assert [line.split(";")[0] for line in printed if not line.startswith("no validate/")] == [
        "trust roots: 1 changed (evidence/keys/mallory.pub)",
        f"no image input changed between the base {base[:12]} and the head {head[:12]} "
        f"(cuda-amd64 {commit_inputs(head, repo=work).inputs[image('cuda')][:19]}, rocm-amd64 "
        f"{commit_inputs(head, repo=work).inputs[image('rocm')][:19]})",
    ]


def test_validate_joins_each_multi_arch_variants_digests_into_one_index(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """validate.yml's `index` job, its own shell: the matrix the `images` job writes (the real
    `twinbuild variants --matrix`, this checkout's manifest), the digests the build jobs left as
    artifacts (`image-<name>/image`), and the real `twinbuild push --index` against a registry on
    127.0.0.1: one index for cu13 (amd64 + arm64), none for a variant of one architecture."""
    from tests import fake_registry as fake

    workspace = tmp_path / "ws"
    shutil.copytree(ROOT / "pins", workspace / "pins")
    venv = workspace / ".venv/bin"
    _twinbuild_on_path(venv)
    (venv / "python").symlink_to(sys.executable)
    outputs = tmp_path / "github_output"
    outputs.touch()
    with fake.serving() as server:
        run_env = {**env, "GITHUB_OUTPUT": str(outputs), "TWINBUILD_REGISTRY": server.address}
        _run_job("validate.yml", "images", workspace, run_env, {})
        matrix = runner_outputs(outputs.read_text())["matrix"]
        rows = json.loads(matrix)["include"]
        assert {r["name"] for r in rows} >= {"cu13-amd64", "cu13-arm64", "rocm720-mi35x-amd64"}
        pushed = {}
        for row in rows:  # what each build job pushed and left as its artifact
            arch = row["arch"].removeprefix("linux/")
            digest, _ = server.image(f"twinbuild-ci/{row['variant']}", seed=row["name"], arch=arch)
            pushed[row["name"]] = f"{server.address}/twinbuild-ci/{row['variant']}@{digest}"
            (workspace / f"image-{row['name']}").mkdir()
            (workspace / f"image-{row['name']}/image").write_text(pushed[row["name"]] + "\n")
        contexts = {
            "vars.TWINBUILD_REGISTRY": server.address,
            "needs.images.outputs.matrix": matrix,
            "github.token": "t",
        }
        out = _run_job(
            "validate.yml", "index", workspace, {**run_env, "MATRIX": matrix}, contexts,
            skip=("Log in", "Log out"),
        )  # fmt: skip
        stored = server.manifest_at("twinbuild-ci/cu13", "production")
        assert stored is not None
        index = json.loads(stored)
        assert {(m["platform"]["architecture"], m["digest"]) for m in index["manifests"]} == {
            ("amd64", pushed["cu13-amd64"].rpartition("@")[2]),
            ("arm64", pushed["cu13-arm64"].rpartition("@")[2]),
        }
        assert server.manifest_at("twinbuild-ci/rocm720-mi35x", "production") is None
    assert out == [
        f"cu13: {server.address}/twinbuild-ci/cu13@{fake.digest_of(stored)} "
        f"(index of linux/amd64 {pushed['cu13-amd64'].rpartition('@')[2][:19]}, "
        f"linux/arm64 {pushed['cu13-arm64'].rpartition('@')[2][:19]})"
    ]


def test_validate_index_job_refuses_a_digest_of_the_wrong_architecture(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The arm64 build's artifact names an amd64 image: the index step fails with twinbuild's one
    line (exit 2) and no index is pushed."""
    from tests import fake_registry as fake

    workspace = tmp_path / "ws"
    shutil.copytree(ROOT / "pins", workspace / "pins")
    venv = workspace / ".venv/bin"
    _twinbuild_on_path(venv)
    (venv / "python").symlink_to(sys.executable)
    matrix = json.dumps({"include": [
        {"variant": "cu13", "arch": "linux/amd64", "name": "cu13-amd64"},
        {"variant": "cu13", "arch": "linux/arm64", "name": "cu13-arm64"},
    ]})  # fmt: skip
    with fake.serving() as server:
        for name in ("cu13-amd64", "cu13-arm64"):
            digest, _ = server.image("twinbuild-ci/cu13", seed=name, arch="amd64")  # both amd64
            (workspace / f"image-{name}").mkdir()
            (workspace / f"image-{name}/image").write_text(
                f"{server.address}/twinbuild-ci/cu13@{digest}\n"
            )
        step = next(
            s for s in _steps("validate.yml", "index") if s.get("name", "").startswith("One index")
        )
        proc = _run_step(
            step, workspace, {**env, "MATRIX": matrix, "TWINBUILD_REGISTRY": server.address}, {}
        )
        assert server.manifest_at("twinbuild-ci/cu13", "production") is None
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("twinbuild: --index ")
    assert proc.stderr.rstrip().endswith(": a linux/amd64 image twice")


def _tagged_origin(tmp_path: Path) -> tuple[Path, str, str]:
    """origin: main; the PR's branch validate/pr-7 at its head H; a tag named validate/pr-7 at an
    intermediate commit I of the PR (anyone who can write may push one). (origin, I, H)"""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = mini_project(tmp_path)
    copy_builder_code(work)
    copy_codeowners(work)
    git(work, "init", "-q", "-b", "main")
    base = commit_all(work, "main")
    edit(work / "pins/manifest.toml", 'version = "0.4.2"', 'version = "0.4.3"')
    middle = commit_all(work, "an intermediate commit of the PR")
    edit(work / "pins/manifest.toml", 'version = "0.4.3"', 'version = "0.4.4"')
    head = commit_all(work, "the reviewed head")
    git(work, "push", "-q", str(origin), f"{base}:refs/heads/main")
    git(work, "push", "-q", str(origin), f"{head}:refs/heads/{BRANCH}")
    git(work, "push", "-q", str(origin), f"{middle}:refs/tags/{BRANCH}")
    return origin, middle, head


def test_a_tag_named_like_the_validation_branch_starts_no_gpu_job(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Attack 4 of #39: a push of the tag validate/pr-7 (at an intermediate PR commit) runs
    validate.yml, and the workflow_run payload's head_branch holds the tag's name, so the trigger
    accepted it. The trigger job's own steps now ask where refs/heads/validate/pr-7 points and
    refuse a run whose head is not that branch's tip: one line, no outputs."""
    origin, middle, head = _tagged_origin(tmp_path)
    trigger_ws = tmp_path / "trigger"
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(trigger_ws))
    (tmp_path / "runner-temp").mkdir()
    outputs = tmp_path / "trigger-outputs"
    outputs.write_text("")
    run_env = {
        **env,
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_EVENT_PATH": str(_workflow_run_event(tmp_path / "workflow_run.json", middle)),
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        "GITHUB_OUTPUT": str(outputs),
    }
    contexts = {
        "github.token": "ghs_not_a_real_token",
        "github.event.workflow_run.head_branch": BRANCH,
    }
    steps = [s for s in _steps("validate-gpu.yml", "trigger") if "run" in s]
    procs = [
        _run_step(s, trigger_ws, run_env, contexts)
        for s in steps
        if s["run"].strip() not in INSTALLS
    ]
    assert [p.returncode for p in procs[:-1]] == [0] * (len(procs) - 1)
    assert procs[-1].returncode == 7, procs[-1].stderr
    assert procs[-1].stderr.splitlines() == [
        f"twinbuild: workflow_run.head_sha: refs/heads/{BRANCH} points at {head}, not the run's "
        f"head {middle}: only a run of the branch's own head is validated (a tag named "
        f"{BRANCH} is no branch; a newer push is validated by its own run)"
    ]
    assert outputs.read_text() == ""
    # The branch's own head is accepted by the same steps.
    run_env["GITHUB_EVENT_PATH"] = str(_workflow_run_event(tmp_path / "head.json", head))
    out = _run_steps(steps, trigger_ws, run_env, contexts)
    assert out[-1].startswith(f"validation build of {BRANCH} at {head} (run 5150) finished")


def test_the_sign_job_commits_evidence_only_onto_the_branch_head_it_validated(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """The sign job fetches refs/heads/validate/pr-7 and commits only when it points at the
    validated commit: evidence of an intermediate commit (an ancestor of the head, as a tag's run
    would have) never lands over the head's."""
    origin, middle, head = _tagged_origin(tmp_path)
    sign_ws = tmp_path / "sign"
    git(tmp_path, "clone", "-q", "--branch", "main", str(origin), str(sign_ws / "tool"))
    (sign_ws / "signed").mkdir()
    (sign_ws / "signed/cuda-amd64.dsse.json").write_text("{}\n")
    (tmp_path / "runner-temp").mkdir()
    run_env = {**env, "RUNNER_TEMP": str(tmp_path / "runner-temp")}
    steps = [
        s
        for s in _steps("validate-gpu.yml", "sign")
        if str(s.get("name", "")).startswith(("The validated commit", "Commit evidence"))
    ]
    assert len(steps) == 2
    contexts = {
        "github.token": "ghs_not_a_real_token",
        "needs.trigger.outputs.commit": middle,
        "needs.trigger.outputs.branch": BRANCH,
    }
    procs = [_run_step(s, sign_ws, run_env, contexts) for s in steps]
    assert procs[0].returncode == 0, procs[0].stderr
    assert procs[1].returncode == 1
    assert procs[1].stdout.splitlines() == [
        f"::error::refs/heads/{BRANCH} points at {head}, not {middle}: evidence is committed only "
        "onto the branch head the run validated"
    ]
    assert git(origin, "rev-parse", f"refs/heads/{BRANCH}") == head
