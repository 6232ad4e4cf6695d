"""`pins bump` moves every variant of a symmetric pin, however the pin is written.

A bump that moved only the first variant would turn a symmetric pin into a silent divergence
(the CUDA image gets the fix, the ROCm image keeps the bug). Each shape of a symmetric pin is
bumped, and the result is read back with the manifest model, not with the bump's own report.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers import MINI_VARIANTS, image, mini_project
from tests.unit.gitrepos import commit_file, init, isolate_git, needs_git
from twinbuild.errors import ConfigError, UpstreamRefused
from twinbuild.manifest.loader import load
from twinbuild.pins.bump import BumpOptions, BumpRequest, bump, bump_pin

FLA = """[pins.flash-linear-attention]
kind = "pypi"
version = "0.4.2"
why = "Qwen3-Next linear attention kernels"
"""
PER_PLATFORM = """[pins.flash-linear-attention]
kind = "pypi"
why = "Qwen3-Next linear attention kernels"

[pins.flash-linear-attention.cuda]
version = "0.4.2"

[pins.flash-linear-attention.rocm]
version = "0.4.2"
"""
EXPLICIT = """[pins.flash-linear-attention]
kind = "pypi"
version = "0.4.2"
variants = ["cuda", "rocm"]
why = "Qwen3-Next linear attention kernels"
"""
GIT_PER_PLATFORM = """[pins.apex]
kind = "git"
repo = "https://github.com/NVIDIA/apex"
why = "the commit miles builds"

[pins.apex.cuda]
commit = "1111111111111111111111111111111111111111"

[pins.apex.rocm]
commit = "1111111111111111111111111111111111111111"
"""


def _manifest(tmp_path: Path, pin_text: str) -> Path:
    path = mini_project(tmp_path) / "pins/manifest.toml"
    text = path.read_text()
    start, end = text.index("[pins.flash-linear-attention]"), text.index("[pins.numba]")
    path.write_text(text[:start] + pin_text + "\n" + text[end:])
    return path


def _versions(path: Path, name: str) -> dict[str, str | None]:
    manifest = load(path)
    return {
        p: {r.name: r for r in manifest.resolve(image(p))}[name].values.version
        for p in MINI_VARIANTS
    }


@pytest.mark.parametrize(
    "shape", [FLA, PER_PLATFORM, EXPLICIT], ids=["common", "per-platform", "explicit"]
)
def test_a_symmetric_version_moves_on_every_platform(tmp_path: Path, shape: str) -> None:
    path = _manifest(tmp_path, shape)
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.2"}
    result = bump(
        path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3")
    )
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.3", "rocm": "0.4.3"}
    assert sorted(result.rebuild) == [image("cuda"), image("rocm")]
    assert result.moved == {
        image("cuda"): ("==0.4.2", "==0.4.3"),
        image("rocm"): ("==0.4.2", "==0.4.3"),
    }


def test_a_symmetric_commit_written_per_platform_moves_on_both(tmp_path: Path) -> None:
    path = mini_project(tmp_path) / "pins/manifest.toml"
    path.write_text(path.read_text() + "\n" + GIT_PER_PLATFORM)
    new = "2" * 40
    bump(path, BumpRequest(name="apex", commit=new, why="apex merge commit"))
    manifest = load(path)
    commits = {
        p: {r.name: r for r in manifest.resolve(image(p))}["apex"].values.commit
        for p in MINI_VARIANTS
    }
    assert commits == {"cuda": new, "rocm": new}


def test_one_platform_of_a_symmetric_pin_moves_only_with_diverge(tmp_path: Path) -> None:
    path = _manifest(tmp_path, FLA)
    before = path.read_text()
    with pytest.raises(ConfigError):
        bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="w w",
                               variant="rocm"))  # fmt: skip
    assert path.read_text() == before
    bump(
        path,
        BumpRequest(name="flash-linear-attention", version="0.4.3", why="the rocm fix",
                    variant="rocm", diverge=True, reason="ROCm needs the 0.4.3 fix first"),
    )  # fmt: skip
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.3"}


# -- the rest of bump's decisions, each found by mutation testing ------------------------------


def _mini(tmp_path: Path) -> Path:
    return mini_project(tmp_path) / "pins/manifest.toml"


def test_bump_pin_takes_the_cli_options(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    before = path.read_text()
    request = BumpRequest(name="numba", version="0.66.0", why="numba 0.66")
    dry = bump_pin(BumpOptions(manifest=path, request=request, dry_run=True))
    assert path.read_text() == before
    assert dry.report().endswith(f"dry run: {path} left as it was\n")
    with pytest.raises(ConfigError) as info:
        bump_pin(BumpOptions(manifest=path, request=request, upstream=str(tmp_path)))
    assert str(info.value) == "pins.numba: --upstream checks a commit; drop it for --version"
    bump_pin(BumpOptions(manifest=path, request=request))
    assert {r.name: r.values.version for r in load(path).resolve(image("rocm"))}[
        "numba"
    ] == "0.66.0"


def test_a_bump_to_the_same_value_rebuilds_nothing(tmp_path: Path) -> None:
    path = _manifest(tmp_path, FLA)
    result = bump(
        path, BumpRequest(name="flash-linear-attention", version="0.4.2", why="re-checked")
    )
    assert result.report() == (
        "pins.flash-linear-attention:\n"
        "  cuda, rocm: ==0.4.2\n"
        "rebuild: none (no image input changed)\n"
    )


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            BumpRequest(name="torch_memory_saver", version="1.0", why="w w"),
            "pins.torch_memory_saver: a git pin takes --commit, not --version",
        ),
        (
            BumpRequest(name="torch_memory_saver", commit="A" * 40, why="w w"),
            "pins.torch_memory_saver: '" + "A" * 40 + "' has upper-case hex; pass it in lower case",
        ),
        (
            BumpRequest(name="numba", version="0.66 .0", why="w w"),
            "pins.numba: '0.66 .0' is not a version; pass an exact one, e.g. 1.2.3",
        ),
        (
            BumpRequest(name="numba", version=" ", why="w w"),
            "pins.numba: ' ' is not a version; pass an exact one, e.g. 1.2.3",
        ),
    ],
)
def test_values_that_are_no_pin_are_refused(
    tmp_path: Path, request_: BumpRequest, message: str
) -> None:
    path = _mini(tmp_path)
    with pytest.raises(ConfigError) as info:
        bump(path, request_)
    assert str(info.value).split(": ", 1)[1] == message


APT_AND_URL = """
[pins.rsync]
kind = "apt"
version = "3.2.7-1ubuntu1"
why = "w w"

[pins.tool]
kind = "url"
url = "https://example.org/tool-1.0-py3-none-any.whl"
sha256 = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
version = "1.0"
why = "w w"
"""


def test_apt_versions_are_debian_versions_and_url_versions_pep_440(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    path.write_text(path.read_text() + APT_AND_URL)
    bump(path, BumpRequest(name="rsync", version="3.2.7-1ubuntu1.1", why="security update"))
    assert 'version = "3.2.7-1ubuntu1.1"' in path.read_text()
    with pytest.raises(ConfigError) as info:
        bump(path, BumpRequest(name="tool", version="1.x", why="w w"))
    line = load(path).line_of("pins", "tool")
    assert str(info.value) == (
        f"{path}:{line}: pins.tool: '1.x' is not a PEP 440 version; pass an exact one, e.g. 1.2.3"
    )


def test_overrides_made_equal_fold_into_one_table(tmp_path: Path) -> None:
    """A pin written per platform that a bump leaves symmetric is written once again."""
    path = _manifest(tmp_path, PER_PLATFORM)
    text = path.read_text()
    bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3"))
    assert "[pins.flash-linear-attention.cuda]" not in path.read_text()
    assert "[pins.flash-linear-attention.rocm]" not in path.read_text()
    # the version opens the table after kind, where Renovate's managers read it
    assert path.read_text() == text.replace(
        'kind = "pypi"\nwhy = "Qwen3-Next linear attention kernels"\n\n'
        '[pins.flash-linear-attention.cuda]\nversion = "0.4.2"\n\n'
        '[pins.flash-linear-attention.rocm]\nversion = "0.4.2"\n',
        'kind = "pypi"\nversion = "0.4.3"\nwhy = "fla 0.4.3"\n',
    )


def test_a_divergent_pin_bumped_equal_folds_its_one_override(tmp_path: Path) -> None:
    divergent = FLA.replace(
        'why = "Qwen3-Next linear attention kernels"\n',
        'why = "Qwen3-Next linear attention kernels"\ndivergence = { rocm = "rocm first" }\n\n'
        '[pins.flash-linear-attention.rocm]\nversion = "0.4.3"\n',
    )
    path = _manifest(tmp_path, divergent)
    bump(path, BumpRequest(name="flash-linear-attention", version="0.4.4", why="both 0.4.4"))
    text = path.read_text()
    assert "[pins.flash-linear-attention.rocm]" not in text
    assert "divergence" not in text
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.4", "rocm": "0.4.4"}


def test_folding_the_last_pin_of_the_file(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    path.write_text(
        path.read_text() + "\n" + PER_PLATFORM.replace("flash-linear-attention", "fla2")
    )
    bump(path, BumpRequest(name="fla2", version="0.4.3", why="fla2 0.4.3"))
    # The folded table ends the file as the file ended: one newline, no blank line after it.
    assert path.read_text().endswith(
        '\n\n[pins.fla2]\nkind = "pypi"\nversion = "0.4.3"\nwhy = "fla2 0.4.3"\n'
    )
    assert not path.read_text().endswith("\n\n")


HALF_FLOATING = """[pins.apex]
kind = "git"
repo = "https://github.com/NVIDIA/apex"
ref = "master"
floating = "cuda tracks master"
divergence = { rocm = "rocm is pinned to its port" }
why = "w w"

[pins.apex.rocm]
commit = "1111111111111111111111111111111111111111"
"""


def test_a_pin_still_floating_on_one_platform_keeps_floating(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    path.write_text(path.read_text() + "\n" + HALF_FLOATING)
    bump(path, BumpRequest(name="apex", commit="2" * 40, why="rocm port", variant="rocm"))
    text = path.read_text()
    assert 'floating = "cuda tracks master"' in text
    assert 'commit = "' + "2" * 40 + '"' in text


def test_a_pin_written_inline_is_refused_with_how_to_write_it(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    text = path.read_text()
    start, end = text.index("[pins.flash-linear-attention]"), text.index("[pins.numba]")
    inline = (
        '[pins]\nflash-linear-attention = { kind = "pypi", version = "0.4.2", why = "w w" }\n\n'
    )
    text = text[:start] + text[end:]
    first = text.index("[pins.torch_memory_saver]")
    path.write_text(text[:first] + inline + text[first:])
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.2"}
    before = path.read_text()
    with pytest.raises(ConfigError) as info:
        bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3"))
    assert str(info.value) == (
        "pins.flash-linear-attention: write it as a [pins.flash-linear-attention] table to let "
        "bump edit it"
    )
    assert path.read_text() == before


def test_a_normalised_name_reports_the_pins_own_name(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    result = bump(path, BumpRequest(name="torch-memory-saver", commit="2" * 40, why="tms#90"))
    assert result.report().startswith("pins.torch_memory_saver:\n")
    assert result.pin == "torch_memory_saver"


def test_an_unknown_name_with_no_close_match_points_at_the_table(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    with pytest.raises(ConfigError) as info:
        bump(path, BumpRequest(name="zzzz", version="1.0", why="w w"))
    assert str(info.value) == f"{path}: no pin named 'zzzz'; twinbuild pins table lists them"


def test_every_lint_finding_of_a_refused_bump_is_listed(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    for pin in ("numpy", "megatron-bridge"):
        text = path.read_text()
        start = text.index(f"[pins.{pin}]")
        why = text.index("why = ", start)
        end = text.index("\n", why)
        path.write_text(text[:why] + 'why = "TODO"' + text[end:])
    with pytest.raises(ConfigError) as info:
        bump(path, BumpRequest(name="numba", version="0.66.0", why="numba 0.66"))
    lines = str(info.value).splitlines()
    assert lines[0] == f"{path}: pins.numba: the bump would fail the lint, nothing written:"
    assert [line.split(": ", 1)[1].split(" ")[0] for line in lines[1:]] == ["TB007", "TB007"]
    assert all(line.startswith(f"  {path}:") for line in lines[1:])


def test_platform_on_a_one_platform_pin_edits_it_in_place(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    plain = tmp_path / "plain.toml"
    plain.write_text(path.read_text())
    request = BumpRequest(name="numba", version="0.66.0", why="numba 0.66")
    bump(plain, request)
    bump(path, replace(request, variant="rocm"))
    assert path.read_text() == plain.read_text()
    assert "[pins.numba.rocm]" not in path.read_text()


def test_diverging_into_an_override_table_that_lacks_the_field(tmp_path: Path) -> None:
    shape = FLA + '\n[pins.flash-linear-attention.rocm]\nlayer = "late"\n'
    path = _manifest(tmp_path, shape)
    bump(
        path,
        BumpRequest(name="flash-linear-attention", version="0.4.3", why="the rocm fix",
                    variant="rocm", diverge=True, reason="ROCm needs 0.4.3 first"),
    )  # fmt: skip
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.3"}
    assert 'divergence = {rocm = "ROCm needs 0.4.3 first"}' in path.read_text()


@needs_git
def test_an_upstream_refusal_names_the_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    up = init(tmp_path / "up")
    commit_file(up, "a", "a\n", "first")
    path = _mini(tmp_path)
    missing = "3" * 40
    with pytest.raises(UpstreamRefused) as info:
        bump(path, BumpRequest(name="torch_memory_saver", commit=missing, why="w w"),
             upstream=str(up))  # fmt: skip
    assert str(info.value).startswith(f"pins.torch_memory_saver: commit {missing} is not in {up} ")


def test_folding_adds_the_blank_line_before_the_next_pin(tmp_path: Path) -> None:
    tight = PER_PLATFORM.replace("\n\n", "\n")  # no blank line between the tables
    path = _manifest(tmp_path, tight)
    bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3"))
    assert '\nversion = "0.4.3"\nwhy = "fla 0.4.3"\n\n[pins.numba]\n' in path.read_text()


def test_a_symmetric_pin_at_the_end_of_the_file_is_edited_in_place(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    before = path.read_text()
    old = "0123456789abcdef0123456789abcdef01234567"
    bump(path, BumpRequest(name="megatron-lm", commit="4" * 40, why="the new commit"))
    assert path.read_text() == before.replace(old, "4" * 40).replace(
        'why = "miles\' Megatron-LM"', 'why = "the new commit"'
    )


INLINE = """[pins.flash-linear-attention]
kind = "pypi"
why = "Qwen3-Next linear attention kernels"
cuda = { version = "0.4.2" }
rocm = { version = "0.4.1" }
divergence = { rocm = "rocm waits for a fix" }
"""


def test_one_inline_override_moves_alone(tmp_path: Path) -> None:
    path = _manifest(tmp_path, INLINE)
    request = BumpRequest(
        name="flash-linear-attention", version="0.4.2", why="rocm catches up", variant="rocm"
    )
    bump(path, request)
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.2", "rocm": "0.4.2"}
    assert "{ version" not in path.read_text()  # equal again: folded into one table


FLOATING_OVERRIDE = """[pins.flash-linear-attention]
kind = "pypi"
version = "0.4.2"
why = "Qwen3-Next linear attention kernels"
floating = "rocm follows the 0.4 series"
divergence = { rocm = "rocm takes any 0.4" }
[pins.flash-linear-attention.rocm]
range = ">=0.4,<0.5"
"""


VERSION_THEN_WHY = (
    '[pins.flash-linear-attention]\nkind = "pypi"\nversion = "0.4.3"\nwhy = "fla 0.4.3"\n'
)


@pytest.mark.parametrize(
    ("pin_text", "folded"),
    [
        # Overrides written inline were skipped: the bump set the pin's own version, which the
        # overrides still hid, so the pin did not move on either platform.
        pytest.param(INLINE, VERSION_THEN_WHY, id="inline-overrides"),
        # A range in an override was left in place: only cuda moved, rocm kept floating.
        pytest.param(FLOATING_OVERRIDE, VERSION_THEN_WHY, id="floating-override"),
        # A divergence left on a pin without overrides goes once the pin is equal on both.
        pytest.param(
            FLA + 'divergence = { rocm = "a reason left from before" }\n',
            VERSION_THEN_WHY,
            id="stale-divergence",
        ),
    ],
)
def test_a_bump_of_both_folds_the_pin_into_one_table(
    tmp_path: Path, pin_text: str, folded: str
) -> None:
    path = _manifest(tmp_path, pin_text)
    text = path.read_text()
    bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3"))
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.3", "rocm": "0.4.3"}
    assert path.read_text() == text.replace(pin_text, folded)


def test_folding_copies_every_key_that_differs_after_one_that_does_not(tmp_path: Path) -> None:
    overrides = (
        '[pins.flash-linear-attention]\nkind = "pypi"\nlayer = "late"\n'
        'why = "Qwen3-Next linear attention kernels"\n\n'
        '[pins.flash-linear-attention.cuda]\nlayer = "late"\nversion = "0.4.2"\n\n'
        '[pins.flash-linear-attention.rocm]\nlayer = "late"\nversion = "0.4.1"\n'
    )
    path = _manifest(tmp_path, overrides)
    bump(path, BumpRequest(name="flash-linear-attention", version="0.4.3", why="fla 0.4.3"))
    assert _versions(path, "flash-linear-attention") == {"cuda": "0.4.3", "rocm": "0.4.3"}
    assert (
        '[pins.flash-linear-attention]\nkind = "pypi"\nversion = "0.4.3"\nlayer = "late"\n'
        'why = "fla 0.4.3"\n\n[pins.numba]'
    ) in path.read_text()


def test_a_file_that_ended_in_a_blank_line_still_does(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    path.write_text(
        path.read_text() + "\n" + PER_PLATFORM.replace("flash-linear-attention", "fla2") + "\n"
    )
    bump(path, BumpRequest(name="fla2", version="0.4.3", why="fla2 0.4.3"))
    assert path.read_text().endswith('version = "0.4.3"\nwhy = "fla2 0.4.3"\n\n')


def test_a_bump_whose_result_would_not_load_writes_nothing(tmp_path: Path) -> None:
    """A --why so long that the manifest would pass its size limit: refused, file unchanged."""
    path = _mini(tmp_path)
    before = path.read_text()
    with pytest.raises(ConfigError) as info:
        bump(path, BumpRequest(name="numba", version="0.66.0", why="fix " * 1_100_000))
    assert str(info.value) == (
        f"{path}: the bump would leave a manifest that does not load, nothing written: "
        f"{path}: over the 4194304-byte limit for a manifest; is this the right file?"
    )
    assert path.read_text() == before
