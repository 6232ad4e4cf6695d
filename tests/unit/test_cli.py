"""The CLI: every command is wired, and errors end in one line and a distinct exit code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import mini_project
from twinbuild.cli.main import build_parser, main

COMMANDS = {
    "lint", "render", "engine", "base", "build", "smoke", "gpu-proof", "import", "workflows",
    "rerun-decision", "evidence", "pins", "plan", "bake", "registry", "push", "release", "prune",
    "variants", "binfmt", "lock",
}  # fmt: skip


def test_every_command_is_wired() -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if a.dest == "command"]
    assert set(actions[0].choices or ()) == COMMANDS


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["pins", "--help"], ["table", "bump", "diff", "adopt-release"]),
        (["evidence", "--help"], ["record", "sign", "verify", "gate", "keygen"]),
    ],
)
def test_subcommands(argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert all(word in out for word in words)


def test_python_dash_m_and_a_missing_manifest(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "twinbuild", "lint", "--manifest", str(missing)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr == (
        f"twinbuild: {missing}: manifest not found; create it or pass --manifest PATH\n"
    )


def test_render_prints_what_the_build_receives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = mini_project(tmp_path)
    manifest = str(root / "pins/manifest.toml")
    assert main(["render", "rocm", "--manifest", manifest, "--profile", "production"]) == 0
    out = capsys.readouterr().out
    assert "  MEGATRON_LM_COMMIT=0123456789abcdef0123456789abcdef01234567\n" in out
    assert "file .twinbuild/pip/pins.txt:\n" in out
    assert "  numba==0.65.1\n" in out


def test_render_defaults_to_the_local_profile_and_the_base_tag_build_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from twinbuild.engine.base import base_tag
    from twinbuild.errors import TwinbuildError
    from twinbuild.manifest.loader import load

    root = mini_project(tmp_path)
    manifest = root / "pins/manifest.toml"
    assert main(["render", "rocm", "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# twinbuild render rocm --arch linux/amd64 --profile local\n")
    local = load(manifest).local
    try:
        tag = base_tag(
            suite=local.suite, mirror=local.mirror, packages=local.packages, arch="linux/amd64"
        )
    except TwinbuildError:  # no mmdebstrap on this machine: render says why it cannot know
        assert "# BASE_IMAGE: unknown until mmdebstrap is installed" in out
    else:
        assert f"  BASE_IMAGE={tag}\n" in out
        assert tag.startswith("twinbuild/base:")
        assert tag != "twinbuild/base:local"
    assert "not in local profile: torch_memory_saver (" in out


def test_pins_table_marks_one_platform_and_floating_pins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = mini_project(tmp_path)
    assert main(["pins", "table", "--manifest", str(root / "pins/manifest.toml")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "### Pins (6 pins, 2 variants: 0 divergent, 2 not on every variant, 1 floating)\n"
    )
    assert (
        "| numpy | pypi | — | `<2` | only rocm: ROCm wheels are built against numpy 1.x; 🔓 floating:"
        in out
    )


def test_commands_find_the_root_from_a_subdirectory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = mini_project(tmp_path / "repo")
    (root / "images" / "local").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(root / "images" / "local")
    assert main(["lint"]) == 0
    # it read the checkout's manifest, and found the recipes under the same root
    assert f"lint: clean (6 pins, {root / 'pins/manifest.toml'})\n" in capsys.readouterr().out


def test_outside_a_checkout_the_error_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["lint"]) == 2
    assert capsys.readouterr().err == (
        f"twinbuild: no pins/manifest.toml in {tmp_path} or any folder above it; run twinbuild "
        "inside a checkout of your images repository, or pass --root DIR (or --manifest PATH)\n"
    )
