"""Every command's handler, run through ``twinbuild.cli.main.main`` with real files.

Parser tests prove a flag exists; these prove the handler turns the flags into the library call
and its output, so a flag that is parsed and then dropped fails here. Commands that need a Docker
engine get one of two things: the fake engine of the build tests (build), or an engine address
where nothing listens (engine status, base), which is what a machine without Docker has.
The evidence commands are in test_cli_evidence.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from tests.fake_engine import BUILT, FakeEngine
from tests.helpers import FIXTURES, MINI_VARIANTS, edit, image, mini_project
from tests.unit.gitrepos import commit_all, init, isolate_git, needs_git
from twinbuild.cli.main import build_parser, main
from twinbuild.engine import client
from twinbuild.errors import EngineError
from twinbuild.manifest.loader import load

NOWHERE = "unix:///nonexistent/twinbuild-test/docker.sock"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return mini_project(tmp_path)


def _common(root: Path) -> list[str]:
    return ["--root", str(root), "--manifest", str(root / "pins/manifest.toml")]


def _leaf_commands() -> set[tuple[str, ...]]:
    """Every runnable command path of the real parser, e.g. ("pins", "bump")."""
    import argparse

    found: set[tuple[str, ...]] = set()

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.add(path)
            return
        for name, child in subs[0].choices.items():
            walk(child, (*path, name))

    walk(build_parser(), ())
    return found


#: Each runnable command and the test in this file (or test_cli_evidence.py) that runs it.
COVERED = {
    ("lint",): "test_lint_clean_findings_strict_and_json",
    ("lock",): "test_lock_writes_each_image_and_json_says_what_moved",
    ("render",): "test_render_both_profiles",
    ("engine",): "test_engine_status_and_down_without_an_engine",
    ("base",): "test_base_without_an_engine_exits_3",
    ("prune",): "test_base_without_an_engine_exits_3",
    ("build",): "test_build_passes_every_option_to_the_build",
    ("plan",): "test_plan_and_pins_diff_in_a_git_repository",
    ("bake",): "test_bake_writes_the_file_it_reports",
    ("smoke",): "test_smoke_host_mode_reports_what_is_missing",
    ("gpu-proof",): "test_gpu_proof_dry_run_and_without_a_gpu",
    ("import",): "test_import_drafts_a_manifest_from_two_recipes",
    ("workflows", "check"): "test_workflows_check_on_the_repositorys_workflows",
    ("rerun-decision", "report"): "test_rerun_decision_report_and_guard",
    ("rerun-decision", "guard"): "test_rerun_decision_report_and_guard",
    ("pins", "table"): "test_pins_table_and_bump",
    ("pins", "bump"): "test_pins_table_and_bump",
    ("pins", "diff"): "test_plan_and_pins_diff_in_a_git_repository",
    (
        "pins",
        "adopt-release",
    ): "test_pins_adopt_release_moves_every_variant_and_refuses_a_partial_lock",
    ("variants",): "test_variants_lists_and_gives_the_workflow_matrices",
    ("binfmt",): "test_binfmt_on_the_hosts_own_architecture_installs_nothing",
    ("evidence", "record"): "test_cli_evidence.py",
    ("evidence", "sign"): "test_cli_evidence.py",
    ("evidence", "verify"): "test_cli_evidence.py",
    ("evidence", "gate"): "test_cli_evidence.py",
    ("evidence", "keygen"): "test_cli_evidence.py",
    ("evidence", "trigger"): "test_cli_evidence.py",
    ("evidence", "inputs"): "test_cli_evidence.py",
    ("evidence", "check-push"): "test_cli_evidence.py",
    ("registry",): "test_registry_push_and_release_without_a_registry_or_engine",
    ("push",): "test_registry_push_and_release_without_a_registry_or_engine",
    ("pins", "outdated"): "test_pins_outdated_with_no_source_answering_exits_3",
    ("release",): "test_registry_push_and_release_without_a_registry_or_engine",
}


def test_every_command_has_a_handler_test() -> None:
    assert _leaf_commands() == set(COVERED)
    here = Path(__file__).read_text()
    evidence = (Path(__file__).parent / "test_cli_evidence.py").read_text()
    for command, test in COVERED.items():
        if test == "test_cli_evidence.py":
            assert f'"evidence", "{command[1]}"' in evidence, command
        else:
            assert f"def {test}(" in here, command


def test_lint_clean_findings_strict_and_json(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", *_common(root)]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1:] == [
        f"lint: clean (6 pins, {root / 'pins/manifest.toml'})"
    ]
    assert captured.err == "note: 1 declared floating refs (--strict fails them)\n"
    assert main(["lint", "--strict", *_common(root)]) == 1
    captured = capsys.readouterr()
    line = load(root / "pins/manifest.toml").line_of("pins", "numpy", "floating")
    assert captured.out.splitlines()[0].startswith(
        f"{root / 'pins/manifest.toml'}:{line}: TB010 pins.numpy: floating (range '<2' on rocm): "
    )
    assert captured.err == "twinbuild: lint: 1 findings\n"
    with pytest.raises(SystemExit) as info:
        main(["lint", "--strict", "--format", "json", *_common(root)])
    assert info.value.code == 1
    data = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in data["findings"]] == ["TB010"]
    edit(root / "pins/manifest.toml", 'asymmetry = "ROCm wheels are built against numpy 1.x"\n', "")
    assert main(["lint", *_common(root)]) == 1
    assert " TB003 pins.numpy: only on rocm; " in capsys.readouterr().out


def test_render_both_profiles(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = ["--manifest", str(root / "pins/manifest.toml")]
    assert main(["render", "cuda", "--profile", "production", *manifest]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [
        "# twinbuild render cuda --arch linux/amd64 --profile production",
        "recipe: images/cuda/Dockerfile",
    ]
    assert "numba" not in out  # a rocm-only pin
    assert main(["render", "rocm", "--profile", "local", *manifest]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == [
        "# twinbuild render rocm --arch linux/amd64 --profile local",
        "recipe: images/local/Dockerfile",
        "platform: linux/amd64",
        "target: rocm",
    ]
    assert (
        "not in local profile: megatron-lm (checkout of https://github.com/NVIDIA/Megatron-LM"
        in out
    )


def test_engine_status_and_down_without_an_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TWINBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCKER_HOST", NOWHERE)
    assert main(["engine", "status", "--print-host"]) == 3
    assert capsys.readouterr().out == f"{NOWHERE}\n"
    monkeypatch.delenv("DOCKER_HOST")
    assert main(["engine", "down"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # a message, not data: stderr
    assert str(tmp_path / "cache") in captured.err


def test_base_without_an_engine_exits_3(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fence makes connect refuse; what a machine without an engine answers is exit 3."""
    monkeypatch.setattr(client, "connect", _no_engine)
    assert main(["base", "--manifest", str(root / "pins/manifest.toml")]) == 3
    assert capsys.readouterr().err == (
        f"twinbuild: {NOWHERE}: no Docker engine answers; run `twinbuild engine up`\n"
    )
    assert main(["prune", "--keep", "2"]) == 3
    assert capsys.readouterr().err == (
        f"twinbuild: {NOWHERE}: no Docker engine answers; run `twinbuild engine up`\n"
    )


class _Engine(FakeEngine):
    """The unit tests' fake engine, usable as ``with connect() as engine``."""

    def __enter__(self) -> _Engine:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


def _no_engine(host: str | None = None) -> Any:
    raise EngineError(f"{host or NOWHERE}: no Docker engine answers; run `twinbuild engine up`")


def test_build_passes_every_option_to_the_build(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = _Engine()
    monkeypatch.setattr(client, "connect", lambda host=None: engine)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the revision label is GITHUB_SHA in Actions
    monkeypatch.setenv("GITHUB_SHA", "c" * 40)
    code = main(
        ["build", "--profile", "production", "--variant", "rocm", "--force", *_common(root)]
    )  # fmt: skip
    assert code == 0
    target = engine.builds[0]
    assert target.labels["org.opencontainers.image.revision"] == "c" * 40
    assert target.labels["org.twinbuild.profile"] == "production"
    assert target.tags == ("twinbuild/rocm:production-amd64",)
    assert engine.images["twinbuild/rocm:production-amd64"]["Id"] == BUILT
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("twinbuild/rocm:production-amd64: built in ")
    assert f"({BUILT[:19]}, inputs sha256:" in last
    assert main(["build", "--mirror", "=x", *_common(root)]) == 2
    assert capsys.readouterr().err == (
        "twinbuild: --mirror '=x': expected PIN=PATH, e.g. --mirror tms=/srv/tms.git\n"
    )


@needs_git
def test_plan_and_pins_diff_in_a_git_repository(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    isolate_git(monkeypatch, root.parent / "home")
    init(root)
    first = commit_all(root, "mini")
    edit(root / "pins/manifest.toml", 'version = "0.65.1"', 'version = "0.66.0"')
    second = commit_all(root, "numba 0.66.0")
    monkeypatch.chdir(root)
    assert main(["plan", "--base", first]) == 0
    out = capsys.readouterr().out
    assert "cuda-amd64: skip (no image input changed)\n" in out
    assert "rocm-amd64: build" in out
    assert main(["pins", "diff", first, second, "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "numba" in out
    assert "0.65.1" in out
    assert "0.66.0" in out
    assert main(["pins", "diff", first, second, "--format", "markdown", "--root", str(root)]) == 0
    assert "\n| `numba` | changed | rocm | `==0.65.1` | `==0.66.0` |\n" in capsys.readouterr().out


def test_bake_writes_the_file_it_reports(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = root / "out/docker-bake.json"
    out.parent.mkdir()
    code = main(
        ["bake", "--out", str(out), "--repository", "registry.example/acme/twinbuild",
         *_common(root)]
    )  # fmt: skip
    assert code == 0
    data = json.loads(out.read_text())
    assert sorted(data["target"]) == ["cuda-amd64", "rocm-amd64"]
    assert data["target"]["rocm-amd64"]["tags"][0].startswith("registry.example/acme/twinbuild:")
    assert str(out) in capsys.readouterr().out
    assert main(["bake", "--out", str(out), "--repository", "Not A Repo", *_common(root)]) == 2


def test_smoke_host_mode_reports_what_is_missing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = root / "reports"
    code = main(
        ["smoke", "--host", "--variant", "cuda", "--profile", "production", "--no-gpu",
         "--report-dir", str(reports), *_common(root)]
    )  # fmt: skip
    assert code == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # the suite's own report is a message: stderr, before the error
    errors = [line for line in captured.err.splitlines() if line.startswith("twinbuild: ")]
    assert errors[0].startswith(
        "twinbuild: smoke: 4 failed; first: cuda (linux/amd64) (production): "
    )
    assert (reports / "smoke-cuda-amd64-production-host.json").exists()


def test_gpu_proof_dry_run_and_without_a_gpu(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = ["--manifest", str(root / "pins/manifest.toml")]
    manifest += ["--variant", "cuda"]  # the mini project's CUDA variant
    assert main(["gpu-proof", "--dry-run", *manifest]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| check | proves | broken case it must fail on |\n")
    assert not (root / "build").exists()  # a dry run writes nothing
    monkeypatch.setattr("twinbuild.smoke.gpu.detect", lambda platform, **_: None)
    (root / "sources").mkdir()
    folder = root / "out"
    argv = ["gpu-proof", "--sources", str(root / "sources"), "--out", str(folder), *manifest]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(
        "twinbuild: gpu-proof: nothing proven: every check skipped (no nvidia GPU"
    )
    end = json.loads((folder / "report.jsonl").read_text().splitlines()[-1])
    assert end["counts"]["skipped"] == 13


def test_import_drafts_a_manifest_from_two_recipes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recipes = FIXTURES / "recipes"
    for name in ("cuda.Dockerfile", "rocm.Dockerfile"):
        (tmp_path / name).write_bytes((recipes / name).read_bytes())
    monkeypatch.chdir(tmp_path)
    argv = ["import", "cuda.Dockerfile", "rocm.Dockerfile", "--out", "draft.toml"]
    assert main(argv) == 0
    assert (tmp_path / "draft.toml").read_text() == (recipes / "expected/draft.toml").read_text()
    capsys.readouterr()
    assert main(argv) == 2
    assert "exists" in capsys.readouterr().err


def test_workflows_check_on_the_repositorys_workflows(capsys: pytest.CaptureFixture[str]) -> None:
    repo = Path(__file__).resolve().parents[2]
    workflows = sorted(str(p) for p in (repo / ".github/workflows").glob("*.yml"))
    assert main(["workflows", "check", *workflows]) == 0
    assert capsys.readouterr().out.startswith("workflows: trust check clean (")
    bad = FIXTURES / "workflows/secrets-on-pull-request.yml"
    assert main(["workflows", "check", str(bad)]) == 1
    captured = capsys.readouterr()
    assert captured.err == "twinbuild: workflows: 2 trust findings\n"
    assert len(captured.out.splitlines()) == 2
    assert all(line.startswith(f"{bad}:") for line in captured.out.splitlines())


def _json(path: Path, data: Any) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_rerun_decision_report_and_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cuda, rocm = "GPU smoke (cuda)", "GPU smoke (rocm)"
    jobs = {"jobs": [{"name": cuda, "status": "completed", "conclusion": "failure"},
                     {"name": rocm, "status": "completed", "conclusion": "success"}]}  # fmt: skip
    output = tmp_path / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    summary = tmp_path / "summary.md"
    code = main(
        ["rerun-decision", "report", "--attempt", "1", "--current", _json(tmp_path / "c.json", jobs),
         "--summary", str(summary), "--github-output"]
    )  # fmt: skip
    assert code == 0
    assert output.read_text() == f"verdict=rerun\njobs={cuda}\n"
    assert summary.read_text().startswith("## nightly: rerun\n")
    capsys.readouterr()
    code = main(
        ["rerun-decision", "report", "--attempt", "2", "--current", _json(tmp_path / "c2.json", jobs),
         "--previous", _json(tmp_path / "p.json", jobs)]
    )  # fmt: skip
    assert code == 1
    run = {"id": 42, "run_attempt": 1, "status": "completed", "conclusion": "failure",
           "path": ".github/workflows/nightly.yml"}  # fmt: skip
    assert main(["rerun-decision", "guard", "--run", _json(tmp_path / "r.json", run)]) == 0
    assert "run 42 failed at attempt 1; re-running its failed jobs once" in capsys.readouterr().out
    run["run_attempt"] = 2
    assert main(["rerun-decision", "guard", "--run", _json(tmp_path / "r2.json", run)]) == 1


def test_pins_table_and_bump(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = ["--manifest", str(root / "pins/manifest.toml")]
    assert main(["pins", "table", *manifest]) == 0
    assert capsys.readouterr().out.startswith("### Pins (6 pins, 2 variants: ")
    before = (root / "pins/manifest.toml").read_text()
    code = main(
        ["pins", "bump", "flash-linear-attention", "--version", "0.4.3", "--why", "fla 0.4.3",
         "--dry-run", *manifest]
    )  # fmt: skip
    assert code == 0
    assert capsys.readouterr().out.endswith(
        f"dry run: {root / 'pins/manifest.toml'} left as it was\n"
    )
    assert (root / "pins/manifest.toml").read_text() == before
    code = main(
        ["pins", "bump", "flash-linear-attention", "--version", "0.4.3", "--why", "fla 0.4.3",
         *manifest]
    )  # fmt: skip
    assert code == 0
    resolved = {
        p: {r.name: r for r in load(root / "pins/manifest.toml").resolve(image(p))}
        for p in MINI_VARIANTS
    }
    assert {p: r["flash-linear-attention"].values.version for p, r in resolved.items()} == {
        "cuda": "0.4.3",
        "rocm": "0.4.3",
    }
    code = main(
        ["pins", "bump", "flash-linear-attention", "--version", "0.4.4", "--why", "rocm first",
         "--variant", "rocm", *manifest]
    )  # fmt: skip
    assert code == 2
    assert "--diverge" in capsys.readouterr().err


def test_registry_push_and_release_without_a_registry_or_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipping commands on a machine with neither: each says so and exits with its code.
    (tests/docker/test_ship.py runs them against a real registry.)"""
    monkeypatch.setenv("TWINBUILD_CACHE", str(tmp_path / "cache"))  # no private registry's pid
    for key in ("TWINBUILD_REGISTRY", "TWINBUILD_REGISTRY_PORT"):
        monkeypatch.delenv(key, raising=False)
    assert main(["registry", "status"]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""  # an error: stderr only
    assert captured.err == (
        "twinbuild: private registry is not running (127.0.0.1:5000); run `twinbuild registry up`\n"
    )
    assert main(["registry", "env"]) == 3
    assert capsys.readouterr().out == ""  # `registry env >> $GITHUB_ENV` appends nothing
    monkeypatch.setattr(client, "connect", _no_engine)
    proj = mini_project(tmp_path)
    code = main(
        ["push", "--root", str(proj), "--manifest", str(proj / "pins/manifest.toml"),
         "--variant", "cuda", "--registry", "127.0.0.1:1"]
    )  # fmt: skip
    assert code == 3
    assert capsys.readouterr().err == (
        f"twinbuild: {NOWHERE}: no Docker engine answers; run `twinbuild engine up`\n"
    )
    for key in ("GITHUB_REPOSITORY", "GITHUB_REPOSITORY_ID"):
        monkeypatch.delenv(key, raising=False)
    code = main(
        ["release", "--variant", "cuda", "--image", "registry.example/a/b@sha256:" + "0" * 64,
         "--tag", "v1", "--evidence", str(tmp_path / "cuda.dsse.json")]
    )  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        "twinbuild: release: the repository whose runs count is unknown; pass --repository "
        "OWNER/NAME (GitHub Actions sets GITHUB_REPOSITORY)\n"
    )


def test_variants_lists_and_gives_the_workflow_matrices(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = str(root / "pins/manifest.toml")
    assert main(["variants", "--manifest", manifest, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [v["name"] for v in listed["variants"]] == list(MINI_VARIANTS)
    assert all(v["archs"] == ["linux/amd64"] for v in listed["variants"])
    assert main(["variants", "--manifest", manifest, "--matrix", "gpu"]) == 0
    gpu = json.loads(capsys.readouterr().out)
    assert gpu["include"], "the gated variants have GPU jobs"
    assert {e["variant"] for e in gpu["include"]} == set(MINI_VARIANTS)
    assert [e["runner"] for e in gpu["include"]] == [
        ["self-hosted", "gpu", "cuda", "x64"],
        ["self-hosted", "gpu", "rocm", "x64"],
    ]  # the variant's labels and the architecture's
    assert main(["variants", "--manifest", manifest, "--matrix", "build", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["include"]
    assert main(["variants", "--manifest", str(root / "nope.toml")]) == 2


def test_binfmt_on_the_hosts_own_architecture_installs_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import platform

    native = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}[platform.machine()]
    assert main(["binfmt", "--arch", native]) == 0
    assert capsys.readouterr().out == (
        f"{native}: this host's own architecture; nothing to emulate\n"
    )


def test_pins_adopt_release_moves_every_variant_and_refuses_a_partial_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Upstream's release lock as pins: the repository's manifest, sglang, Megatron-LM and miles
    moved to the lock's commits in every variant; a lock without a commit writes nothing."""
    repo_manifest = Path(__file__).resolve().parents[2] / "pins/manifest.toml"
    manifest = tmp_path / "pins/manifest.toml"
    manifest.parent.mkdir()
    manifest.write_text(repo_manifest.read_text())
    before = manifest.read_text()
    commits = {k: c * 40 for k, c in (("sglang", "a"), ("megatron", "b"), ("miles", "c"))}
    lock = {
        "release_branch": "release/v1",
        "sglang_commit": commits["sglang"], "sglang_repo": "sgl-project/sglang",
        "megatron_commit": commits["megatron"], "megatron_repo": "radixark/Megatron-LM",
        "miles_commit": commits["miles"], "miles_repo": "radixark/miles",
    }  # fmt: skip
    path = tmp_path / "release-lock.json"
    path.write_text(json.dumps(lock))
    argv = ["pins", "adopt-release", str(path), "--why", "release v1", "--manifest", str(manifest)]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (
        f"pins.sglang: cu13, cu12-x86, rocm720-mi35x, rocm700-mi35x, rocm700-mi30x: -> {commits['sglang']}"
        in out
    )
    assert manifest.read_text() == before  # a dry run writes nothing
    assert main(argv) == 0
    capsys.readouterr()
    moved = load(manifest)
    for name, key in (("sglang", "sglang"), ("megatron-lm", "megatron"), ("miles", "miles")):
        for key_image in moved.images(moved.pins[name].variants):
            pin = next(r for r in moved.resolve(key_image) if r.name == name)
            assert pin.values.commit == commits[key], (name, key_image)
    del lock["sglang_commit"]
    path.write_text(json.dumps(lock))
    written = manifest.read_text()
    assert main(argv) == 2
    assert "lock.sglang_commit" in capsys.readouterr().err
    assert manifest.read_text() == written


def test_pins_outdated_with_no_source_answering_exits_3(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing could be asked: one line per source on stderr, nothing on stdout, exit 3."""
    manifest = ["--manifest", str(root / "pins/manifest.toml")]
    closed = "http://127.0.0.1:9/simple"  # discard: nothing listens
    assert main(["pins", "outdated", "--source", "pypi", "--index-url", closed, *manifest]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == "twinbuild: pins outdated: nothing could be asked:"
    assert lines[1].startswith("twinbuild: pypi: pins outdated ")
    assert "connection refused" in lines[1]
    assert len(lines) == 2


def test_lock_writes_each_image_and_json_says_what_moved(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import with_pins
    from tests.pyindex import PyIndex
    from tests.unit.test_lock import PINS

    with_pins(root, PINS)
    with PyIndex(tmp_path / "index") as index:
        for name, version, requires in (("floaty", "1.0", ()), ("dep-a", "1.0", ()),
                                        ("solid", "1.0", ("dep-a>=1.0",))):  # fmt: skip
            index.publish(name, version, requires)
        argv = ["lock", *_common(root), "--index-url", index.url, "--variant", "cuda"]
        assert main([*argv, "--dry-run"]) == 0
        assert "dry run: pins/lock/ left as it was" in capsys.readouterr().out
        assert not (root / "pins/lock").exists()
        assert main([*argv, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [i["image"] for i in report["images"]] == ["cuda-amd64", "local/cuda-amd64"]
    assert [i["state"] for i in report["images"]] == ["created", "created"]
    assert report["written"] == ["pins/lock/cuda-amd64.toml", "pins/lock/local/cuda-amd64.toml"]
    assert report["rebuild"] == "cuda, local cuda"
