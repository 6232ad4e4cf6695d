from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import MINI, edit, image, mini_project
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import ManifestError, load

MANIFEST = "pins/manifest.toml"


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load(path)
    return str(info.value)


def test_mini_manifest_loads_and_resolves() -> None:
    manifest = load(MINI / MANIFEST)
    cuda = {p.name: p for p in manifest.resolve(image("cuda"))}
    rocm = {p.name: p for p in manifest.resolve(image("rocm"))}
    assert "numba" not in cuda
    assert rocm["numba"].values.version == "0.65.1"
    assert cuda["torch_memory_saver"].values.commit == "f05a8754daf68238d54e4cf31cb3ba866684bbaf"
    assert cuda["flash-linear-attention"].values.dist == "flash-linear-attention"
    assert cuda["megatron-lm"].values.dist is None
    assert cuda["torch_memory_saver"].line == 29
    assert manifest.variants["rocm"].base.ref.startswith(
        "rocm/sgl-dev:v0.5.6-rocm700-mi35x@sha256:"
    )


def test_missing_file(tmp_path: Path) -> None:
    assert _error(tmp_path / "nope.toml") == (
        f"{tmp_path / 'nope.toml'}: manifest not found; create it or pass --manifest PATH"
    )


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_text("  \n")
    assert _error(path) == f"{path}: manifest is empty; it must declare [variants] and [pins]"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    path.write_bytes(b"schema = 2\n# caf\xe9\n")
    assert _error(path) == f"{path}:2: not UTF-8 (byte 0xe9); save the manifest as UTF-8"


def test_malformed_toml_names_line_and_column(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(root / MANIFEST, 'version = "0.4.2"', 'version = "0.4.2')
    assert _error(root / MANIFEST) == (
        f"{root / MANIFEST}:45:17: invalid TOML: Illegal character '\\n'"
    )


def test_unknown_key_suggests_close_match(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(root / MANIFEST, 'version = "0.4.2"', 'verison = "0.4.2"')
    messages = _messages(root / MANIFEST)
    assert (
        f"{root / MANIFEST}:45: pins.flash-linear-attention.verison: unknown key; did you mean 'version'?"
        in messages
    )


def test_wrong_type(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(root / MANIFEST, 'version = "0.4.2"', "version = 0.42")
    assert _messages(root / MANIFEST) == [
        f"{root / MANIFEST}:45: pins.flash-linear-attention.version: expected a string, got float "
        '(quote it: version = "1.2.3")',
    ]


def test_duplicate_pin_after_normalisation(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    path = root / MANIFEST
    path.write_text(
        path.read_text()
        + '\n[pins.torch-memory-saver]\nkind = "pypi"\nversion = "0.0.9"\nwhy = "dup"\n'
    )
    assert _messages(path) == [
        f"{path}:72: pins.torch-memory-saver: duplicate pin: 'torch-memory-saver' and "
        "'torch_memory_saver' name the same dependency; keep one"
    ]


def test_duplicate_table_is_a_toml_error(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    path = root / MANIFEST
    path.write_text(path.read_text() + '\n[pins.numba]\nkind = "pypi"\n')
    assert _error(path) == f"{path}:72:12: invalid TOML: Cannot declare ('pins', 'numba') twice"


def test_unknown_variant(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(
        root / MANIFEST,
        'variants = ["rocm"]\nasymmetry = "the ROCm',
        'variants = ["rcom"]\nasymmetry = "the ROCm',
    )
    assert _messages(root / MANIFEST) == [
        f"{root / MANIFEST}:51: pins.numba.variants: unknown variant or group 'rcom'; did you "
        "mean 'rocm'?",
    ]


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    edit(root / MANIFEST, 'kind = "pypi"\nversion = "0.4.2"', 'kind = "pip"\nversion = "0.4.2"')
    edit(root / MANIFEST, 'toolkit = "7.0"', "toolkit = 7")
    assert _messages(root / MANIFEST) == [
        f"{root / MANIFEST}:20: variants.rocm.toolkit: expected a string, got int",
        f"{root / MANIFEST}:44: pins.flash-linear-attention.kind: unknown kind 'pip'; expected one of pypi, git, url, apt",
    ]


def test_image_digest_ignores_the_other_variant(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    before = load(root / MANIFEST)
    edit(root / MANIFEST, 'version = "0.65.1"', 'version = "0.66.0"')
    after = load(root / MANIFEST)
    assert before.image_digest(image("cuda")) == after.image_digest(image("cuda"))
    assert before.image_digest(image("rocm")) != after.image_digest(image("rocm"))
    assert before.digest() != after.digest()


def _messages(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load(path)
    return info.value.messages


def test_find_matches_names_after_normalisation() -> None:
    manifest = load(MINI / MANIFEST)
    found = manifest.find("torch-memory-saver")
    assert found is not None
    assert found.name == "torch_memory_saver"
    assert manifest.find("Flash_Linear.Attention") is manifest.pins["flash-linear-attention"]
    assert manifest.find("no-such-pin") is None


def test_missing_top_tables_are_named_and_a_wrong_type_is_not_called_missing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.toml"
    path.write_text("schema = 2\npins = 3\n")
    assert _messages(path) == [
        f"{path}: variants: missing; declare each image as [variants.NAME] (docs/manifest.md)",
        f"{path}: local: missing; declare [local] (suite, packages)",
        f"{path}:2: pins: expected a table, got int",
    ]


def test_the_same_text_is_read_once_and_an_edit_is_read_again(tmp_path: Path) -> None:
    """A process that loads one manifest many times (the gate, the tests) checks it once per
    text: the same bytes at the same path give the same (immutable) manifest, and an edited file,
    or the same text under another name, is read again; a broken text is refused every time."""
    root = mini_project(tmp_path)
    path = root / "pins/manifest.toml"
    first = load(path)
    assert load(path) is first
    twin = tmp_path / "twin.toml"
    twin.write_bytes(path.read_bytes())
    assert load(twin) is not first
    assert load(twin).path == twin
    edit(path, "[pins.numba]\n", "[pins.numba]\n# a comment\n")
    edited = load(path)
    assert edited is not first
    assert edited.text != first.text
    broken = tmp_path / "broken.toml"
    broken.write_text("schema = [\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match=r"broken\.toml"):
            load(broken)
