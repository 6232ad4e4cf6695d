"""Conformance decides "this image holds what the manifest pins": both directions of every value.

Each pin kind is checked one value older, one newer, equal in another spelling, and with PEP 440
local labels; apt versions, checkout commits and file hashes likewise. The pins come from a real
manifest text (parsed by the manifest model), the image side from the collector's JSON shape.
Expected messages are written out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import image, repin
from twinbuild.manifest.loader import loads
from twinbuild.manifest.model import ResolvedPin
from twinbuild.smoke.conformance import Collected, check_base, check_pin, is_floating, request_for

PLATFORMS = """schema = 2
[variants.cuda]
archs = ["linux/amd64"]
recipe = "cuda"
runners = { build = ["self-hosted", "builder", "cuda"], gpu = ["self-hosted", "gpu", "cuda"] }
base = { repository = "r/c", tag = "t", digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111" }
python = "3.12"
toolkit = "12.9"
vendor = "nvidia"
gpu_archs = ["9.0"]
[variants.rocm]
archs = ["linux/amd64"]
recipe = "rocm"
runners = { build = ["self-hosted", "builder", "rocm"], gpu = ["self-hosted", "gpu", "rocm"] }
base = { repository = "r/r", tag = "t", digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222" }
python = "3.12"
toolkit = "7.0"
vendor = "amd"
gpu_archs = ["gfx942"]
[local]
suite = "bookworm"
# mirror: none (mmdebstrap's default)
packages = ["python3"]
"""

PINS = """
[pins.fla]
kind = "pypi"
dist = "flash-linear-attention"
version = "0.4.2"
why = "w"

[pins.torch]
kind = "pypi"
version = "2.9.1+cu129"
why = "w"

[pins.numpy]
kind = "pypi"
range = ">=1.26,<2"
floating = "any 1.x from 1.26"
why = "w"

[pins.rsync]
kind = "apt"
version = "3.2.7-1ubuntu1"
why = "w"

[pins.nvtop]
kind = "apt"
package = "nvtop-bin"
floating = "the archive decides"
why = "w"

[pins.megatron-lm]
kind = "git"
repo = "https://github.com/NVIDIA/Megatron-LM"
commit = "0123456789abcdef0123456789abcdef01234567"
install = "checkout"
path = "/root/Megatron-LM"
why = "w"

[pins.apex-src]
kind = "git"
repo = "https://github.com/NVIDIA/apex"
ref = "main"
install = "checkout"
path = "/opt/apex"
floating = "tracks main"
why = "w"

[pins.tms]
kind = "git"
repo = "https://github.com/fzyzcjy/torch_memory_saver"
ref = "main"
floating = "tracks main"
why = "w"

[pins.kubectl]
kind = "url"
url = "https://dl.k8s.io/kubectl"
sha256 = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
version = "1.36.3"
install = "file"
path = "/usr/local/bin/kubectl"
why = "w"
"""

WHERE = "pins/manifest.toml"
MEGATRON = "0123456789abcdef0123456789abcdef01234567"


def _pins() -> dict[str, ResolvedPin]:
    manifest = loads(PLATFORMS + PINS, Path(WHERE))
    return {p.name: p for p in manifest.resolve(image("cuda"))}


def _line(name: str) -> int:
    return loads(PLATFORMS + PINS, Path(WHERE)).line_of("pins", name)


def _dists(**versions: str) -> Collected:
    rows: list[dict[str, Any]] = [
        {"name": n, "version": v, "direct_url": None} for n, v in versions.items()
    ]
    return Collected.from_json({"distributions": rows})


# -- pip versions: older, newer, same in another spelling, local labels -------------------------


@pytest.mark.parametrize(
    ("found", "outcome"),
    [
        ("0.4.2", "passed"),
        ("0.4.2.0", "passed"),  # one version, two spellings
        ("0.4.02", "passed"),
        ("0.4.1", "failed"),  # older
        ("0.4.1.99", "failed"),
        ("0.4.2rc1", "failed"),  # the pre-release of the pin is older
        ("0.4.2.post1", "failed"),  # newer
        ("0.4.3", "failed"),
        ("0.5.0", "failed"),
        ("0.4.2+cu129", "passed"),  # PEP 440: a pin without a local label ignores the found one
        ("0.4.1+cu129", "failed"),
    ],
)
def test_a_pinned_version_matches_only_itself(found: str, outcome: str) -> None:
    result = check_pin(_pins()["fla"], _dists(flash_linear_attention=found), where=WHERE)
    assert (result.outcome, result.holds) == (outcome, found)
    if outcome == "failed":
        assert result.message == (
            f"{WHERE}:{_line('fla')}: pin fla: expected flash-linear-attention==0.4.2, "
            f"found flash_linear_attention {found}"
        )
    else:
        assert result.message == f"{WHERE}:{_line('fla')}: pin fla: flash-linear-attention==0.4.2"


@pytest.mark.parametrize(
    ("found", "outcome"),
    [
        ("2.9.1+cu129", "passed"),
        ("2.9.1+CU129", "passed"),  # local labels compare case-insensitively (PEP 440)
        ("2.9.1", "failed"),  # a pin that names a local label requires exactly that label
        ("2.9.1+cu128", "failed"),  # another toolkit's build
        ("2.9.1+rocm7.0", "failed"),
        ("2.9.0+cu129", "failed"),  # older
        ("2.9.2+cu129", "failed"),  # newer
    ],
)
def test_a_version_with_a_local_label_matches_only_that_build(found: str, outcome: str) -> None:
    result = check_pin(_pins()["torch"], _dists(torch=found))
    assert result.outcome == outcome, found
    if outcome == "failed":
        assert result.message == f"pin torch: expected torch==2.9.1+cu129, found torch {found}"


def test_a_version_that_is_not_pep_440_compares_as_text() -> None:
    pin = _pins()["fla"]
    assert check_pin(pin, _dists(**{"flash-linear-attention": "0.4.2-custom"})).outcome == "failed"
    odd = _dists(**{"flash-linear-attention": "not a version"})
    assert check_pin(pin, odd).message == (
        "pin fla: expected flash-linear-attention==0.4.2, found flash-linear-attention "
        "not a version"
    )


def test_a_missing_distribution_fails() -> None:
    assert check_pin(_pins()["fla"], _dists(other="1")).message == (
        "pin fla: expected flash-linear-attention==0.4.2, found no distribution "
        "flash-linear-attention installed"
    )


@pytest.mark.parametrize(
    ("found", "outcome"),
    [
        ("1.26.0", "passed"),  # the lower bound is inclusive
        ("1.26.4", "passed"),
        ("1.99", "passed"),
        ("1.25.2", "failed"),  # older than the range
        ("2.0", "failed"),  # the upper bound is exclusive
        ("2.0.0rc1", "failed"),  # a pre-release of 2 is not < 2
        ("2.1.0", "failed"),  # newer than the range
    ],
)
def test_a_range_holds_both_bounds(found: str, outcome: str) -> None:
    result = check_pin(_pins()["numpy"], _dists(numpy=found))
    assert (result.outcome, result.holds) == (outcome, found)
    if outcome == "passed":
        assert result.message == f"pin numpy: numpy>=1.26,<2 (floating) (floating: holds {found})"
    else:
        assert (
            result.message == f"pin numpy: expected numpy>=1.26,<2 (floating), found numpy {found}"
        )


# -- apt -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("found", "outcome"),
    [
        ("3.2.7-1ubuntu1", "passed"),
        ("3.2.7-1ubuntu0.1", "failed"),  # older (a security update of the previous release)
        ("3.2.7-1ubuntu1.1", "failed"),  # newer
        ("3.2.8-1", "failed"),
        ("1:3.2.7-1ubuntu1", "failed"),  # an epoch makes another version
    ],
)
def test_an_apt_version_matches_only_itself(found: str, outcome: str) -> None:
    result = check_pin(_pins()["rsync"], Collected.from_json({"apt": {"rsync": found}}))
    assert (result.outcome, result.holds) == (outcome, found)
    expected = (
        "pin rsync: rsync=3.2.7-1ubuntu1"
        if outcome == "passed"
        else f"pin rsync: expected rsync=3.2.7-1ubuntu1, found rsync {found}"
    )
    assert result.message == expected


def test_an_apt_package_not_installed_fails() -> None:
    result = check_pin(_pins()["rsync"], Collected.from_json({"apt": {"rsync": None}}))
    assert (result.outcome, result.message) == (
        "failed",
        "pin rsync: expected rsync=3.2.7-1ubuntu1, found rsync not installed",
    )
    other = Collected.from_json({"apt": {"nvtop-bin": "3.0"}})
    assert check_pin(_pins()["rsync"], other).outcome == "failed"


def test_a_floating_apt_pin_is_checked_by_its_package_name_and_records_the_version() -> None:
    pin = _pins()["nvtop"]
    found = Collected.from_json({"apt": {"nvtop-bin": "3.0.2-1"}})
    result = check_pin(pin, found)
    assert (result.outcome, result.holds, result.message) == (
        "passed",
        "3.0.2-1",
        "pin nvtop: nvtop-bin (floating) (floating: holds 3.0.2-1)",
    )
    by_pin_name = Collected.from_json({"apt": {"nvtop": "3.0.2-1"}})
    assert check_pin(pin, by_pin_name).message == (
        "pin nvtop: expected nvtop-bin (floating), found nvtop-bin not installed"
    )


def test_request_asks_for_apt_packages_checkouts_and_files() -> None:
    assert request_for(_pins().values()) == {
        "checkouts": ["/root/Megatron-LM", "/opt/apex"],
        "files": ["/usr/local/bin/kubectl"],
        "apt": ["rsync", "nvtop-bin"],
    }


# -- checkouts ---------------------------------------------------------------------------------


def _checkout(commit: str | None, ref: str | None = None, error: str | None = None) -> Collected:
    row = {"commit": commit, "ref": ref, "error": error}
    return Collected.from_json({"checkouts": {"/root/Megatron-LM": row}})


@pytest.mark.parametrize(
    "found",
    [
        MEGATRON[:-1] + "8",  # one hex off
        MEGATRON[:12],  # a short SHA is not the commit
        MEGATRON.upper(),
        "f" * 40,
    ],
)
def test_a_checkout_at_another_commit_fails(found: str) -> None:
    result = check_pin(_pins()["megatron-lm"], _checkout(found))
    assert (result.outcome, result.holds) == ("failed", found)
    assert result.message == (
        f"pin megatron-lm: expected commit {MEGATRON} at /root/Megatron-LM, found commit {found}"
    )


def test_a_checkout_at_the_commit_passes_whatever_branch_names_it() -> None:
    result = check_pin(_pins()["megatron-lm"], _checkout(MEGATRON, "refs/heads/dev"))
    assert (result.outcome, result.holds, result.message) == (
        "passed",
        MEGATRON,
        f"pin megatron-lm: commit {MEGATRON} at /root/Megatron-LM",
    )


def test_a_checkout_that_was_not_collected_fails() -> None:
    result = check_pin(_pins()["megatron-lm"], Collected.from_json({}))
    assert result.message == (
        f"pin megatron-lm: expected commit {MEGATRON} at /root/Megatron-LM, found no checkout "
        "(/root/Megatron-LM: not collected)"
    )
    assert result.holds is None
    no_commit = check_pin(_pins()["megatron-lm"], _checkout(None, error=None))
    assert no_commit.message.endswith("found no checkout (/root/Megatron-LM: not collected)")


def test_a_floating_git_pin_records_the_commit_it_resolved_to() -> None:
    pin = _pins()["tms"]
    assert is_floating(pin)
    direct = {"url": "https://x", "vcs_info": {"vcs": "git", "commit_id": "c" * 40}}
    found = Collected.from_json(
        {"distributions": [{"name": "tms", "version": "0.1", "direct_url": direct}]}
    )
    result = check_pin(pin, found)
    assert (result.outcome, result.holds, result.message) == (
        "passed",
        "c" * 40,
        f"pin tms: tms from https://github.com/fzyzcjy/torch_memory_saver@main (floating: holds "
        f"{'c' * 40})",
    )
    no_vcs = Collected.from_json(
        {"distributions": [{"name": "tms", "version": "0.1", "direct_url": {"url": "https://x"}}]}
    )
    assert check_pin(pin, no_vcs).message == (
        "pin tms: expected tms from https://github.com/fzyzcjy/torch_memory_saver@main, found tms "
        "0.1 installed from https://x, not from git"
    )


# -- downloaded files --------------------------------------------------------------------------


def _file(sha: str | None, error: str | None = None) -> Collected:
    return Collected.from_json(
        {"files": {"/usr/local/bin/kubectl": {"sha256": sha, "error": error}}}
    )


def test_a_file_with_the_pinned_hash_passes() -> None:
    result = check_pin(_pins()["kubectl"], _file("e" * 64))
    assert (result.outcome, result.holds, result.message) == (
        "passed",
        "e" * 64,
        f"pin kubectl: sha256 {'e' * 64} at /usr/local/bin/kubectl",
    )


@pytest.mark.parametrize("found", ["e" * 63 + "f", "E" * 64, "0" * 64])
def test_a_file_with_another_hash_fails(found: str) -> None:
    result = check_pin(_pins()["kubectl"], _file(found))
    assert (result.outcome, result.holds) == ("failed", found)
    assert result.message == (
        f"pin kubectl: expected sha256 {'e' * 64} at /usr/local/bin/kubectl, found sha256 {found}"
    )


def test_a_missing_file_fails_with_the_collectors_reason() -> None:
    result = check_pin(_pins()["kubectl"], _file(None, "/usr/local/bin/kubectl: no such file"))
    assert result.message == (
        f"pin kubectl: expected sha256 {'e' * 64} at /usr/local/bin/kubectl, found no file "
        "(/usr/local/bin/kubectl: no such file)"
    )
    assert check_pin(_pins()["kubectl"], Collected.from_json({})).message.endswith(
        "found no file (/usr/local/bin/kubectl: not collected)"
    )


# -- what counts as floating -------------------------------------------------------------------


def test_floating_is_a_declaration_a_range_or_a_git_pin_without_a_commit() -> None:
    pins = _pins()
    assert {n for n, p in pins.items() if is_floating(p)} == {"numpy", "nvtop", "tms", "apex-src"}


def test_the_collector_keeps_the_first_distribution_of_a_name() -> None:
    """Python imports the first on sys.path; a shadowed second copy must not be what is checked."""
    found = Collected.from_json(
        {
            "distributions": [
                {"name": "Flash_Linear_Attention", "version": "0.4.1", "location": "/a"},
                {"name": "flash-linear-attention", "version": "0.4.2", "location": "/b"},
            ]
        }
    )
    result = check_pin(_pins()["fla"], found)
    assert (result.outcome, result.holds) == ("failed", "0.4.1")
    assert found.dists["flash-linear-attention"].location == "/a"


def test_a_floating_checkout_records_the_commit_it_found() -> None:
    found = Collected.from_json(
        {"checkouts": {"/opt/apex": {"commit": "a" * 40, "ref": "refs/heads/main", "error": None}}}
    )
    result = check_pin(_pins()["apex-src"], found)
    assert (result.outcome, result.holds, result.message) == (
        "passed",
        "a" * 40,
        f"pin apex-src: https://github.com/NVIDIA/apex@main at /opt/apex (floating: holds "
        f"{'a' * 40})",
    )


def test_only_checkout_and_file_pins_with_a_path_are_requested() -> None:
    pins = _pins()
    pip_with_path = repin(pins["fla"], path="/opt/fla")
    assert request_for([pip_with_path]) == {"checkouts": [], "files": [], "apt": []}


def test_a_git_pin_installed_from_the_registry_still_records_its_version() -> None:
    pin = _pins()["tms"]
    result = check_pin(pin, _dists(tms="0.1"))
    assert (result.outcome, result.holds) == ("failed", "0.1")
    assert result.message == (
        "pin tms: expected tms from https://github.com/fzyzcjy/torch_memory_saver@main, found tms "
        "0.1 without direct_url.json (not installed from git)"
    )


def _wheel(direct: dict[str, Any] | None) -> Collected:
    row = {"name": "tool", "version": "1.0", "direct_url": direct}
    return Collected.from_json({"distributions": [row]})


def test_a_wheel_url_pin_without_a_recorded_hash_fails() -> None:
    pin = repin(_pins()["kubectl"], install="pip", dist="tool", path=None, version=None)
    for direct in (None, {"url": "https://x/tool.whl"}, {"url": "u", "archive_info": {}}):
        result = check_pin(pin, _wheel(direct))
        assert (result.outcome, result.holds) == ("failed", "1.0"), direct
        assert result.message == (
            f"pin kubectl: expected tool from https://dl.k8s.io/kubectl (sha256 {'e' * 64}), "
            "found tool 1.0 with no recorded archive sha256 (direct_url.json)"
        )
    wrong = {"url": "u", "archive_info": {"hashes": {"sha256": "0" * 64}}}
    assert check_pin(pin, _wheel(wrong)).holds == "1.0"
    legacy = {"url": "u", "archive_info": {"hash": "sha256=" + "e" * 64}}
    assert check_pin(pin, _wheel(legacy)).outcome == "passed"


def test_the_base_by_layers_and_by_label_both_ways() -> None:
    ok, msg = check_base(expected="sha256:b", labels={}, layers=[], base_layers=["l1"])
    assert (ok, msg) == (
        False,
        "base: expected the image's layers to start with the 1 layers of sha256:b, found first "
        "layer (none)",
    )
    assert check_base(expected="sha256:b", labels={}, layers=["l1"], base_layers=None) == (
        False,
        "base: expected label org.twinbuild.base-digest=sha256:b, found no label",
    )
    labels = {"org.twinbuild.base-digest": "sha256:b"}
    assert check_base(expected="sha256:b", labels=labels, layers=[], base_layers=[]) == (
        True,
        "label org.twinbuild.base-digest=sha256:b",
    )


def test_an_unpinned_pin_passes_and_records_the_version() -> None:
    pin = repin(_pins()["numpy"], range="")
    result = check_pin(pin, _dists(numpy="1.26.4"))
    assert (result.pin, result.outcome, result.holds, result.message) == (
        "numpy",
        "passed",
        "1.26.4",
        "pin numpy: numpy (unpinned) (floating: holds 1.26.4)",
    )


def test_a_range_that_is_not_pep_440_fails_naming_what_was_found() -> None:
    pin = repin(_pins()["numpy"], range="~=x")
    result = check_pin(pin, _dists(numpy="1.26.4"))
    assert (result.pin, result.outcome, result.holds, result.message) == (
        "numpy",
        "failed",
        "1.26.4",
        "pin numpy: expected numpy~=x (floating), found 1.26.4; the range is not PEP 440",
    )


def test_a_pre_release_inside_a_range_counts() -> None:
    """The image holds what it holds: a range admits the pre-releases inside it."""
    result = check_pin(_pins()["numpy"], _dists(numpy="1.27.0rc1"))
    assert (result.outcome, result.holds) == ("passed", "1.27.0rc1")


def test_a_git_pin_without_a_commit_floats_even_undeclared() -> None:
    pin = repin(_pins()["tms"], floating=None)
    assert is_floating(pin)
    assert not is_floating(_pins()["megatron-lm"])
    assert not is_floating(repin(_pins()["fla"], kind="url"))


def test_a_result_names_its_pin() -> None:
    pins = _pins()
    assert check_pin(pins["fla"], _dists(flash_linear_attention="0.4.2")).pin == "fla"
    assert check_pin(pins["fla"], _dists(flash_linear_attention="0.4.3")).pin == "fla"


def test_the_collector_json_is_read_with_its_defaults() -> None:
    found = Collected.from_json(
        {
            "python": "/opt/venv/bin/python",
            "distributions": [{"name": "tms", "version": "0.1", "direct_url": "not an object"}],
        }
    )
    assert found.python == "/opt/venv/bin/python"
    assert found.dists["tms"].direct_url is None
    assert found.dists["tms"].location == ""
    assert Collected.from_json({}).python == ""
    result = check_pin(_pins()["tms"], found)
    assert result.message.endswith("found tms 0.1 without direct_url.json (not installed from git)")


def test_a_git_pin_installed_from_an_archive_records_its_version() -> None:
    found = Collected.from_json(
        {"distributions": [{"name": "tms", "version": "0.1", "direct_url": {"url": "https://x"}}]}
    )
    result = check_pin(_pins()["tms"], found)
    assert (result.outcome, result.holds) == ("failed", "0.1")
