"""One inputs hash over a working tree (the build) and a commit (the gate): same bytes, same hash;
what it covers (copied files, the exec bit, attributes, builder code) and what it refuses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import mini_project
from tests.unit.gate_repos import copy_builder_code
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.builder.inputs import (
    BUILDER_CODE,
    builder_code,
    builder_settings,
    input_files,
    inputs_hash,
    is_builder_code,
)
from twinbuild.builder.tree import CommitTree, Tree, WorkTree
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load
from twinbuild.manifest.render import render

pytestmark = needs_git


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path / "home")
    root = mini_project(tmp_path)
    copy_builder_code(root)
    recipe = root / "images/cuda/Dockerfile"
    recipe.write_text(recipe.read_text() + "COPY images/common/*.sh /opt/\n")
    (root / "images/common").mkdir()
    (root / "images/common/a.sh").write_text("echo a\n")
    (root / "images/common/b.txt").write_text("not copied\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "start")
    return root


def _hash(tree: Tree | Path, root: Path) -> str:
    manifest = load(root / "pins/manifest.toml")
    rendered = render(manifest, "cuda", "production")
    return inputs_hash(
        tree, rendered, base_id=manifest.platforms["cuda"].base.digest,
        builder=builder_settings(rendered),
    )  # fmt: skip


def test_the_working_tree_and_its_commit_hash_alike(root: Path) -> None:
    (root / "twinbuild/builder/__pycache__").mkdir(exist_ok=True)
    (root / "twinbuild/builder/__pycache__/image.cpython-311.pyc").write_bytes(b"\0compiled")
    assert _hash(root, root) == _hash(CommitTree(root, "HEAD"), root)
    paths = [e.path for e in input_files(CommitTree(root, "HEAD"), "cuda", "production")]
    assert paths == ["images/common/a.sh", "images/cuda/Dockerfile"]  # the glob, not b.txt
    code = [e.path for e in builder_code(root)]
    assert "pyproject.toml" in code
    assert "twinbuild/manifest/render.py" in code
    assert not any("__pycache__" in p for p in code)


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "images/common/a.sh").chmod(0o755),
        lambda r: (r / "images/.gitattributes").write_text("*.sh text eol=crlf\n"),
        lambda r: (r / "twinbuild/engine/client.py").write_text("# other engine calls\n"),
        lambda r: (r / "pyproject.toml").write_text("[project]\nname = 'x'\n"),
    ],
    ids=["exec-bit", "attributes", "engine-code", "pyproject"],
)
def test_each_input_moves_the_hash_in_both_views(
    root: Path, change: Callable[[Path], object]
) -> None:
    before = _hash(root, root)
    change(root)
    commit_all(root, "change")
    assert _hash(root, root) != before
    assert _hash(root, root) == _hash(CommitTree(root, "HEAD"), root)


@pytest.mark.parametrize(
    ("path", "moves"),
    [
        ("images/common/b.txt", False),  # not copied by the cuda recipe
        ("README.md", False),
        ("tests/test_x.py", False),
        ("twinbuild/smoke/runner.py", False),  # twinbuild, but not builder code
        ("twinbuild/builder/plan.py", True),
    ],
)
def test_what_does_not_decide_image_bytes_does_not_move_it(
    root: Path, path: str, moves: bool
) -> None:
    before = _hash(CommitTree(root, "HEAD"), root)
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text("changed\n")
    commit_all(root, "change")
    assert (_hash(CommitTree(root, "HEAD"), root) != before) is moves
    assert is_builder_code(path) is (moves and path.startswith("twinbuild/"))


def test_the_build_refuses_a_symlinked_input_too(root: Path) -> None:
    (root / "images/common/c.sh").symlink_to("/etc/hostname")
    with pytest.raises(ConfigError) as info:
        input_files(WorkTree(root), "cuda", "production")
    assert str(info.value) == (
        f"{root}:images/common/c.sh: a symlink (mode 120000) among the image inputs (copied by "
        "images/cuda/Dockerfile:10); commit the file itself, the gate hashes only what the commit "
        "holds"
    )


def test_a_copy_from_outside_the_repository_is_refused(root: Path) -> None:
    recipe = root / "images/cuda/Dockerfile"
    recipe.write_text(recipe.read_text() + "COPY ../secrets /opt/\n")
    with pytest.raises(
        ConfigError, match=r"images/cuda/Dockerfile:11: copies \.\./secrets, outside"
    ):
        input_files(root, "cuda", "production")


def test_builder_code_is_the_documented_rule() -> None:
    assert BUILDER_CODE == (
        "twinbuild/manifest/",
        "twinbuild/builder/",
        "twinbuild/engine/",
        "twinbuild/util/exact_pin.py",
        "pyproject.toml",
    )
    assert is_builder_code("twinbuild/builder/inputs.py")
    assert not is_builder_code("twinbuild/builder/__pycache__/inputs.cpython-311.pyc")
    assert not is_builder_code("twinbuild/evidence/gate.py")
    assert not is_builder_code("twinbuild/buildx.py")
