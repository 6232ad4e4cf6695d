"""Conformance of collected metadata to resolved pins, without any container."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import image, repin
from twinbuild.manifest.loader import loads
from twinbuild.manifest.model import ResolvedPin
from twinbuild.smoke import collect
from twinbuild.smoke.conformance import Collected, check_base, check_pin, request_for

MINI = Path(__file__).parent.parent / "fixtures/mini/pins/manifest.toml"
TMS = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"
MEGATRON = "0123456789abcdef0123456789abcdef01234567"


def _pins(variant: str = "rocm") -> dict[str, ResolvedPin]:
    manifest = loads(MINI.read_text(), Path("pins/manifest.toml"))
    return {p.name: p for p in manifest.resolve(image(variant))}


def _collected(**dists: Any) -> Collected:
    rows = [{"name": name, "version": v[0], "direct_url": v[1]} for name, v in dists.items()]
    return Collected.from_json(
        {
            "python": "/opt/venv/bin/python",
            "distributions": rows,
            "checkouts": {
                "/root/Megatron-LM": {"commit": MEGATRON, "ref": "refs/heads/main", "error": None}
            },
            "files": {},
            "apt": {},
        }
    )


GOOD = _collected(
    torch_memory_saver=(
        "0.0.9",
        {"url": "file:///m", "vcs_info": {"vcs": "git", "commit_id": TMS}},
    ),
    Flash_Linear_Attention=("0.4.2", None),
    numba=("0.65.1", None),
    numpy=("1.26.4", None),
)


def test_every_pin_of_a_conforming_image_passes() -> None:
    results = {n: check_pin(p, GOOD, where="pins/manifest.toml") for n, p in _pins().items()}
    failed = {n: r.message for n, r in results.items() if r.outcome != "passed"}
    assert failed == {
        "megatron-bridge": "pins/manifest.toml:36: pin megatron-bridge: expected megatron-bridge "
        "at commit 7f0fb3456f8ffe47599b5fd167b454605d85f932, found no distribution "
        "megatron-bridge installed"
    }
    assert results["torch_memory_saver"].holds == TMS
    assert results["megatron-lm"].holds == MEGATRON
    assert results["numpy"].message == (
        "pins/manifest.toml:55: pin numpy: numpy<2 (floating) (floating: holds 1.26.4)"
    )


def test_version_mismatch_names_pin_expected_and_found() -> None:
    found = _collected(**{"flash-linear-attention": ("0.4.3", None)})
    result = check_pin(_pins()["flash-linear-attention"], found, where="pins/manifest.toml")
    assert (result.outcome, result.holds) == ("failed", "0.4.3")
    assert result.message == (
        "pins/manifest.toml:43: pin flash-linear-attention: expected flash-linear-attention==0.4.2,"
        " found flash-linear-attention 0.4.3"
    )


def test_equal_versions_compare_as_versions() -> None:
    found = _collected(numba=("0.65.1.0", None))
    assert check_pin(_pins()["numba"], found).outcome == "passed"


def test_git_commit_mismatch_and_pypi_install_of_a_git_pin() -> None:
    pin = _pins()["torch_memory_saver"]
    other = _collected(
        torch_memory_saver=(
            "0.0.9",
            {"url": "x", "vcs_info": {"vcs": "git", "commit_id": "b" * 40}},
        )
    )
    assert check_pin(pin, other).message == (
        f"pin torch_memory_saver: expected torch_memory_saver at commit {TMS}, found commit "
        + "b" * 40
    )
    from_pypi = _collected(torch_memory_saver=("0.0.9", None))
    assert check_pin(pin, from_pypi).message == (
        f"pin torch_memory_saver: expected torch_memory_saver at commit {TMS}, found "
        "torch_memory_saver 0.0.9 without direct_url.json (not installed from git)"
    )


def test_floating_range_outside_fails() -> None:
    result = check_pin(_pins()["numpy"], _collected(numpy=("2.1.0", None)))
    assert result.message == "pin numpy: expected numpy<2 (floating), found numpy 2.1.0"


def test_checkout_commit_and_missing_checkout() -> None:
    pin = _pins()["megatron-lm"]
    moved = Collected.from_json(
        {"checkouts": {"/root/Megatron-LM": {"commit": "d" * 40, "ref": "refs/heads/x"}}}
    )
    assert check_pin(pin, moved).message == (
        f"pin megatron-lm: expected commit {MEGATRON} at /root/Megatron-LM, found commit "
        + "d" * 40
        + " (HEAD -> refs/heads/x)"
    )
    gone = Collected.from_json(
        {"checkouts": {"/root/Megatron-LM": {"error": "/root/Megatron-LM: no such directory"}}}
    )
    assert check_pin(pin, gone).message == (
        f"pin megatron-lm: expected commit {MEGATRON} at /root/Megatron-LM, found no checkout "
        "(/root/Megatron-LM: no such directory)"
    )


def _file_pin(**changes: Any) -> ResolvedPin:
    base = _pins()["megatron-lm"]
    values = {
        "kind": "url",
        "install": "file",
        "path": "/usr/local/bin/kubectl",
        "sha256": "e" * 64,
        "url": "https://dl.k8s.io/kubectl",
        "name": "kubectl",
        "commit": None,
        "repo": None,
    }
    return repin(base, **{**values, **changes})  # fmt: skip


def test_file_pin_hash() -> None:
    found = Collected.from_json({"files": {"/usr/local/bin/kubectl": {"sha256": "f" * 64}}})
    assert check_pin(_file_pin(), found).message == (
        "pin kubectl: expected sha256 "
        + "e" * 64
        + " at /usr/local/bin/kubectl, found sha256 "
        + "f" * 64
    )
    ok = Collected.from_json({"files": {"/usr/local/bin/kubectl": {"sha256": "e" * 64}}})
    assert check_pin(_file_pin(), ok).holds == "e" * 64


def test_wheel_url_pin_checks_the_archive_hash() -> None:
    pin = _file_pin(install="pip", dist="tool", path=None)
    direct = {"url": "https://x/tool.whl", "archive_info": {"hashes": {"sha256": "e" * 64}}}
    assert check_pin(pin, _collected(tool=("1.0", direct))).outcome == "passed"
    wrong = {"url": "https://x/tool.whl", "archive_info": {"hash": "sha256=" + "0" * 64}}
    assert check_pin(pin, _collected(tool=("1.0", wrong))).message == (
        f"pin kubectl: expected tool from https://dl.k8s.io/kubectl (sha256 {'e' * 64}), "
        f"found sha256 {'0' * 64}"
    )


def test_extras_in_dist_are_not_part_of_the_name() -> None:
    pin = repin(_pins()["numpy"], dist="numpy[extra]")
    assert check_pin(pin, GOOD).outcome == "passed"


def test_request_asks_for_checkouts_files_and_apt() -> None:
    pins = [*_pins().values(), _file_pin()]
    assert request_for(pins) == {
        "checkouts": ["/root/Megatron-LM"],
        "files": ["/usr/local/bin/kubectl"],
        "apt": [],
    }


def test_base_by_layers_then_label() -> None:
    ok, msg = check_base(expected="sha256:b", labels={}, layers=["l1", "l2"], base_layers=["l1"])
    assert (ok, msg) == (True, "image layers start with the 1 layers of sha256:b")
    ok, msg = check_base(expected="sha256:b", labels={}, layers=["x", "l2"], base_layers=["l1"])
    assert msg == (
        "base: expected the image's layers to start with the 1 layers of sha256:b, found first "
        "layer x"
    )
    assert not ok
    labels = {"org.twinbuild.base-digest": "sha256:c"}
    assert check_base(expected="sha256:b", labels=labels, layers=[], base_layers=None) == (
        False,
        "base: expected label org.twinbuild.base-digest=sha256:b, found sha256:c",
    )


def test_collector_runs_here_and_reads_checkouts_files(tmp_path: Path) -> None:
    git = tmp_path / "co/.git"
    (git / "refs/heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs\n" + "9" * 40 + " refs/heads/main\n")
    blob = tmp_path / "blob"
    blob.write_bytes(b"x")
    data = collect.collect(
        {"checkouts": [str(tmp_path / "co"), str(tmp_path / "none")], "files": [str(blob)]}
    )
    assert data["checkouts"][str(tmp_path / "co")]["commit"] == "9" * 40
    assert (
        data["checkouts"][str(tmp_path / "none")]["error"]
        == f"{tmp_path / 'none'}: no such directory"
    )
    assert data["files"][str(blob)]["sha256"] == (
        "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"
    )
    assert any(d["name"] == "pytest" for d in data["distributions"])


def test_collector_output_parsing() -> None:
    assert collect.parse("noise\n" + collect.MARKER + '{"a": 1}\n') == {"a": 1}
    with pytest.raises(ValueError, match="no TWINBUILD-COLLECT line"):
        collect.parse("Traceback ...")
