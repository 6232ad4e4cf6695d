"""Trust roots that case, Unicode and git attributes cannot dodge (#39, attacks 2 and 3).

A checkout on macOS or Windows folds case (and, on macOS, Unicode forms): ``evidence/KEYS/x.pub``
lands in ``evidence/keys/``. And a ``.gitattributes`` decides how every later clone writes the
files below it: ``keys/*.pub working-tree-encoding=UTF-16`` in ``evidence/`` made every fresh
clone's keys unreadable. Each attack is a PR on a real repository (tests/unit/gate_repos.py),
judged the way gate.yml runs the gate.
"""

from __future__ import annotations

import pytest

from tests.unit.gate_repos import GateRepo, approved, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from tests.unit.reviews import reviews_file
from twinbuild.evidence import keygen
from twinbuild.evidence.trust_roots import is_trust_root

pytestmark = needs_git
CHANGED = "changed by this PR, and automation alone never passes a trust root"


def _no_reviews(repo: GateRepo) -> str:
    return f"--reviews={reviews_file(repo.root.parent / 'reviews.json')}"


def _add(repo: GateRepo, path: str, text: str) -> str:
    target = repo.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return commit_all(repo.root, f"add {path}")


@pytest.mark.parametrize(
    "path",
    [
        "evidence/KEYS/contributor.pub",
        "Evidence/keys/contributor.pub",
        "evidence/Keys/contributor.pub",
        "evidence/\u212aeys/contributor.pub",  # KELVIN SIGN: casefolds to k
        "evidence/ke\u200cys/contributor.pub",  # HFS+ ignores a zero-width non-joiner
        "evidence/keys./contributor.pub",  # Windows drops a trailing dot
        ".github/codeowners",
        "Codeowners",
        "docs/codeowners",
    ],
)
def test_a_trust_root_in_another_case_or_form_is_still_one(path: str) -> None:
    assert is_trust_root(path), path


def test_a_key_in_another_case_needs_an_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 2 of #39: evidence/ is no trust root and evidence/keys/ was one in lower case only,
    so evidence/KEYS/contributor.pub passed with no evidence and no approval; on a
    case-insensitive checkout it lands among the trusted keys."""
    keys = attack_repo.root / "evidence/KEYS"
    keygen(attack_repo.root.parent / "m" / "m.key", keys / "contributor.pub")
    head = commit_all(attack_repo.root, "a key, in capitals")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, _no_reviews(attack_repo))
    assert (code, out) == (9, []), err
    assert err[0].startswith(f"twinbuild: evidence/KEYS/contributor.pub: trust root: {CHANGED}")


@pytest.mark.parametrize(
    ("first", "second", "named"),
    [
        ("evidence/keys/ci.pub", "evidence/keys/CI.pub", None),
        # the folders collide: the line names them, not each file below
        ("evidence/keys/ci.pub", "evidence/Keys/other.pub", ("evidence/Keys", "evidence/keys")),
        ("docs/caf\u00e9.md", "docs/cafe\u0301.md", None),  # NFC and NFD: one name on macOS
        ("docs/stra\u00dfe.md", "docs/strasse.md", None),  # full case folding: ß is ss
    ],
)
def test_a_tree_whose_paths_collide_under_case_folding_is_refused(
    attack_repo: GateRepo,
    capsys: pytest.CaptureFixture[str],
    first: str,
    second: str,
    named: tuple[str, str] | None,
) -> None:
    """Two paths one case-insensitive checkout writes as one: which bytes it keeps is up to the
    order of the checkout, so the tree is refused (exit 9) whoever approved it, naming both."""
    for path in (first, second):
        target = attack_repo.root / path
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"{path}\n", encoding="utf-8")
    head = commit_all(attack_repo.root, "twins")
    git(attack_repo.root, "checkout", "-q", attack_repo.base)  # the gate's cwd: the base's keys
    code, _, err = run_gate(capsys, head, "--base", attack_repo.base, approved(attack_repo, head))
    assert code == 9, err
    a, b = named or sorted((first, second))
    assert [line for line in err if "collides" in line] == [
        f"twinbuild: {a}: collides with {b} under case folding and Unicode normalisation: a "
        "case-insensitive checkout (macOS, Windows) writes both as one, and which bytes it keeps "
        "depends on the order, so no approval can pass it: rename one of them"
    ]


@pytest.mark.parametrize(
    "path",
    [
        "evidence/.gitattributes",
        "docs/.gitattributes",
        "tests/deep/.gitattributes",
        "images/cuda/.gitattributes",
        "pins/.gitattributes",
        "evidence/.GitAttributes",
        "docs/.gitmodules",
        "tests/.lfsconfig",
        ".lfsconfig",
    ],
)
def test_every_attributes_modules_and_lfs_file_is_a_trust_root(path: str) -> None:
    assert is_trust_root(path), path


def test_attributes_that_rewrite_the_keys_need_an_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 3 of #39: evidence/.gitattributes with working-tree-encoding=UTF-16 passed with no
    approval; after the merge every fresh clone writes the keys as UTF-16, and the next gate and
    `evidence verify` fail (exit 2), the PR that would fix it included."""
    head = _add(attack_repo, "evidence/.gitattributes", "keys/*.pub working-tree-encoding=UTF-16\n")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base, _no_reviews(attack_repo))
    assert (code, out) == (9, []), err
    assert err[0].startswith(f"twinbuild: evidence/.gitattributes: trust root: {CHANGED}")


def test_a_docs_only_pr_still_passes_with_nothing(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _add(attack_repo, "docs/Guide.md", "# guide\n")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert (code, err) == (0, [])
    assert out[0].startswith("no image input changed")
