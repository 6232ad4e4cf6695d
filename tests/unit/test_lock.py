"""``twinbuild lock`` against a real index on 127.0.0.1 (tests/pyindex.py) with the real uv.

The done-when of #38: a newer release of a floating dependency published between two runs moves
nothing without ``--upgrade``, and ``--upgrade NAME`` moves exactly that package and names the
images that rebuild. Then bad input, each one line with its own exit code and every lock file
left as it was: a lock that is not TOML, a hash edited by hand, a package the index lacks, two
requirements that conflict, an index that refuses or stalls, a resolver killed midway. Git refs
resolve against a local repository.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import lock_argv, mini_project, with_pins
from tests.pyindex import PyIndex, stalling_server
from tests.unit.gitrepos import commit_file, git, init, isolate_git, needs_git
from twinbuild.cli.main import main
from twinbuild.closure import lockfile
from twinbuild.errors import IndexUnreachable, LockInvalid, ResolutionFailed, ResolverFailed

PINS = """
[pins.floaty]
kind = "pypi"
range = ""
variants = ["cuda"]
asymmetry = "test: only the CUDA image takes it"
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
        served.publish("floaty", "1.0")
        served.publish("dep-a", "1.0")
        served.publish("solid", "1.0", ("dep-a>=1.0",))
        yield served


def locks(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "pins/lock").glob("*.toml"))}


def versions(root: Path, image: str) -> dict[str, str]:
    return lockfile.read(lockfile.lock_path(root, image)).versions()


def test_upgrade_moves_exactly_the_new_release(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    out = capsys.readouterr().out
    assert "cuda-amd64: created" in out
    assert "rocm-amd64: created" in out
    assert versions(project, "cuda-amd64") == {"floaty": "1.0", "dep-a": "1.0", "solid": "1.0"}
    assert versions(project, "rocm-amd64") == {"dep-a": "1.0", "solid": "1.0"}
    cuda = lockfile.read(lockfile.lock_path(project, "cuda-amd64"))
    solid = cuda.dist("solid")
    assert solid is not None
    assert solid.pins == ("solid",)
    assert solid.files
    dep = cuda.dist("dep-a")
    assert dep is not None
    assert dep.via == ("solid",)
    assert not dep.pins
    before = locks(project)

    index.publish("floaty", "1.1")
    index.publish("dep-a", "1.1")
    assert main(lock_argv(project, index.url)) == 0  # nothing stale: nothing asked, nothing moves
    assert "rebuild: nothing" in capsys.readouterr().out
    assert locks(project) == before

    assert main(lock_argv(project, index.url, "--upgrade", "floaty")) == 0
    out = capsys.readouterr().out
    assert "  floaty: 1.0 -> 1.1" in out
    assert "dep-a" not in out
    assert "rebuild: cuda, local cuda\n" in out  # the production and the local lock moved
    assert versions(project, "cuda-amd64") == {"floaty": "1.1", "dep-a": "1.0", "solid": "1.0"}
    assert locks(project)["rocm-amd64.toml"] == before["rocm-amd64.toml"]

    assert (
        main(lock_argv(project, index.url, "--upgrade")) == 0
    )  # everything: dep-a too, both images
    out = capsys.readouterr().out
    assert "  dep-a: 1.0 -> 1.1" in out
    assert "rebuild: cuda, rocm" in out
    assert versions(project, "rocm-amd64") == {"dep-a": "1.1", "solid": "1.0"}


def test_a_manifest_change_relocks_only_its_images(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    index.publish("solid", "2.0", ("dep-a>=1.0",))
    before = locks(project)
    manifest = project / "pins/manifest.toml"
    manifest.write_text(manifest.read_text().replace('version = "1.0"', 'version = "2.0"'))
    capsys.readouterr()
    assert main(lock_argv(project, index.url)) == 0
    out = capsys.readouterr().out
    assert "  solid: 1.0 -> 2.0" in out
    assert "rebuild: cuda, rocm" in out
    assert versions(project, "cuda-amd64")["floaty"] == "1.0"  # kept: not asked to move
    assert locks(project) != before


def _unchanged_after(root: Path, argv: list[str], error: type[Exception], code: int,
                     capsys: pytest.CaptureFixture[str]) -> str:  # fmt: skip
    before = locks(root)
    assert main(argv) == code == error.exit_code  # type: ignore[attr-defined]
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert locks(root) == before
    return err


def test_a_lock_that_is_not_toml_is_refused(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    path = lockfile.lock_path(project, "cuda-amd64")
    path.write_text("[lock\n", encoding="utf-8")
    capsys.readouterr()
    err = _unchanged_after(project, lock_argv(project, index.url), LockInvalid, 20, capsys)
    assert str(path) in err
    assert "not valid TOML" in err
    assert "twinbuild lock" in err


def test_a_hash_edited_by_hand_is_named(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    path = lockfile.lock_path(project, "cuda-amd64")
    text = path.read_text(encoding="utf-8")
    sha = lockfile.read(path).dist("dep-a").files[0].sha256  # type: ignore[union-attr]
    path.write_text(text.replace(sha, "0" * 64), encoding="utf-8")
    capsys.readouterr()
    err = _unchanged_after(project, lock_argv(project, index.url), LockInvalid, 20, capsys)
    assert f"{path}: dist dep-a:" in err
    assert "edited by hand" in err


def test_a_package_the_index_lacks(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    with_pins(project, PINS + '\n[pins.ghost]\nkind = "pypi"\nversion = "9.9"\nwhy = "absent"\n')
    err = _unchanged_after(project, lock_argv(project, index.url), ResolutionFailed, 21, capsys)
    assert "pins/lock/" in err
    assert "ghost" in err
    assert "pins/manifest.toml" in err


def test_a_conflict_names_both_requirements(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    index.publish("strict-b", "1.0", ("dep-a<1.0",))
    with_pins(project, PINS + '\n[pins.strict-b]\nkind = "pypi"\nversion = "1.0"\nwhy = "x"\n')
    err = _unchanged_after(project, lock_argv(project, index.url), ResolutionFailed, 21, capsys)
    assert "solid" in err
    assert "strict-b" in err
    assert "dep-a" in err


def test_an_index_that_refuses(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with stalling_server() as (url, _):
        port = url.split(":")[2].split("/")[0]
    closed = f"http://127.0.0.1:{port}/simple"  # nothing listens there any more
    err = _unchanged_after(project, lock_argv(project, closed), IndexUnreachable, 22, capsys)
    assert "did not answer" in err
    assert "pins/lock/" in err


def test_an_index_that_stalls_is_bounded(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TWINBUILD_LOCK_TIMEOUT", "2")
    with stalling_server() as (url, connected):
        err = _unchanged_after(project, lock_argv(project, url), IndexUnreachable, 22, capsys)
        assert connected.is_set()
    assert "pins/lock/" in err


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` still alive while it is read (a short-lived one that ends
    meanwhile is left out, not an error)."""
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            children = (task / "children").read_text().split()
            found += [int(c) for c in children]
    except (FileNotFoundError, ProcessLookupError):
        return []
    return found + [g for c in found for g in _children(c)]


def _is_uv(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/exe").resolve(strict=True).name == "uv"
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False  # it ended between the listing and this look


def test_a_resolver_killed_midway_leaves_the_locks(
    project: Path, index: PyIndex, tmp_path: Path
) -> None:
    assert main(lock_argv(project, index.url)) == 0
    before = locks(project)
    with_pins(project, PINS.replace('version = "1.0"', 'range = ">=1.0"\nfloating = "test"'))
    with stalling_server() as (url, connected):
        env = {**os.environ, "TWINBUILD_LOCK_TIMEOUT": "600"}
        child = subprocess.Popen(
            [sys.executable, "-m", "twinbuild", *lock_argv(project, url)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            assert connected.wait(60), "uv never asked the index"
            resolvers = []
            for _ in range(100):  # uv is running: it connected
                resolvers = [p for p in _children(child.pid) if _is_uv(p)]
                if resolvers:
                    break
                time.sleep(0.05)
            assert resolvers
            for pid in resolvers:
                os.kill(pid, signal.SIGKILL)
            _, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
    assert child.returncode == ResolverFailed.exit_code == 23
    assert len(err.strip().splitlines()) == 1
    assert "killed by SIGKILL midway" in err
    assert locks(project) == before


@needs_git
def test_a_branch_resolves_where_its_repository_answers(
    project: Path, index: PyIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    isolate_git(monkeypatch, tmp_path / "home")
    upstream = init(tmp_path / "upstream")
    first = commit_file(upstream, "a.txt", "one\n", "first")
    git(upstream, "branch", "-M", "main")
    with_pins(project, PINS + (
        '\n[pins.tool]\nkind = "git"\nrepo = "' + upstream.as_uri() + '"\nref = "main"\n'
        'dist = ""\ninstall = "checkout"\npath = "/opt/tool"\nwhy = "a branch"\n'
        'floating = "a branch"\n'
        '\n[pins.gone]\nkind = "git"\nrepo = "' + (tmp_path / "missing").as_uri() + '"\n'
        'ref = "main"\ndist = ""\ninstall = "checkout"\npath = "/opt/gone"\nwhy = "unreachable"\n'
        'floating = "a branch"\n'
    ))  # fmt: skip
    assert main(lock_argv(project, index.url)) == 0
    lock = lockfile.read(lockfile.lock_path(project, "cuda-amd64"))
    tool = next(g for g in lock.git if g.pin == "tool")
    gone = next(g for g in lock.git if g.pin == "gone")
    assert tool.commit == first
    assert tool.ref == "main"
    assert not gone.resolved
    assert "twinbuild lock --upgrade gone" in gone.note
    second = commit_file(upstream, "a.txt", "two\n", "second")
    capsys.readouterr()
    assert main(lock_argv(project, index.url)) == 0  # not stale: the branch is not asked again
    assert main(lock_argv(project, index.url, "--upgrade", "tool")) == 0
    out = capsys.readouterr().out
    assert f"  tool: {first} -> {second}" in out


@needs_git
def test_plan_and_the_inputs_hash_follow_exactly_the_images_whose_lock_moved(
    project: Path, index: PyIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.gitrepos import commit_all
    from twinbuild.builder.inputs import builder_settings, inputs_hash
    from twinbuild.builder.plan import plan
    from twinbuild.manifest.loader import load
    from twinbuild.manifest.rendered import render

    def hashes() -> dict[str, str]:
        manifest = load(project / "pins/manifest.toml")
        out = {}
        for key in manifest.images():
            rendered = render(manifest, key, "production")
            out[key.name] = inputs_hash(
                project, rendered, base_id="sha256:" + "1" * 64, builder=builder_settings(rendered)
            )
        return out

    isolate_git(monkeypatch, tmp_path / "home")
    assert main(lock_argv(project, index.url)) == 0
    init(project)
    head = commit_all(project, "locked")
    before = hashes()
    # the evidence names the exact closure: each image's lock digest, from the commit's objects
    from twinbuild.evidence.head import commit_inputs

    locked = commit_inputs(head, repo=project).locks
    assert {i.name: d for i, d in locked.items()} == {
        name.removesuffix(".toml"): "sha256:" + hashlib.sha256(body).hexdigest()
        for name, body in locks(project).items()
    }
    index.publish("floaty", "1.1")
    assert main(lock_argv(project, index.url, "--upgrade", "floaty")) == 0
    result = plan(project, "HEAD")
    assert {i.name: r for i, r in result.reasons.items()} == {
        "cuda-amd64": ["pins/lock/cuda-amd64.toml changed (its lock): floaty 1.0 -> 1.1"]
    }
    after = hashes()
    assert after["cuda-amd64"] != before["cuda-amd64"]
    assert after["rocm-amd64"] == before["rocm-amd64"]


def test_pins_outdated_reads_the_lock_of_a_floating_pin(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    assert main(lock_argv(project, index.url)) == 0
    index.publish("floaty", "1.1")
    capsys.readouterr()
    argv = ["pins", "outdated", "--manifest", str(project / "pins/manifest.toml"),
            "--source", "pypi", "--index-url", index.url, "--format", "json"]  # fmt: skip
    main(argv)
    rows = {r["pin"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    floaty = rows["floaty"]
    assert floaty["current"] == "(unpinned) (locked 1.0)"
    assert (floaty["latest"], floaty["status"]) == ("1.1", "outdated")
    assert "twinbuild lock --upgrade floaty" in floaty["note"]


def test_local_locks_hold_each_pin_alone_with_hashes_until_upgrade(
    project: Path, index: PyIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local profile installs every pin --no-deps on the embedded base (CPython 3.11): its
    lock names those pins alone, each file's sha256, and moves only on --upgrade."""
    assert main(lock_argv(project, index.url)) == 0
    capsys.readouterr()
    path = lockfile.lock_path(project, "cuda-amd64", "local")
    assert path == project / "pins/lock/local/cuda-amd64.toml"
    local = lockfile.read(path)
    assert (local.profile, local.python, local.platform) == (
        "local", "3.11", "x86_64-manylinux_2_36",
    )  # fmt: skip
    assert local.versions() == {"floaty": "1.0", "solid": "1.0"}  # no dep-a: --no-deps
    floaty = local.dist("floaty")
    assert floaty is not None
    assert floaty.no_deps
    wheel = next((index.root / "files").glob("floaty-1.0-*.whl"))
    assert [(f.name, f.sha256) for f in floaty.files] == [
        (wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest())
    ]
    before = path.read_bytes()

    index.publish("floaty", "1.1")
    assert main(lock_argv(project, index.url)) == 0
    assert "local/cuda-amd64: up to date" in capsys.readouterr().out
    assert path.read_bytes() == before  # a new release changes nothing

    assert main(lock_argv(project, index.url, "--upgrade", "floaty")) == 0
    out = capsys.readouterr().out
    assert "local/cuda-amd64: updated" in out
    assert lockfile.read(path).versions() == {"floaty": "1.1", "solid": "1.0"}
    assert "local cuda" in out.splitlines()[-1]
