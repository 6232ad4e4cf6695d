"""One inputs hash over a working tree (the build) and a commit (the gate): same bytes, same hash;
what it covers (every file but the not-inputs, the exec bit, attributes, copied files) and what
it refuses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import image, mini_project
from tests.unit.gate_repos import copy_builder_code
from tests.unit.gitrepos import commit_all, git, isolate_git, needs_git
from twinbuild.builder.inputs import builder_settings, image_inputs, input_files, inputs_hash
from twinbuild.errors import ConfigError
from twinbuild.inputs_rule import NOT_INPUTS, RULE, is_input
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import recipe_path, render
from twinbuild.util.repo_tree import CommitTree, Tree, WorkTree

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
    rendered = render(manifest, image("cuda"), "production")
    return inputs_hash(
        tree, rendered, base_id=manifest.variants["cuda"].base.digest,
        builder=builder_settings(rendered),
    )  # fmt: skip


def test_the_working_tree_and_its_commit_hash_alike(root: Path) -> None:
    (root / "twinbuild/builder/__pycache__").mkdir(exist_ok=True)
    (root / "twinbuild/builder/__pycache__/image.cpython-311.pyc").write_bytes(b"\0compiled")
    assert _hash(root, root) == _hash(CommitTree(root, "HEAD"), root)
    paths = [
        e.path
        for e in input_files(
            CommitTree(root, "HEAD"), recipe_path("cuda", "production"), "production"
        )
    ]
    assert paths == ["images/common/a.sh", "images/cuda/Dockerfile"]  # the glob, not b.txt
    rendered = render(load(root / "pins/manifest.toml"), image("cuda"), "production")
    hashed = [e.path for e in image_inputs(root, rendered)]
    assert hashed == [e.path for e in image_inputs(CommitTree(root, "HEAD"), rendered)]
    assert {"pyproject.toml", "twinbuild/manifest/rendered.py", "images/common/b.txt"} <= set(
        hashed
    )
    assert not any("__pycache__" in p or p.startswith("images/rocm/") for p in hashed)


def test_an_untracked_file_counts_and_an_ignored_one_does_not(root: Path) -> None:
    """The working tree counts what `git add -A` would commit: a new setup.py before it is
    added, but not what .gitignore leaves out (a virtual environment, caches)."""
    before = _hash(root, root)
    (root / ".gitignore").write_text(".venv/\n")
    commit_all(root, "ignore the venv")
    ignored = _hash(root, root)
    (root / ".venv/lib").mkdir(parents=True)
    (root / ".venv/lib/site.py").write_text("import os\n")
    assert _hash(root, root) == ignored != before
    (root / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    assert _hash(root, root) != ignored


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
        ("images/common/b.txt", True),  # not copied, but a build may read it: deny by default
        ("images/rocm/notes.txt", False),  # the other platform's own folder
        ("README.md", False),
        ("tests/test_x.py", False),
        ("docs/x.md", False),
        ("twinbuild/smoke/runner.py", True),  # installed, so it may decide image bytes
        ("twinbuild/builder/plan.py", True),
    ],
)
def test_only_the_listed_paths_do_not_move_it(root: Path, path: str, moves: bool) -> None:
    before = _hash(CommitTree(root, "HEAD"), root)
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text("changed\n")
    commit_all(root, "change")
    assert (_hash(CommitTree(root, "HEAD"), root) != before) is moves
    assert is_input(path, "cuda", ("cuda", "rocm")) is moves


def test_the_build_refuses_a_symlinked_input_too(root: Path) -> None:
    (root / "images/common/c.sh").symlink_to("/etc/hostname")
    with pytest.raises(ConfigError) as info:
        input_files(WorkTree(root), recipe_path("cuda", "production"), "production")
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
        input_files(root, recipe_path("cuda", "production"), "production")


def test_the_not_inputs_are_the_documented_list() -> None:
    assert list(NOT_INPUTS) == [
        "docs/", "tests/", "tools/", "evidence/", "README.md", ".github/CODEOWNERS", "CODEOWNERS",
    ]  # fmt: skip
    assert RULE == "every file but docs/, tests/, tools/, evidence/, README.md and CODEOWNERS"
