"""The one exact-pin rule, in both places that apply it: the build's verify_pins.py and the smoke
conformance. The rule itself is checked against ``packaging`` (the reference PEP 440 code)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import Specifier

from tests.helpers import repin
from twinbuild.manifest.model import ImageKey, ResolvedPin, Values
from twinbuild.smoke.conformance import Collected, check_pin
from twinbuild.util import exact_pin

ROOT = Path(__file__).resolve().parents[2]
VERIFY = ROOT / "images/common/verify_pins.py"
RULE = ROOT / "twinbuild/util/exact_pin.py"

CASES = [
    # (pinned, installed, PEP 440 says)
    ("0.6.15.post1", "0.6.15.post1+cu130", True),  # flashinfer's CUDA 13 wheels
    ("0.6.15.post1", "0.6.15.post1", True),
    ("0.6.15.post1+cu130", "0.6.15.post1+cu130", True),
    ("0.6.15.post1+cu130", "0.6.15.post1", False),  # a pin that names a label requires it
    ("0.6.15.post1+cu130", "0.6.15.post1+cu129", False),
    ("0.6.15.post1+cu130", "0.6.15.post1+CU130", True),  # labels compare case-insensitively
    ("0.6.15.post1", "0.6.15", False),
    ("0.6.15.post1", "0.6.15.post2+cu130", False),
    ("0.6.15-post1", "0.6.15.post1+cu130", True),  # normalised spellings
    ("2.9.0", "2.9+cpu", True),  # 2.9 == 2.9.0
    ("2.9.0", "2.9.1+cpu", False),
    ("1.0rc1", "1.0.0c1+local.7", True),
    ("1.0a1", "1.0b1", False),
    ("1.0.dev1", "1.0.dev1+g1234", True),
    ("1!2.0", "2.0", False),  # epochs differ
    ("0.65.1", "0.65.1.0", True),
    ("1.0+abc.5", "1.0+abc-5", True),
    ("1.0+abc.5", "1.0+abc.05", True),  # numeric label parts compare as numbers
]


@pytest.mark.parametrize(("pinned", "installed", "expected"), CASES)
def test_rule_agrees_with_packaging(pinned: str, installed: str, expected: bool) -> None:
    reference = Specifier(f"=={pinned}").contains(installed, prereleases=True)
    assert reference is expected, "the table itself must be PEP 440"
    assert exact_pin.matches(pinned, installed) is expected


def test_a_non_pep440_string_matches_only_itself() -> None:
    assert exact_pin.matches("nightly-2026", "nightly-2026")
    assert not exact_pin.matches("nightly-2026", "nightly-2027")
    assert not exact_pin.matches("1.0", "(not installed)")


# -- in verify_pins.py, run as the recipes run it -----------------------------------------------


def _site(tmp_path: Path, dists: dict[str, str]) -> Path:
    """A directory importlib.metadata reads like site-packages, holding ``name==version`` dists."""
    site = tmp_path / "site"
    for name, version in dists.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
    return site


def _verify(script: Path, requirements: str, site: Path, tmp_path: Path) -> tuple[int, str]:
    req = tmp_path / "repins.txt"
    req.write_text(requirements, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(req)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    return proc.returncode, proc.stderr


@pytest.fixture(params=["mounted", "checkout"])
def verify_script(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """verify_pins.py laid out as the recipes mount it (beside exact_pin.py), or in the repo."""
    if request.param == "checkout":
        return VERIFY
    tb = tmp_path / "tb"
    tb.mkdir()
    shutil.copy(VERIFY, tb / "verify_pins.py")
    shutil.copy(RULE, tb / "exact_pin.py")
    return tb / "verify_pins.py"


def test_verify_pins_accepts_a_local_label_the_pin_does_not_name(
    verify_script: Path, tmp_path: Path
) -> None:
    site = _site(
        tmp_path,
        {"flashinfer-python": "0.6.15.post1", "flashinfer-jit-cache": "0.6.15.post1+cu130"},
    )
    reqs = "flashinfer-python==0.6.15.post1\nflashinfer-jit-cache==0.6.15.post1\n"
    assert _verify(verify_script, reqs, site, tmp_path) == (0, "")


def test_verify_pins_refuses_a_missing_or_wrong_label(verify_script: Path, tmp_path: Path) -> None:
    site = _site(tmp_path, {"flashinfer-jit-cache": "0.6.15.post1+cu129", "numba": "0.65.0"})
    reqs = "flashinfer-jit-cache==0.6.15.post1+cu130\nnumba==0.65.1\n"
    code, err = _verify(verify_script, reqs, site, tmp_path)
    assert code == 1
    assert "'flashinfer-jit-cache': '0.6.15.post1+cu129, pinned 0.6.15.post1+cu130'" in err
    assert "'numba': '0.65.0, pinned 0.65.1'" in err


# -- in the smoke conformance ---------------------------------------------------------------------

PIN = ResolvedPin(
    name="flashinfer-jit-cache",
    image=ImageKey(variant="cuda", arch="linux/amd64"),
    values=Values(
        kind="pypi",
        install="pip",
        dist="flashinfer-jit-cache",
        version="0.6.15.post1",
        layer="repins",
    ),
    why="test",
    floating=None,
    line=0,
)


def _found(version: str) -> Collected:
    return Collected.from_json(
        {
            "python": "python3",
            "distributions": [
                {"name": "flashinfer_jit_cache", "version": version, "direct_url": None}
            ],
        }
    )


def test_conformance_accepts_a_local_label_the_pin_does_not_name() -> None:
    result = check_pin(PIN, _found("0.6.15.post1+cu130"))
    assert (result.outcome, result.holds) == ("passed", "0.6.15.post1+cu130")


def test_conformance_requires_a_label_the_pin_names() -> None:
    pin = repin(PIN, version="0.6.15.post1+cu130")
    assert check_pin(pin, _found("0.6.15.post1+cu130")).outcome == "passed"
    for found in ("0.6.15.post1", "0.6.15.post1+cu129"):
        result = check_pin(pin, _found(found))
        assert result.outcome == "failed"
        assert result.message == (
            "pin flashinfer-jit-cache: expected flashinfer-jit-cache==0.6.15.post1+cu130, "
            f"found flashinfer_jit_cache {found}"
        )
