"""``pyproject.toml`` may not make pip run or install a path that is neither an input nor a trust root.

``docs/``, ``tests/``, ``tools/`` and ``evidence/`` pass the gate with no evidence and no approval
because no build installs or runs them. ``pyproject.toml`` can change that: PEP 517's
``backend-path`` makes pip import the build backend from a folder of the tree, and setuptools'
``package-dir``, ``data-files``, ``packages.find``, file-backed ``dynamic`` metadata and entry
points install from (or point at) any folder. Approved once as a packaging tidy-up, such a line
made every later tests-only PR code that runs at each ``pip install`` of the default branch: in
gate.yml before the gate, in the sign job before the key is used. The gate now refuses it (exit
9), whoever approves. A real repository (tests/unit/gate_repos.py), a real pip for the first case.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import edit
from tests.unit.gate_repos import GateRepo, approved, run_gate, sign_evidence
from tests.unit.gitrepos import commit_all, git, needs_git

pytestmark = needs_git

BACKEND = 'build-backend = "setuptools.build_meta"\n'
SHIM = (
    "import os, pathlib\n"
    'pathlib.Path(os.environ["TB_MARK"]).write_text("tests/backend ran")\n'
    "from setuptools.build_meta import *  # noqa: F403\n"
)
FIND = '[tool.setuptools.packages.find]\ninclude = ["twinbuild*"]\n'
SCRIPTS = '[project.scripts]\ntwinbuild = "twinbuild.cli.entry:main"\n'
#: name -> (old text, new text, an extra file, the key the refusal names, the path it names)
EDITS = {
    "an in-tree build backend in tests/": (
        BACKEND,
        'build-backend = "shim"\nbackend-path = ["tests/backend"]\n',
        ("tests/backend/shim.py", SHIM),
        "build-system.backend-path",
        "tests/backend",
    ),
    "a package installed from docs/": (
        FIND,
        FIND + '\n[tool.setuptools.package-dir]\n"twinbuild.extra" = "docs/extra"\n',
        ("docs/extra/__init__.py", ""),
        "tool.setuptools.package-dir",
        "docs/extra",
    ),
    "a .pth installed into site-packages from docs/": (
        FIND,
        FIND + '\n[tool.setuptools.data-files]\n"lib/python3.11/site-packages" = ["docs/x.pth"]\n',
        ("docs/x.pth", "import os\n"),
        "tool.setuptools.data-files",
        "docs/x.pth",
    ),
    "dependencies read from a file in docs/": (
        "[tool.setuptools.dynamic]\n",
        '[tool.setuptools.dynamic]\ndependencies = { file = ["docs/requirements.txt"] }\n',
        ("docs/requirements.txt", "docker\n"),
        "tool.setuptools.dynamic.dependencies.file",
        "docs/requirements.txt",
    ),
    "tools/ found as a package": (
        FIND,
        FIND.replace('["twinbuild*"]', '["twinbuild*", "tools*"]'),
        None,
        "tool.setuptools.packages.find.include",
        "tools*",
    ),
    "an entry point into tests/": (
        SCRIPTS,
        SCRIPTS + 'twinbuild-check = "tests.hook:main"\n',
        ("tests/hook.py", ""),
        "project.scripts.twinbuild-check",
        "tests.hook:main",
    ),
}


def _pr(repo: GateRepo, what: str) -> str:
    old, new, extra, _, _ = EDITS[what]
    edit(repo.root / "pyproject.toml", old, new)
    if extra is not None:
        path = repo.root / extra[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(extra[1])
    head = commit_all(repo.root, f"packaging: {what}")
    # A code owner approved it and the GPUs validated it: only the packaging rule is left.
    sign_evidence(repo.root, head, repo.signer)
    git(repo.root, "checkout", "-q", "attack")
    return head


@pytest.mark.parametrize("what", EDITS)
def test_packaging_that_runs_or_installs_a_not_input_is_refused_even_approved_and_validated(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    head = _pr(attack_repo, what)
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    _, _, _, key, named = EDITS[what]
    assert (code, out) == (9, [])
    assert err == [
        f"twinbuild: {head[:12]}:pyproject.toml: {key}: names {named!r}, which is neither an "
        "image input nor a trust root (docs/, tests/, tools/, evidence/), yet pip would run or "
        "install it at every install of the default branch, the gate's and the signer's too: "
        "keep what pip runs and installs in twinbuild/ and the top level"
    ]


def test_pip_really_runs_the_in_tree_backend_from_tests(attack_repo: GateRepo) -> None:
    """What the first case would do at the next ``pip install .`` (gate.yml) of that tree."""
    head = _pr(attack_repo, "an in-tree build backend in tests/")
    tree = attack_repo.root.parent / "checkout"
    git(attack_repo.root, "worktree", "add", "-q", "--detach", str(tree), head)
    mark = attack_repo.root.parent / "mark"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
         "-q", "-w", str(attack_repo.root.parent / "wheels"), str(tree)],
        env={**os.environ, "TB_MARK": str(mark)}, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert mark.read_text() == "tests/backend ran"


def test_our_own_packaging_passes(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    (attack_repo.root / "docs").mkdir(exist_ok=True)
    (attack_repo.root / "docs/more.md").write_text("more\n")
    head = commit_all(attack_repo.root, "docs")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert (code, err) == (0, [])
    assert out[0].startswith("no image input changed")
