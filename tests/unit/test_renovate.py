"""The Renovate config finds every pin, with the real Renovate 39 in extract-only mode.

Renovate comes from the npm registry into a folder of the user's cache (never the repository),
once: ``~/.cache/twinbuild/tools/renovate-<version>``. Where npm cannot reach the registry the
test is skipped, saying so. Renovate then runs ``--platform=local --dry-run=extract`` on a copy
of this repository's manifest, recipes and ``.github/renovate.json``: no lookup, no network. What
it extracts must be, exactly, every PyPI pin (per platform table where the platforms differ),
every git pin that declares the branch it tracks, both bases and both recipes' frontends, each
with the name, value and digest the manifest gives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from packaging.utils import canonicalize_name

from twinbuild.manifest.loader import load
from twinbuild.manifest.model import PinManifest

ROOT = Path(__file__).resolve().parents[2]
VERSION = "39.264.1"
HOME = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "twinbuild" / "tools"
INSTALL_TIMEOUT_S = 1800


def _renovate() -> Path:
    """The Renovate binary, installed from npm into the cache where it is not there yet."""
    folder = HOME / f"renovate-{VERSION}"
    binary = folder / "node_modules" / ".bin" / "renovate"
    if binary.is_file():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: Renovate comes from the npm registry")
    probe = subprocess.run(
        [npm, "view", f"renovate@{VERSION}", "version"], capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        pytest.skip(f"the npm registry is not reachable: {probe.stderr.strip()[-200:]}")
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), f"renovate@{VERSION}"],
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return binary


def _extracted(tmp_path: Path) -> list[dict[str, Any]]:
    repo = tmp_path / "repo"
    for part in ("pins", "images", ".github"):
        shutil.copytree(ROOT / part, repo / part)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for argv in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "pins"],
    ):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True, capture_output=True)  # fmt: skip
    proc = subprocess.run(
        [str(_renovate()), "--platform=local", "--dry-run=extract"], cwd=repo,
        env={**env, "LOG_LEVEL": "debug", "LOG_FORMAT": "json",
             "RENOVATE_BASE_DIR": str(tmp_path / "renovate")},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    found = [json.loads(line) for line in proc.stdout.splitlines() if '"packageFiles"' in line]
    assert found, proc.stdout[-3000:]
    files: list[dict[str, Any]] = found[-1]["packageFiles"]["regex"]
    return [{**dep, "file": f["packageFile"]} for f in files for dep in f["deps"]]


def _pypi_expected(manifest: PinManifest) -> set[tuple[str, str | None, str, str]]:
    """(pin, override table or None, dist, version or range or 'unpinned') per PyPI pin."""
    out: set[tuple[str, str | None, str, str]] = set()
    for name, pin in manifest.pins.items():
        for image in manifest.images(pin.variants):
            r = next(x for x in manifest.resolve(image) if x.name == name)
            if r.kind != "pypi":
                continue
            table = None
            for selector in manifest.selectors(image):  # the topmost table that sets it
                own = pin.overrides.get(selector)
                if own is not None and (own.version or own.range is not None):
                    table = selector
            value = r.values.version or r.values.range or "unpinned"
            dist = canonicalize_name((r.values.dist or name).split("[", 1)[0])
            out.add((name, table, dist, value))
    return out


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return _extracted(tmp_path_factory.mktemp("renovate"))


def test_every_pypi_pin_is_found(extracted: list[dict[str, Any]]) -> None:
    manifest = load(ROOT / "pins/manifest.toml")
    found = {
        (d["depName"], d.get("depType"), canonicalize_name(d.get("packageName") or d["depName"]),
         d["currentValue"])
        for d in extracted if d["datasource"] == "pypi" and d["file"] == "pins/manifest.toml"
    }  # fmt: skip
    assert found == _pypi_expected(manifest)
    assert len(found) == sum(  # no duplicate
        1 for d in extracted if d["datasource"] == "pypi" and d["file"] == "pins/manifest.toml"
    )


def test_lock_maintenance_finds_every_locked_distribution(
    extracted: list[dict[str, Any]],
) -> None:
    from twinbuild.closure import lockfile

    expected = set()
    for path in sorted((ROOT / "pins/lock").glob("*.toml")):
        lock = lockfile.read(path)
        expected |= {
            (f"pins/lock/{path.name}", d.name, d.version)
            for d in lock.dists
            if d.origin == "layer" and d.index == "default"
        }
    found = {
        (d["file"], d["depName"], d["currentValue"])
        for d in extracted if d.get("depType") == "lock"
    }  # fmt: skip
    assert found == expected
    assert len(expected) > 1000


def test_every_git_pin_that_tracks_a_branch_is_found(extracted: list[dict[str, Any]]) -> None:
    manifest = load(ROOT / "pins/manifest.toml")
    expected = {
        (r.name, r.values.repo, r.values.track, r.values.commit)
        for i in manifest.images() for r in manifest.resolve(i)
        if r.kind == "git" and r.values.track
    }  # fmt: skip
    found = {
        (d["depName"], d["packageName"], d["currentValue"], d["currentDigest"])
        for d in extracted if d["datasource"] == "git-refs"
    }  # fmt: skip
    assert found == expected
    assert len(expected) >= 4


def test_both_bases_and_both_frontends_are_found(extracted: list[dict[str, Any]]) -> None:
    manifest = load(ROOT / "pins/manifest.toml")
    bases = {
        (d["depType"], d["depName"], d["currentValue"], d["currentDigest"])
        for d in extracted if d["datasource"] == "docker" and d["file"] == "pins/manifest.toml"
    }  # fmt: skip
    assert bases == {
        (name, v.base.repository, v.base.tag, v.base.digest)
        for name, v in manifest.variants.items()
        if v.base.digest
    }
    frontends = {
        d["file"]
        for d in extracted
        if d["datasource"] == "docker" and d["file"] != "pins/manifest.toml"
    }
    assert frontends == {"images/cuda/Dockerfile", "images/rocm/Dockerfile"}
