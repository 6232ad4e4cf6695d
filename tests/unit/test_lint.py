"""The lint on the cases the issue names, each failing with file and line; and the shipped tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import edit, mini_project
from twinbuild.cli.main import main
from twinbuild.lint.checks import lint
from twinbuild.manifest.loader import load

REPO = Path(__file__).resolve().parents[2]
MANIFEST = "pins/manifest.toml"


def _findings(root: Path, *, strict: bool = False) -> list[str]:
    report = lint(load(root / MANIFEST), root, strict=strict)
    return [str(f).replace(f"{root}/", "") for f in report.findings]


def test_shipped_manifest_and_recipes_are_clean() -> None:
    assert lint(load(REPO / MANIFEST), REPO).findings == []


def test_strict_lists_exactly_the_declared_floating_refs() -> None:
    """The declared floating refs the locks (pins/lock/) do not resolve, and what the locks
    cannot resolve here (TB205) or the index has no file of (TB206): no floating PyPI pin."""
    from twinbuild.lint.locks import resolved_pins

    manifest = load(REPO / MANIFEST)
    report = lint(manifest, REPO, strict=True)
    locked = resolved_pins(manifest, REPO)
    declared = {
        f"pins.{name}" for name, pin in manifest.pins.items()
        if pin.floating is not None and name not in locked
    }  # fmt: skip
    declared |= {f"variants.{n}.base" for n, v in manifest.variants.items() if v.base.floating}
    assert report.findings
    assert {f.code for f in report.findings} <= {"TB010", "TB205", "TB206"}
    floating = [f for f in report.findings if f.code == "TB010"]
    assert {f.message.split(":")[0] for f in floating} == declared
    assert all(f.path.startswith("pins/lock/") for f in report.findings if f.code != "TB010")
    for f in floating:  # what still floats is no PyPI pin: a git ref, an apt package, a download
        name = f.message.split(":")[0].removeprefix("pins.")
        kinds = {r.kind for i in manifest.images() for r in manifest.resolve(i) if r.name == name}
        assert name.startswith("variants.") or kinds - {"pypi"}, name


def test_mini_project_is_clean(tmp_path: Path) -> None:
    assert _findings(mini_project(tmp_path)) == []


def test_megatron_bridge_back_on_a_branch_on_rocm_only(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    path = root / MANIFEST
    path.write_text(path.read_text() + '\n[pins.megatron-bridge.rocm]\nref = "bridge"\n')
    assert _findings(root) == [
        "pins/manifest.toml:72: TB001 pins.megatron-bridge: differs: commit "
        "cuda='7f0fb3456f8ffe47599b5fd167b454605d85f932' rocm=None, ref cuda=None rocm='bridge'; "
        "move them together (twinbuild pins bump), or declare "
        'divergence = { VARIANT = "reason" } naming those that differ',
        "pins/manifest.toml:73: TB005 pins.megatron-bridge: git ref 'bridge' on rocm; pin it, "
        'or declare floating = "why"',
    ]


def test_torch_memory_saver_bumped_on_one_platform_only(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    path = root / MANIFEST
    path.write_text(
        path.read_text()
        + '\n[pins.torch_memory_saver.cuda]\ncommit = "74d68c5e4bedf2b6774f2c92ed0f81b7c8d91ed0"\n'
    )
    assert _findings(root) == [
        "pins/manifest.toml:72: TB001 pins.torch_memory_saver: differs: commit "
        "cuda='74d68c5e4bedf2b6774f2c92ed0f81b7c8d91ed0' "
        "rocm='f05a8754daf68238d54e4cf31cb3ba866684bbaf'; move them together "
        '(twinbuild pins bump), or declare divergence = { VARIANT = "reason" } naming those '
        "that differ"
    ]


def test_short_sha(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(
        root / MANIFEST, 'commit = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"', 'commit = "f05a875"'
    )
    assert _findings(root) == [
        "pins/manifest.toml:32: TB004 pins.torch_memory_saver.commit: 'f05a875' is not a full "
        "40-hex commit (a short SHA is ambiguous and may not exist upstream); pin the merge "
        "commit, e.g. twinbuild pins bump torch_memory_saver --commit <40 hex>"
    ]


def test_literal_pip_pin_in_a_recipe(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(
        root / "images/rocm/Dockerfile",
        "RUN pip install --no-deps -r /tmp/late.txt\n",
        "RUN pip install --no-deps -r /tmp/late.txt\nRUN pip install x==1.0\n",
    )
    assert _findings(root) == [
        "images/rocm/Dockerfile:10: TB101 literal pin 'x==1.0' (pip); move it into pins/ and read "
        "it from a build arg or .twinbuild/pip/<layer>.txt"
    ]


def test_literal_pins_the_scanner_used_to_miss(tmp_path: Path) -> None:
    """An image in COPY --from, `pip -v install`, an option value that is no pin, an ONBUILD."""
    root = mini_project(tmp_path)
    edit(
        root / "images/rocm/Dockerfile",
        "RUN pip install --no-deps -r /tmp/late.txt\n",
        "RUN pip install --no-deps -r /tmp/late.txt\n"
        "COPY --from=registry.example/astral-sh/uv:0.5.31 /uv /bin/\n"
        "RUN pip -v install y==2.0 && pip3 install --resume-retries 999 -r /tmp/late.txt\n"
        "ONBUILD RUN pip install z==3.0\n",
    )
    assert _findings(root) == [
        "images/rocm/Dockerfile:10: TB101 literal pin 'registry.example/astral-sh/uv:0.5.31' (image); move "
        "it into pins/ and read it from a build arg or .twinbuild/pip/<layer>.txt",
        "images/rocm/Dockerfile:11: TB101 literal pin 'y==2.0' (pip); move it into pins/ and read "
        "it from a build arg or .twinbuild/pip/<layer>.txt",
        "images/rocm/Dockerfile:12: TB105 cannot classify 'ONBUILD RUN pip install z==3.0' (an "
        "ONBUILD trigger runs in whatever is built FROM this stage); write the step as a plain "
        "instruction where it runs",
    ]


def test_arg_inherited_from_the_parent_stage_needs_no_build_arg(tmp_path: Path) -> None:
    """BuildKit passes a stage's ARGs to the stages built on it: re-declared, it has a value."""
    root = mini_project(tmp_path)
    recipe = root / "images/rocm/Dockerfile"
    edit(recipe, "FROM ${BASE_IMAGE}\n", "FROM ${BASE_IMAGE} AS base\n")
    edit(
        recipe,
        "RUN pip install --no-deps -r /tmp/late.txt\n",
        "RUN pip install --no-deps -r /tmp/late.txt\nARG JOBS=8\nFROM base AS child\nARG JOBS\n"
        "ARG NOT_GIVEN\n",
    )
    assert _findings(root) == [
        "images/rocm/Dockerfile:13: TB103 ARG NOT_GIVEN has no default and the manifest gives no "
        "such build arg for rocm-amd64; add the pin to pins/ or remove the ARG",
    ]


def test_pin_that_no_recipe_uses(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    path = root / MANIFEST
    path.write_text(
        path.read_text()
        + '\n[pins.kubectl]\nkind = "url"\nurl = "https://dl.k8s.io/v1/kubectl"\n'
        + 'sha256 = "' + "a" * 64 + '"\npath = "/usr/local/bin/kubectl"\nwhy = "cluster tools"\n'
    )  # fmt: skip
    assert _findings(root) == [
        "pins/manifest.toml:72: TB104 pins.kubectl: images/cuda/Dockerfile does not install it "
        "for cuda-amd64 (production); declare and use ARG KUBECTL_*, or remove the pin",
        "pins/manifest.toml:72: TB104 pins.kubectl: images/rocm/Dockerfile does not install it "
        "for rocm-amd64 (production); declare and use ARG KUBECTL_*, or remove the pin",
    ]


def test_from_not_fed_by_the_manifest(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(root / "images/cuda/Dockerfile", "FROM ${BASE_IMAGE}\n", "FROM lmsysorg/sglang:v0.5.6\n")
    assert _findings(root) == [
        "images/cuda/Dockerfile:2: TB102 FROM lmsysorg/sglang:v0.5.6 is written in the recipe; "
        "use FROM ${BASE_IMAGE}, which the manifest's variants.<v>.base feeds"
    ]


def test_placeholder_reason_and_missing_asymmetry(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(
        root / MANIFEST,
        'asymmetry = "the ROCm base ships an older numba that breaks with numpy<2"\n',
        "",
    )
    edit(root / MANIFEST, 'why = "Qwen3-Next linear attention kernels"', 'why = "TODO"')
    assert _findings(root) == [
        "pins/manifest.toml:46: TB007 pins.flash-linear-attention.why: give the pin's provenance, "
        "not 'TODO'",
        'pins/manifest.toml:51: TB003 pins.numba: only on rocm; add asymmetry = "why the other '
        'variants do without it"',
    ]


def test_cli_exit_codes_and_github_annotations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = mini_project(tmp_path)
    args = ["lint", "--root", str(root), "--manifest", str(root / MANIFEST)]
    assert main(args) == 0
    edit(
        root / MANIFEST, 'commit = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"', 'commit = "f05a875"'
    )
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(args) == 1
    out = capsys.readouterr().out
    assert f"::error file={root / MANIFEST},line=32,title=TB004::" in out
    (root / MANIFEST).write_text("schema = 1\nbad =\n")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"twinbuild: {root / MANIFEST}:2:6: invalid TOML: Invalid value")
    assert "Traceback" not in err


def test_strict_names_every_platform_a_pin_floats_on(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    path = root / MANIFEST
    path.write_text(
        path.read_text()
        + '\n[pins.pyyaml]\nkind = "pypi"\nrange = ">=6"\nwhy = "config files"\n'
        + 'floating = "any 6.x works"\n'
    )
    report = lint(load(path), root, strict=True)
    (finding,) = [f for f in report.findings if "pyyaml" in f.message]
    assert finding.message == (
        "pins.pyyaml: floating (range '>=6' on every variant): any 6.x works"
    )
