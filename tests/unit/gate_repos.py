"""A real repository for gate tests: a base commit, a GPU-tested commit and its signed evidence.

Everything is real: git repositories made in tmp, twinbuild's own package and ``pyproject.toml``
committed as this checkout holds them, this checkout's ``.github/CODEOWNERS``, a key pair from
``evidence.keygen`` and evidence made by ``record`` and ``sign`` for the tested commit's inputs as
``evidence inputs`` computes them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

import twinbuild
from tests.helpers import edit, mini_project
from tests.unit.evidence_builders import REPO, REPO_ID, Signer, evidence, smoke_report
from tests.unit.gitrepos import commit_all, git, isolate_git
from tests.unit.reviews import OWNER, permissions_file, reviews_file
from twinbuild.cli.main import main
from twinbuild.evidence import keygen, load_private
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.model import ImageKey
from twinbuild.util.codeowners import PLACEHOLDER

PR = 42
EVIDENCE_REF = f"refs/heads/validate/pr-{PR}"
# The cuda recipe copies a folder of scripts, like the production recipes copy images/common/.
COPY_LINE = "COPY images/common/ /opt/twinbuild/common/\n"
CHECKOUT_SH = '#!/bin/sh\nset -eu\necho "checking out $1"\ngit -C "$2" checkout "$1"\n'


@dataclass(frozen=True, slots=True, kw_only=True)
class GateRepo:
    root: Path
    base: str  # main before the PR
    tested: str  # the PR commit a maintainer pushed to validate/pr-42 and the GPUs tested
    keys: Path
    signer: Signer  # the validation workflow's key (a forger who stole it would hold this)


THIS_CHECKOUT = Path(twinbuild.__file__).resolve().parent.parent


def copy_builder_code(root: Path) -> None:
    """Put twinbuild's real package and ``pyproject.toml`` into ``root``, as this checkout has them.

    Every installed file is an image input (deny by default), so the test repository holds the
    same ones a clone of ours holds.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(THIS_CHECKOUT / "twinbuild", root / "twinbuild", ignore=ignore)
    shutil.copy2(THIS_CHECKOUT / "pyproject.toml", root / "pyproject.toml")


def copy_codeowners(root: Path) -> None:
    """This checkout's ``.github/CODEOWNERS``, its placeholder login (which the gate refuses)
    replaced by ``OWNER``, as a deployment replaces it: the owners the gate reads on the base."""
    (root / ".github").mkdir(exist_ok=True)
    text = (THIS_CHECKOUT / ".github/CODEOWNERS").read_text(encoding="utf-8")
    assert f"@{PLACEHOLDER}" in text, "our CODEOWNERS no longer ships the placeholder; update"
    owned = text.replace(f"@{PLACEHOLDER}", f"@{OWNER}")
    (root / ".github/CODEOWNERS").write_text(owned, encoding="utf-8")


def make_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: Path | None = None
) -> GateRepo:
    """The gate repository in ``tmp_path``. With ``template`` (a folder of the session's), it is
    made there once per process and copied for each test: the same commits, key and evidence,
    in 0.05 s instead of the 0.45 s that the two commits, the inputs and the signing take."""
    if template is None:
        return _make_repo(tmp_path, monkeypatch)
    made = _TEMPLATES.get(template)
    if made is None:
        with pytest.MonkeyPatch.context() as scoped:
            made = _TEMPLATES[template] = _make_repo(template, scoped)
    shutil.copytree(template, tmp_path, symlinks=True, dirs_exist_ok=True, copy_function=_copy)
    root = tmp_path / made.root.relative_to(template)
    _enter(root, tmp_path, monkeypatch)
    return GateRepo(
        root=root, base=made.base, tested=made.tested, keys=root / "evidence/keys",
        signer=made.signer,
    )  # fmt: skip


#: The repository each session folder holds (one per worker process), made on first use.
_TEMPLATES: dict[Path, GateRepo] = {}


def _copy(src: str, dst: str) -> object:
    """A git object is linked, as ``git clone --local`` links it: git writes each one once and
    never changes it (a new one goes in beside it), so no test's copy can change the template's.
    Everything else is copied."""
    if f"{os.sep}.git{os.sep}objects{os.sep}" in src:
        os.link(src, dst)
        return dst
    return shutil.copy2(src, dst)


def _enter(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test of the gate runs in: git's HOME of its own, the repository the cwd."""
    isolate_git(monkeypatch, tmp_path / "home")
    monkeypatch.chdir(root)
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_REPOSITORY_ID", str(REPO_ID))
    monkeypatch.delenv("GITHUB_EVENT_PATH", raising=False)


def _make_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GateRepo:
    isolate_git(monkeypatch, tmp_path / "home")
    root = mini_project(tmp_path)
    copy_builder_code(root)
    copy_codeowners(root)
    recipe = root / "images/cuda/Dockerfile"
    recipe.write_text(recipe.read_text() + COPY_LINE)
    (root / "images/common").mkdir()
    script = root / "images/common/checkout.sh"
    script.write_text(CHECKOUT_SH)
    script.chmod(0o755)
    (root / "README.md").write_text("# demo\n")
    pair = keygen(tmp_path / "secret" / "ci.key", root / "evidence/keys/ci.pub")
    git(root, "init", "-q", "-b", "main")
    base = commit_all(root, "base")
    edit(root / "pins/manifest.toml", 'version = "0.4.2"', 'version = "0.4.3"')
    tested = commit_all(root, "bump flash-linear-attention")
    signer = Signer(key=load_private(env={}, path=pair.private_path))
    sign_evidence(root, tested, signer)
    git(root, "checkout", "-q", "-b", f"pr-{PR}", tested)
    _enter(root, tmp_path, monkeypatch)
    return GateRepo(root=root, base=base, tested=tested, keys=root / "evidence/keys", signer=signer)


def sign_evidence(root: Path, commit: str, signer: Signer) -> None:
    """Evidence for ``commit`` on validate/pr-42, the way validate.yml commits it."""
    found = commit_inputs(commit, repo=root)
    out = root.parent / "signed"
    out.mkdir(exist_ok=True)
    git(root, "checkout", "-q", "-b", f"validate/pr-{PR}", commit)
    for platform in ("cuda", "rocm"):
        image = ImageKey(variant=platform, arch="linux/amd64")
        report = smoke_report(platform, manifest_digest=found.manifest_digest)
        report["image"]["inputs_hash"] = found.inputs[image]
        path = evidence(out, signer, platform, report=report, now=datetime.now(UTC), commit=commit)
        (root / "evidence").mkdir(exist_ok=True)
        shutil.copy(path, root / f"evidence/{image.name}.dsse.json")
    commit_all(root, f"evidence: GPU validation of {commit}")
    git(root, "checkout", "-q", "main")


def run_gate(
    capsys: pytest.CaptureFixture[str], head: str, *extra: str
) -> tuple[int, list[str], list[str]]:
    """``twinbuild evidence gate`` as gate.yml runs it: (exit code, stdout lines, stderr lines).

    GitHub's answers whether each reviewer can write are ``LEVELS`` (tests/unit/reviews.py), as
    a dry run reads them (``--permissions``); a ``--permissions`` in ``extra`` comes later and
    wins."""
    capsys.readouterr()
    answers = permissions_file(Path.cwd().parent / "github-permissions.json")
    code = main(
        [
            "evidence", "gate", "--head", head, "--evidence-ref", EVIDENCE_REF,
            "--pr", str(PR), f"--permissions={answers}", *extra,
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def approved(repo: GateRepo, head: str, *, login: str = OWNER, commit: str | None = None) -> str:
    """``--reviews FILE``: the list-reviews answer with ``login``'s approval of ``commit``."""
    path = reviews_file(repo.root.parent / "reviews.json", (login, "APPROVED", commit or head))
    return f"--reviews={path}"
