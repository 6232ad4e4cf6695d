"""twinbuild import: a manifest draft and a drift report from two hard-pinned recipes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from twinbuild.errors import ConfigError, FindingsError
from twinbuild.importer import draft, drift_report, run

RECIPES = Path(__file__).parent.parent / "fixtures" / "recipes"
EXPECTED = RECIPES / "expected"


@pytest.fixture
def in_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the fixture folder so the report names recipes as a person typed them."""
    monkeypatch.chdir(RECIPES)


def both() -> draft.Adoption:
    return draft.adopt(Path("cuda.Dockerfile"), Path("rocm.Dockerfile"))


@pytest.mark.usefixtures("in_recipes")
def test_draft_is_exact() -> None:
    assert draft.draft(both()) == (EXPECTED / "draft.toml").read_text()


@pytest.mark.usefixtures("in_recipes")
@pytest.mark.parametrize(("fmt", "ext"), [("text", "txt"), ("markdown", "md"), ("json", "json")])
def test_drift_report_is_exact(fmt: drift_report.Format, ext: str) -> None:
    assert drift_report.report(both(), fmt) == (EXPECTED / f"drift.{ext}").read_text()


@pytest.mark.usefixtures("in_recipes")
def test_verdicts_and_sides() -> None:
    deps = {d.name: d for d in both().deps}
    assert {n: d.verdict for n, d in deps.items()} == {
        "flash-linear-attention": "same",
        "numpy": "floating",
        "ray": "differs",
        "wandb": "floating",
        "torch-memory-saver": "only CUDA",
        "megatron-bridge": "differs",
        "kubectl": "same",
        "kubectl-arm64": "only CUDA",
        "libnuma-dev": "only CUDA",
        "transformer-engine": "differs",
        "megatron-lm": "same",
        "numba": "only ROCm",
    }
    bridge = deps["megatron-bridge"]
    assert bridge.cuda is not None
    assert bridge.rocm is not None
    assert (bridge.cuda.where, bridge.rocm.where) == (
        ("cuda.Dockerfile:27",),
        ("rocm.Dockerfile:21",),
    )
    assert dict(bridge.rocm.values)["ref"] == "bridge"
    assert bridge.floating


def _filled(text: str) -> str:
    """What a person does to the draft: real digests, checksums, Python, and reasons."""
    return (
        text.replace('digest = "TODO"', f'digest = "sha256:{"a" * 64}"')
        .replace('sha256 = "TODO"', f'sha256 = "{"b" * 64}"')
        .replace('python = "TODO"', 'python = "3.12"')
        .replace('"TODO"', '"ROCm base ships its own build; checked by hand"')
    )


@pytest.mark.usefixtures("in_recipes")
def test_filled_draft_loads_and_passes_the_manifest_lint(tmp_path: Path) -> None:
    from twinbuild.lint import checks
    from twinbuild.manifest import loader

    text = draft.draft(both())
    path = tmp_path / "pins" / "manifest.toml"
    draft.write_draft(_filled(text), path)
    loaded = loader.load(path)
    assert checks.lint_manifest(loaded).findings == []
    assert sorted(loaded.pins) == sorted(d.name for d in both().deps)


@pytest.mark.usefixtures("in_recipes")
def test_unfilled_draft_is_refused_by_the_lint(tmp_path: Path) -> None:
    from twinbuild.lint import checks
    from twinbuild.manifest import loader

    findings = checks.lint_manifest(loader.loads(draft.draft(both()), tmp_path / "m.toml")).findings
    codes = {f.code for f in findings}
    assert codes == {"TB007", "TB008", "TB009"}
    assert (
        f"{tmp_path}/m.toml:11: TB008 variants.cuda.base.digest: 'TODO' is not "
        "'sha256:<64 hex>'; pin lmsysorg/sglang:v0.5.5-cu129-amd64 by digest" in map(str, findings)
    )


@pytest.mark.usefixtures("in_recipes")
def test_run_writes_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "pins" / "manifest.toml"
    stream = io.StringIO()
    code = run.run(Path("cuda.Dockerfile"), Path("rocm.Dockerfile"), out=out, stream=stream)
    assert code == 0
    assert out.read_text() == (EXPECTED / "draft.toml").read_text()
    assert stream.getvalue() == (EXPECTED / "drift.txt").read_text()
    assert [p.name for p in out.parent.iterdir()] == ["manifest.toml"]  # no temp file left


@pytest.mark.usefixtures("in_recipes")
def test_run_never_overwrites_without_force(tmp_path: Path) -> None:
    out = tmp_path / "manifest.toml"
    out.write_text("mine\n")
    stream = io.StringIO()
    with pytest.raises(ConfigError) as err:
        run.run(Path("cuda.Dockerfile"), Path("rocm.Dockerfile"), out=out, stream=stream)
    assert str(err.value) == (
        f"{out}: already exists, so the draft was not written; pass --force to overwrite it, "
        "or --out another path"
    )
    assert out.read_text() == "mine\n"
    # The drift report is printed before the refusal: the run was not wasted.
    assert stream.getvalue() == (EXPECTED / "drift.txt").read_text()
    run.run(Path("cuda.Dockerfile"), Path("rocm.Dockerfile"), out=out, force=True,
              stream=io.StringIO())  # fmt: skip
    assert out.read_text() == (EXPECTED / "draft.toml").read_text()


@pytest.mark.usefixtures("in_recipes")
def test_unrecognised_pins_are_listed_and_exit_1_after_writing(tmp_path: Path) -> None:
    out = tmp_path / "manifest.toml"
    stream = io.StringIO()
    with pytest.raises(FindingsError) as err:
        run.run(Path("odd.Dockerfile"), Path("rocm.Dockerfile"), out=out, stream=stream)
    assert err.value.exit_code == 1
    assert str(err.value) == (
        f"3 unrecognised pin(s) (listed above); the draft at {out} lacks them: add them by hand, "
        "then rerun with --allow-unrecognised"
    )
    assert out.exists()
    tail = stream.getvalue().splitlines()[-7:]
    assert tail == [
        "note: odd.Dockerfile:5: pip install /wheels/*.whl installs a local path, not a pin",
        "note: odd.Dockerfile:6: -r requirements/base.txt: the pins in that file are not imported; "
        "add them to the manifest by hand",
        "note: odd.Dockerfile:6: -c constraints.txt: the pins in that file are not imported; "
        "add them to the manifest by hand",
        "note: odd.Dockerfile:7: package index https://download.pytorch.org/whl/cu129; "
        "set 'index' on the pins that need it",
        "unrecognised: odd.Dockerfile:18: conda ... cudnn==9.1.0",
        "unrecognised: odd.Dockerfile:18: npm ... pyright@1.1.400",
        'unrecognised: odd.Dockerfile:19: pip install "torch>>2"',
    ]
    assert (
        "flash-linear-attention  fla-org/flash-linear-attention@main (branch) (odd.Dockerfile:8)"
        in (stream.getvalue())
    )  # named after the repository, matched to ROCm's flash-linear-attention through it
    out.unlink()
    assert run.run(Path("odd.Dockerfile"), Path("rocm.Dockerfile"), out=out,
                     allow_unrecognised=True, stream=io.StringIO()) == 0  # fmt: skip


def test_bad_input(tmp_path: Path) -> None:
    empty = tmp_path / "empty.Dockerfile"
    empty.write_text("FROM scratch\nRUN echo hi\n")
    good = RECIPES / "rocm.Dockerfile"
    with pytest.raises(ConfigError) as err:
        draft.adopt(empty, good)
    assert str(err.value) == (
        f"{empty}: no pins found (no FROM image, pip/git/curl/apt install or pinned ARG); "
        "is this the production recipe?"
    )
    with pytest.raises(ConfigError) as err:
        draft.adopt(good, tmp_path / "missing")
    assert str(err.value) == f"{tmp_path}/missing: recipe not found; pass a Dockerfile's path"
    broken = tmp_path / "broken"
    broken.write_text("FROM a\nRUN echo 'x\n")
    with pytest.raises(ConfigError) as err:
        draft.adopt(broken, good)
    assert str(err.value) == f"{broken}:2: does not parse: unterminated single quote"
    assert err.value.exit_code == 2


def test_json_report_parses() -> None:
    data = json.loads((EXPECTED / "drift.json").read_text())
    assert [d["verdict"] for d in data["dependencies"]].count("only ROCm") == 1
    assert data["unrecognised"] == []
