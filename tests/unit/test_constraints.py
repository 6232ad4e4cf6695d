"""Production builds install under the lock: the constraints file each image's lock makes, held
against the real pip (``pip install --dry-run --report``) and a real index on 127.0.0.1.

The done-when of #38 for the production recipes: a floating pin stays at its locked version
when the index publishes a newer one, until ``twinbuild lock --upgrade`` moves the lock (and with
it the rendered constraints); what pip does with a hash in a constraints file, which decides
that the file carries none (docs/pins.md); the recipe's filter that leaves the base's own
distributions to the base where no capture exists; and every ``pip install`` of both production
recipes taking the constraints.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from tests.helpers import lock_argv, mini_project, with_pins
from tests.pyindex import PyIndex
from twinbuild.builder.render_command import RenderOptions, render_manifest
from twinbuild.cli.main import main
from twinbuild.closure import lockfile
from twinbuild.closure.constraints import CAPTURED, CONSTRAINTS, NOT_CAPTURED, constraints_text
from twinbuild.closure.lock_model import BaseState, ImageLock, LockedDist, LockedGit

REPO = Path(__file__).resolve().parents[2]
FILTER = REPO / "images/common/base_constraints.py"
TARGET = "/opt/twinbuild/constraints.txt"

PINS = """
[pins.floaty]
kind = "pypi"
range = ""
why = "a floating dependency"
floating = "unpinned: the lock decides"

[pins.solid]
kind = "pypi"
version = "1.0"
why = "an exact pin with a dependency"
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = mini_project(tmp_path)
    with_pins(root, PINS)
    return root


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PyIndex]:
    with PyIndex(tmp_path / "index") as served:
        served.publish("floaty", "1.0", ("dep-a",))
        served.publish("dep-a", "1.0")
        served.publish("solid", "1.0", ("dep-a>=1.0",))
        yield served


def lock(root: Path, index: PyIndex, *more: str) -> None:
    assert main(lock_argv(root, index.url, *more)) == 0


def pip_env(tmp_path: Path) -> dict[str, str]:
    """The real pip with no configuration of this machine's (its index, constraints, links)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, HOME=str(tmp_path / "home"))
    return env


def pip_version() -> Version:
    out = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return Version(out.split()[1])


def dry_run(
    tmp_path: Path, index: PyIndex, requirements: str, constraints: str | None
) -> subprocess.CompletedProcess[str]:
    """``pip install --dry-run --report -`` of ``requirements`` under ``constraints``."""
    (tmp_path / "req.txt").write_text(requirements, encoding="utf-8")
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "install",
               "--dry-run", "--quiet", "--no-cache-dir", "--report", "-",
               "--index-url", index.url, "-r", str(tmp_path / "req.txt")]  # fmt: skip
    if constraints is not None:
        (tmp_path / "constraints.txt").write_text(constraints, encoding="utf-8")
        command += ["-c", str(tmp_path / "constraints.txt")]
    return subprocess.run(command, check=False, capture_output=True, text=True,
                          env=pip_env(tmp_path), timeout=300)  # fmt: skip


def installed(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in report["install"]}


def rendered(root: Path) -> dict[str, str]:
    options = RenderOptions(manifest=root / "pins/manifest.toml", root=root, variant="cuda",
                            profile="production")  # fmt: skip
    return render_manifest(options).files


def layers(files: dict[str, str]) -> str:
    return "".join(body for name, body in sorted(files.items()) if name != CONSTRAINTS)


def test_the_lock_holds_a_floating_pin_when_the_index_publishes_a_newer_one(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    lock(project, index)
    files = rendered(project)
    constraints = files[CONSTRAINTS]
    assert "floaty==1.0\n" in constraints
    assert "dep-a==1.0\n" in constraints
    assert NOT_CAPTURED in constraints.splitlines()
    assert "floaty\n" in layers(files)  # the recipe's layer still asks for it unpinned

    index.publish("floaty", "1.1", ("dep-a",))
    index.publish("dep-a", "1.1")
    # without the lock the real pip takes what was published since
    assert installed(dry_run(tmp_path, index, layers(files), None)) == {
        "floaty": "1.1",
        "dep-a": "1.1",
        "solid": "1.0",
    }
    # under it, the locked closure, as before the release
    assert installed(dry_run(tmp_path, index, layers(files), constraints)) == {
        "floaty": "1.0",
        "dep-a": "1.0",
        "solid": "1.0",
    }

    # a reviewed `lock --upgrade` moves the lock, and so what the build renders
    lock(project, index, "--upgrade", "floaty")
    moved = rendered(project)[CONSTRAINTS]
    assert "floaty==1.1\n" in moved
    assert "dep-a==1.0\n" in moved
    assert installed(dry_run(tmp_path, index, layers(files), moved)) == {
        "floaty": "1.1",
        "dep-a": "1.0",
        "solid": "1.0",
    }


def test_a_hash_in_a_constraints_file_needs_pip_26_1_and_a_mismatch_is_refused(
    index: PyIndex, tmp_path: Path
) -> None:
    good = index.publish("foo", "1.0", ("dep-a",))
    index.publish("foo", "2.0", ("dep-a",))
    dep = (tmp_path / "index/files/dep_a-1.0-py3-none-any.whl").read_bytes()
    dep_hash = hashlib.sha256(dep).hexdigest()
    hashed = f"foo==1.0 --hash=sha256:{good}\ndep-a==1.0 --hash=sha256:{dep_hash}\n"
    honoured = pip_version() >= Version("26.1")
    result = dry_run(tmp_path, index, "foo\n", hashed)
    if honoured:
        assert installed(result) == {"foo": "1.0", "dep-a": "1.0"}
    else:  # any hash in a constraints file turns on hash-checking, which wants `==` in the layer
        assert result.returncode != 0
        assert "pinned with ==" in result.stderr
    # a dependency the constraints name without a hash is refused in hash-checking mode
    half = dry_run(tmp_path, index, "foo==1.0\n", f"foo==1.0 --hash=sha256:{good}\ndep-a==1.0\n")
    assert half.returncode != 0
    # a file whose sha256 is not the locked one is refused: named where pip reads the hash, and
    # before 26.1, where it does not, refused as a requirement without one
    wrong = dry_run(tmp_path, index, "foo==1.0\n", hashed.replace(good, "0" * 64))
    assert wrong.returncode != 0
    if honoured:
        assert f"Expected sha256 {'0' * 64}" in wrong.stderr
        assert f"Got        {good}" in wrong.stderr
    else:
        assert "Hashes are required in --require-hashes mode" in wrong.stderr


def test_the_filter_leaves_the_bases_distributions_to_the_base_only_without_a_capture(
    tmp_path: Path,
) -> None:
    base = tmp_path / "base-site"
    meta = base / "tb_basedist-0.5.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: tb_basedist\nVersion: 0.5\n")
    env = {**os.environ, "PYTHONPATH": str(base)}

    def run(marker: str) -> list[str]:
        generated = tmp_path / "constraints.txt"
        generated.write_text(f"# header\n{marker}\ntb-basedist==1.0\ntb-layerdist==2.0\n")
        out = tmp_path / "out/constraints.txt"
        subprocess.run([sys.executable, str(FILTER), str(generated), str(out)], env=env,
                       check=True, capture_output=True, timeout=60)  # fmt: skip
        return out.read_text(encoding="utf-8").splitlines()

    uncaptured = run(NOT_CAPTURED)
    assert "tb-basedist==1.0" not in uncaptured
    assert any(line.startswith("# the base's: tb-basedist 0.5") for line in uncaptured)
    assert "tb-layerdist==2.0" in uncaptured
    captured = run(CAPTURED)  # the lock knows the base: its file is the build's as it is
    assert "tb-basedist==1.0" in captured
    assert "tb-layerdist==2.0" in captured


def _lock(captured: bool) -> ImageLock:
    return ImageLock(
        image="cuda-amd64", variant="cuda", arch="linux/amd64", python="3.12",
        platform="x86_64-manylinux_2_39", manifest_digest="sha256:" + "1" * 64,
        base=BaseState(image="base@sha256:" + "2" * 64, captured=captured,
                       capture_digest="sha256:" + "3" * 64 if captured else ""),
        resolver="uv 0", dists=(
            LockedDist(name="torch", version="2.9.0", origin="base" if captured else "layer"),
            LockedDist(name="ray", version="2.55.1", pins=("ray",)),
            LockedDist(name="megatron-core", version="0.1", via=("x",)),
        ),
        git=(LockedGit(pin="megatron-lm", repo="r", ref="main", commit="", dist="megatron_core"),),
    )  # fmt: skip


def test_the_constraints_name_every_locked_version_but_what_a_git_pin_installs() -> None:
    for captured in (False, True):
        lines = constraints_text(_lock(captured), "pins/lock/cuda-amd64.toml").splitlines()
        assert "torch==2.9.0" in lines  # with a capture: the base's, at the captured version
        assert "ray==2.55.1" in lines
        assert not [x for x in lines if x.startswith("megatron-core")]  # a url: no version
        assert (CAPTURED in lines) == captured
        assert (NOT_CAPTURED in lines) != captured
        assert all("--hash" not in x for x in lines)
    by_url = constraints_text(_lock(False), "x", frozenset({"ray"})).splitlines()
    assert not [x for x in by_url if x.startswith("ray")]  # a url pin's name: never a version
    nothing = constraints_text(None, "pins/lock/cuda-amd64.toml").splitlines()
    assert not [x for x in nothing if "==" in x]
    assert "no lock" in nothing[0]


def test_the_repositorys_locks_make_the_production_constraints() -> None:
    for path in sorted((REPO / "pins/lock").glob("*.toml")):
        held = lockfile.read(path)
        lines = constraints_text(held, f"pins/lock/{path.name}").splitlines()
        pinned = {x.split("==")[0] for x in lines if "==" in x}
        assert pinned == {d.name for d in held.dists}, path.name


def _segments(recipe: str) -> Iterator[tuple[int, str]]:
    joined = re.sub(r"\\\n", " ", recipe)
    for number, line in enumerate(joined.split("\n"), 1):
        if line.lstrip().startswith("#"):
            continue
        for segment in re.split(r"&&|;|\|\||\bthen\b|\belse\b", line):
            yield number, segment


@pytest.mark.parametrize("family", ["cuda", "rocm"])
def test_every_pip_install_of_a_production_recipe_takes_the_constraints(family: str) -> None:
    text = (REPO / f"images/{family}/Dockerfile").read_text(encoding="utf-8")
    installs = [(n, s) for n, s in _segments(text) if re.search(r"\bpip3? install\b", s)]
    assert len(installs) > 10
    for number, segment in installs:
        assert f"-c {TARGET}" in segment, f"images/{family}/Dockerfile line {number}: {segment}"
    made = text.index(f"/tmp/tb/base_constraints.py /tmp/tb/constraints.txt {TARGET}")
    assert made < text.index("pip install --no-cache-dir")
    assert "source=.twinbuild/pip/constraints.txt" in text


def test_a_production_render_refuses_a_lock_edited_by_hand(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    lock(project, index)
    path = lockfile.lock_path(project, "cuda-amd64")
    before = path.read_text(encoding="utf-8")
    path.write_text(before.replace('version = "1.0"', 'version = "0.9"', 1), encoding="utf-8")
    capsys.readouterr()
    argv = ["render", "cuda", "--profile", "production", "--root", str(project)]
    assert main(argv) == 20
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "pins/lock/cuda-amd64.toml" in err[0]
    assert "edited by hand" in err[0]
