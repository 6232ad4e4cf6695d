"""twinbuild.pins.bump: move a pin in place, symmetric unless declared, refusing bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import edit, image, mini_project
from tests.unit.gitrepos import commit_file, git, init, isolate_git, needs_git
from twinbuild.errors import ConfigError, UpstreamRefused
from twinbuild.manifest.loader import load
from twinbuild.pins.bump import BumpRequest, bump

NEW_SHA = "1234567890abcdef1234567890abcdef12345678"
TMS_REPO = "https://github.com/fzyzcjy/torch_memory_saver"

DIVERGENT = """
[pins.flash-linear-attention]
kind = "pypi"
version = "0.4.2"
why = "Qwen3-Next linear attention kernels"
divergence = { rocm = "ROCm needs the 0.4.3 fix first" }
[pins.flash-linear-attention.rocm]
version = "0.4.3"  # the ROCm fix
"""


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    return mini_project(tmp_path) / "pins" / "manifest.toml"


def test_symmetric_git_pin_moves_on_every_variant_keeping_comments(manifest: Path) -> None:
    edit(manifest, 'layer = "late"\n', 'layer = "late"  # moves often\n')
    before = manifest.read_text()
    result = bump(
        manifest,
        BumpRequest(name="torch_memory_saver", commit=NEW_SHA, why="merge commit of tms#90"),
    )
    after = manifest.read_text()
    assert after == before.replace("f05a8754daf68238d54e4cf31cb3ba866684bbaf", NEW_SHA).replace(
        "merge commit of fzyzcjy/torch_memory_saver#82, CUDA VMM granularity fix",
        "merge commit of tms#90",
    )
    assert result.report() == (
        "pins.torch_memory_saver:\n"
        f"  cuda, rocm: {TMS_REPO}@f05a8754daf68238d54e4cf31cb3ba866684bbaf -> "
        f"{TMS_REPO}@{NEW_SHA}\n"
        "rebuild: cuda, rocm (production, local)\n"
    )


def test_rocm_only_pin_rebuilds_rocm_only(manifest: Path) -> None:
    result = bump(manifest, BumpRequest(name="numba", version="0.65.2", why="numba 0.65.2 fix"))
    assert list(result.rebuild) == [image("rocm")]
    assert 'version = "0.65.2"' in manifest.read_text()


def test_one_variant_of_symmetric_pin_needs_diverge(manifest: Path) -> None:
    before = manifest.read_text()
    request = BumpRequest(
        name="flash-linear-attention", version="0.4.3", why="ROCm fix", variant="rocm"
    )
    with pytest.raises(ConfigError) as caught:
        bump(manifest, request)
    assert str(caught.value) == (
        f"{manifest}:43: pins.flash-linear-attention: the same on every variant; moving only "
        "rocm leaves cuda behind: drop --variant to move them all, or pass --diverge --reason "
        '"why they differ"'
    )
    assert manifest.read_text() == before


def test_diverge_writes_override_and_reason(manifest: Path) -> None:
    result = bump(
        manifest,
        BumpRequest(
            name="flash-linear-attention", version="0.4.3", why="Qwen3-Next linear attention "
            "kernels", variant="rocm", diverge=True, reason="ROCm needs the 0.4.3 fix first",
        ),
    )  # fmt: skip
    text = manifest.read_text()
    assert (
        '[pins.flash-linear-attention]\nkind = "pypi"\nversion = "0.4.2"\n'
        'why = "Qwen3-Next linear attention kernels"\n'
        'divergence = {rocm = "ROCm needs the 0.4.3 fix first"}\n\n'
        '[pins.flash-linear-attention.rocm]\nversion = "0.4.3"\n\n[pins.numba]\n'
    ) in text
    assert list(result.rebuild) == [image("rocm")]
    pins = {p: r for p in ("cuda", "rocm") for r in load(manifest).resolve(image(p))
            if r.name == "flash-linear-attention"}  # fmt: skip
    assert (pins["cuda"].values.version, pins["rocm"].values.version) == ("0.4.2", "0.4.3")


def test_bump_making_pin_symmetric_again_folds_overrides(manifest: Path) -> None:
    text = manifest.read_text()
    start = text.index("[pins.flash-linear-attention]")
    end = text.index("[pins.numba]")
    manifest.write_text(text[:start] + DIVERGENT.lstrip() + "\n" + text[end:])
    result = bump(
        manifest,
        BumpRequest(name="flash-linear-attention", version="0.4.3", why="both at 0.4.3",
                    variant="cuda"),
    )  # fmt: skip
    assert manifest.read_text() == text.replace(
        'version = "0.4.2"\nwhy = "Qwen3-Next linear attention kernels"',
        'version = "0.4.3"\nwhy = "both at 0.4.3"',
    )
    assert list(result.rebuild) == [image("cuda")]


def test_divergent_pin_moves_every_override(manifest: Path) -> None:
    text = manifest.read_text()
    divergent = DIVERGENT.replace('version = "0.4.2"\n', "").replace(
        '[pins.flash-linear-attention.rocm]', '[pins.flash-linear-attention.cuda]\n'
        'version = "0.4.2"\n[pins.flash-linear-attention.rocm]',
    )  # fmt: skip
    start = text.index("[pins.flash-linear-attention]")
    end = text.index("[pins.numba]")
    manifest.write_text(text[:start] + divergent.lstrip() + "\n" + text[end:])
    bump(manifest, BumpRequest(name="flash-linear-attention", version="0.5.0", why="0.5 for all"))
    after = manifest.read_text()
    assert after == text.replace(  # folded back to where it was: version after kind
        'version = "0.4.2"\nwhy = "Qwen3-Next linear attention kernels"',
        'version = "0.5.0"\nwhy = "0.5 for all"',
    )


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            BumpRequest(name="torch_memory_saver", commit="f05a875", why="tms#82"),
            "{m}:29: pins.torch_memory_saver: 'f05a875' is a short SHA; pass the full 40-hex "
            "commit (git rev-parse f05a875 in a clone)",
        ),
        (
            BumpRequest(name="torch_memory_saver", commit="main", why="tms#82"),
            "{m}:29: pins.torch_memory_saver: 'main' is not a commit SHA (a branch or tag moves); "
            "pass the full 40-hex merge commit",
        ),
        (
            BumpRequest(name="numba", version="0.65.x", why="fix"),
            "{m}:48: pins.numba: '0.65.x' is not a PEP 440 version; pass an exact one, e.g. 1.2.3",
        ),
        (
            BumpRequest(name="numba", version="==0.66", why="fix"),
            "{m}:48: pins.numba: '==0.66' is not a PEP 440 version; pass an exact one, e.g. 1.2.3",
        ),
        (
            BumpRequest(name="numba", commit=NEW_SHA, why="fix"),
            "{m}:48: pins.numba: a pypi pin takes --version, not --commit",
        ),
        (
            BumpRequest(name="torch-memory-savers", commit=NEW_SHA, why="fix"),
            "{m}: no pin named 'torch-memory-savers'; did you mean 'torch_memory_saver'?",
        ),
        (
            BumpRequest(name="numba", version="0.66.0", why="TODO"),
            "{m}:48: pins.numba: --why 'TODO' says nothing; give the new pin's provenance "
            "(PR, release, merge commit)",
        ),
        (
            BumpRequest(name="numba", version="0.66.0", why="fix", variant="cuda"),
            "{m}:48: pins.numba: not on cuda (variants = ['rocm']); drop --variant",
        ),
        (
            BumpRequest(name="numba", version="0.66.0", why="fix", reason="because"),
            "{m}:48: pins.numba: --reason goes with --diverge; add --diverge or drop --reason",
        ),
        (
            BumpRequest(name="numba", version="0.66.0", why="fix", diverge=True, variant="rocm"),
            '{m}:48: pins.numba: --diverge needs --variant NAME and --reason "why it differs"',
        ),
        (
            BumpRequest(name="numba", version="0.66.0", why="fix", variant="rcom"),
            "{m}:48: pins.numba: --variant: unknown variant or group 'rcom'; did you mean 'rocm'?",
        ),
        (
            BumpRequest(name="numba", why="fix"),
            "pins bump numba: pass exactly one of --commit SHA, --version V or --fetch",
        ),
    ],
)
def test_refusals_write_nothing(manifest: Path, request_: BumpRequest, message: str) -> None:
    before = manifest.read_text()
    with pytest.raises(ConfigError) as caught:
        bump(manifest, request_)
    assert str(caught.value) == message.format(m=manifest)
    assert manifest.read_text() == before


def test_result_that_fails_lint_is_refused(manifest: Path) -> None:
    edit(manifest, 'why = "ROCm ABI"', 'why = "TODO"')
    before = manifest.read_text()
    with pytest.raises(ConfigError) as caught:
        bump(manifest, BumpRequest(name="numba", version="0.66.0", why="numba 0.66"))
    assert str(caught.value) == (
        f"{manifest}: pins.numba: the bump would fail the lint, nothing written:\n"
        f"  {manifest}:61: TB007 pins.numpy.why: give the pin's provenance, not 'TODO'"
    )
    assert manifest.read_text() == before


def test_pinning_a_floating_range_drops_floating(manifest: Path) -> None:
    bump(manifest, BumpRequest(name="numpy", version="1.26.4", why="ROCm ABI, exact"))
    text = manifest.read_text()
    assert "range" not in text
    assert "floating" not in text
    assert '[pins.numpy]\nkind = "pypi"\nversion = "1.26.4"\n' in text


def test_dry_run_and_no_temp_files_left(manifest: Path) -> None:
    before = manifest.read_text()
    result = bump(manifest, BumpRequest(name="numba", version="0.66.0", why="x"), write=False)
    assert manifest.read_text() == before
    assert 'version = "0.66.0"' in result.text
    assert result.report().endswith(f"dry run: {manifest} left as it was\n")
    bump(manifest, BumpRequest(name="numba", version="0.66.0", why="x"))
    assert sorted(p.name for p in manifest.parent.iterdir()) == ["manifest.toml"]


@needs_git
@pytest.mark.git
def test_upstream_check_refuses_side_branch_and_accepts_merge(
    manifest: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    up = init(tmp_path / "tms")
    commit_file(up, "a", "a\n", "first")
    git(up, "checkout", "-q", "-b", "fix")
    commit_file(up, "b", "b\n", "fix")
    git(up, "checkout", "-q", "main")
    git(up, "merge", "-q", "--no-ff", "-m", "Merge pull request #90", "fix")
    merge = git(up, "rev-parse", "HEAD")
    git(up, "checkout", "-q", "-b", "side")
    side = commit_file(up, "c", "c\n", "side")
    git(up, "checkout", "-q", "main")
    before = manifest.read_text()
    with pytest.raises(UpstreamRefused):
        bump(manifest, BumpRequest(name="torch_memory_saver", commit=side, why="side"),
             upstream=str(up))  # fmt: skip
    assert manifest.read_text() == before
    result = bump(
        manifest, BumpRequest(name="torch_memory_saver", commit=merge, why="tms#90"),
        upstream=str(up),
    )  # fmt: skip
    assert f"upstream: {merge[:12]} is on main: merge commit of" in result.report()
    assert merge in manifest.read_text()
