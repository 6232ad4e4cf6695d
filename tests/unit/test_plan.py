"""twinbuild.builder.plan: which images a change affects, in git repositories made from the mini project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import edit, image, mini_project
from tests.unit.github_runner import runner_outputs
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.builder.plan import Plan, plan
from twinbuild.cli.main import main
from twinbuild.errors import ConfigError

pytestmark = [pytest.mark.git, needs_git]

MANIFEST = "pins/manifest.toml"


def builds(result: Plan) -> tuple[bool, bool]:
    return result.builds(image("cuda")), result.builds(image("rocm"))


def test_docs_and_tests_only_plan_nothing(mini_repo: Path) -> None:
    (mini_repo / "README.md").write_text("# docs\n")
    (mini_repo / "tests").mkdir()
    (mini_repo / "tests" / "test_x.py").write_text("")
    result = plan(mini_repo, "HEAD")
    assert builds(result) == (False, False)
    assert result.text() == (
        "plan: changes since HEAD (--base)\n"
        "cuda-amd64: skip (no image input changed)\n"
        "rocm-amd64: skip (no image input changed)\n"
    )
    assert result.outputs() == {
        "cuda-amd64": "false", "rocm-amd64": "false", "cuda": "false", "rocm": "false",
        "any": "false", "matrix": '{"include":[]}', "reasons": "",
    }  # fmt: skip


def test_cuda_only_change_plans_cuda(mini_repo: Path) -> None:
    text = (mini_repo / MANIFEST).read_text()
    # a CUDA-only version: give flash-linear-attention a cuda override with its own reason
    (mini_repo / MANIFEST).write_text(
        text.replace(
            'why = "Qwen3-Next linear attention kernels"\n',
            'why = "Qwen3-Next linear attention kernels"\ndivergence = { cuda = "CUDA takes the fix first" }\n'
            '\n[pins.flash-linear-attention.cuda]\nversion = "0.4.3"\n',
        )
    )
    result = plan(mini_repo, "HEAD")
    assert builds(result) == (True, False)
    assert result.reasons == {
        image("cuda"): [f"{MANIFEST} (production, local): pins.flash-linear-attention changed"]
    }


def test_rocm_only_pin_change_plans_rocm(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, 'version = "0.65.1"', 'version = "0.65.2"')
    result = plan(mini_repo, "HEAD")
    assert builds(result) == (False, True)
    assert result.reason_lines() == [
        f"rocm-amd64: {MANIFEST} (production, local): pins.numba changed"
    ]


def test_absolute_manifest_path_plans_like_the_relative_one(
    mini_repo: Path, tmp_path: Path
) -> None:
    edit(mini_repo / MANIFEST, 'version = "0.65.1"', 'version = "0.65.2"')
    result = plan(mini_repo, "HEAD", manifest=(mini_repo / MANIFEST).resolve())
    assert builds(result) == (False, True)
    assert result.reason_lines() == [
        f"rocm-amd64: {MANIFEST} (production, local): pins.numba changed"
    ]
    outside = tmp_path / "elsewhere.toml"
    outside.write_text("")
    with pytest.raises(ConfigError) as info:
        plan(mini_repo, "HEAD", manifest=outside)
    assert str(info.value) == (
        f"--manifest {outside}: not inside the repository {mini_repo.resolve()}; "
        "plan compares revisions of a tracked manifest"
    )


def test_shared_pin_change_plans_both(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, 'version = "0.4.2"', 'version = "0.4.3"')
    result = plan(mini_repo, "HEAD")
    assert builds(result) == (True, True)
    outputs = result.outputs()
    assert json.loads(outputs.pop("matrix")) == {
        "include": [
            {"variant": v, "arch": "linux/amd64", "name": f"{v}-amd64"} for v in ("cuda", "rocm")
        ]
    }
    assert outputs == {
        "cuda-amd64": "true",
        "rocm-amd64": "true",
        "cuda": "true",
        "rocm": "true",
        "any": "true",
        "reasons": f"cuda-amd64: {MANIFEST} (production, local): pins.flash-linear-attention changed\n"
        f"rocm-amd64: {MANIFEST} (production, local): pins.flash-linear-attention changed",
    }


def test_why_only_manifest_change_plans_nothing(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, 'why = "ROCm base fix"', 'why = "ROCm base fix, see #12"')
    assert builds(plan(mini_repo, "HEAD")) == (False, False)


def test_base_image_change_plans_that_platform(mini_repo: Path) -> None:
    edit(mini_repo / MANIFEST, 'tag = "v0.5.6-rocm700-mi35x"', 'tag = "v0.5.7-rocm700-mi35x"')
    result = plan(mini_repo, "HEAD")
    assert result.reasons == {image("rocm"): [f"{MANIFEST} (production): variants.rocm.base"]}


def test_rocm_recipe_change_plans_rocm(mini_repo: Path) -> None:
    with (mini_repo / "images" / "rocm" / "Dockerfile").open("a") as out:
        out.write("ENV X=1\n")
    result = plan(mini_repo, "HEAD")
    assert result.reasons == {image("rocm"): ["images/rocm/Dockerfile changed"]}


def test_shared_inputs_plan_both(mini_repo: Path) -> None:
    (mini_repo / "images" / "common").mkdir()
    (mini_repo / "images" / "common" / "smoke.py").write_text("")
    (mini_repo / "twinbuild" / "manifest").mkdir(parents=True)
    (mini_repo / "twinbuild" / "manifest" / "rendered.py").write_text("")
    (mini_repo / "twinbuild" / "lint").mkdir()
    (mini_repo / "twinbuild" / "lint" / "checks.py").write_text("")  # installed: deny by default
    (mini_repo / "docs").mkdir()
    (mini_repo / "docs" / "x.md").write_text("")  # on the list of not-inputs
    result = plan(mini_repo, "HEAD")
    both = [
        "images/common/smoke.py changed",
        "twinbuild/lint/checks.py changed",
        "twinbuild/manifest/rendered.py changed",
    ]
    assert result.reasons == {image("cuda"): both, image("rocm"): both}


def test_default_base_is_previous_commit_without_origin(mini_repo: Path) -> None:
    with (mini_repo / "images" / "cuda" / "Dockerfile").open("a") as out:
        out.write("ENV X=1\n")
    commit_all(mini_repo, "cuda recipe")
    result = plan(mini_repo)
    assert (result.base, result.base_note) == ("HEAD~1", "no origin/main to compare with")
    assert builds(result) == (True, False)


def test_default_base_is_merge_base_with_origin_main(mini_repo: Path) -> None:
    first = git(mini_repo, "rev-parse", "HEAD")
    git(mini_repo, "update-ref", "refs/remotes/origin/main", first)
    with (mini_repo / "images" / "rocm" / "Dockerfile").open("a") as out:
        out.write("ENV X=1\n")
    commit_all(mini_repo, "rocm recipe")
    (mini_repo / "README.md").write_text("docs\n")
    commit_all(mini_repo, "docs")
    result = plan(mini_repo)
    assert (result.base, result.base_note) == (first, "merge-base with origin/main")
    assert builds(result) == (False, True)


def test_unknown_base_plans_everything(mini_repo: Path) -> None:
    result = plan(mini_repo, "no-such-rev")
    assert builds(result) == (True, True)
    assert result.text() == (
        "plan: build everything (unknown base revision 'no-such-rev')\ncuda-amd64: build\nrocm-amd64: build\n"
    )
    assert result.reason_lines() == [
        "cuda-amd64: unknown base revision 'no-such-rev'",
        "rocm-amd64: unknown base revision 'no-such-rev'",
    ]


def test_single_commit_default_base_plans_everything(mini_repo: Path) -> None:
    assert plan(mini_repo).fallback == "unknown base revision 'HEAD~1'"


def test_not_a_git_repository_plans_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = mini_project(tmp_path)
    assert plan(root).fallback == f"{root} is not a git repository"


def test_github_output_appends_and_needs_the_variable(
    mini_repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "github_output"
    out.write_text("earlier=1\n")
    edit(mini_repo / MANIFEST, 'version = "0.4.2"', 'version = "0.4.3"')
    monkeypatch.chdir(mini_repo)
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    assert main(["plan", "--base", "HEAD", "--github-output"]) == 0
    assert runner_outputs(out.read_text()) == {
        "earlier": "1",
        **plan(mini_repo, "HEAD").outputs(),
    }
    monkeypatch.delenv("GITHUB_OUTPUT")
    assert main(["plan", "--base", "HEAD", "--github-output"]) == 2
    assert capsys.readouterr().err == (
        "twinbuild: plan --github-output: GITHUB_OUTPUT is not set; run it in a GitHub Actions "
        "step or drop --github-output\n"
    )
