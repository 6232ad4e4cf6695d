"""A link at a trust root lets what it points at decide, and that is no trust root.

``evidence/`` and ``docs/`` are not image inputs, so the inputs hash's refusal of links never sees
them; a checkout follows a committed symlink, and the gate, ``release`` and the sign job read
the trusted keys from a checkout of the default branch. So a key committed as
``evidence/keys/ops.pub -> ../../docs/keys/ops.pub``, approved once as "a new key", made every
later docs-only PR (no approval, no evidence) a key rotation; and ``evidence/keys`` itself as a
link was no trust root at all. Each attack is a PR on a real repository (tests/unit/gate_repos.py)
with real keys, judged the way gate.yml runs the gate.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.unit.gate_repos import GateRepo, approved, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.errors import ConfigError
from twinbuild.evidence import keygen, load_trusted
from twinbuild.evidence.trust_roots import is_trust_root

pytestmark = needs_git


def _key(repo: GateRepo, name: str) -> Path:
    """A fresh key pair outside the repository; its public half."""
    pair = keygen(repo.root.parent / name / "k.key", repo.root.parent / name / f"{name}.pub")
    return pair.public_path


def _gate_yml(
    repo: GateRepo, capsys: pytest.CaptureFixture[str], head: str, base: str, *extra: str
) -> tuple[int, list[str], list[str]]:
    """The gate with the base checked out, as gate.yml has it: the trusted keys are the base's."""
    git(repo.root, "checkout", "-q", "--detach", base)
    return run_gate(capsys, head, "--base", base, *extra)


def _linked_key(repo: GateRepo) -> str:
    """PR 1: a "new key" committed as a link into docs/, the key itself in docs/keys/."""
    (repo.root / "docs/keys").mkdir(parents=True)
    shutil.copy(_key(repo, "ops"), repo.root / "docs/keys/ops.pub")
    (repo.root / "evidence/keys/ops.pub").symlink_to("../../docs/keys/ops.pub")
    return commit_all(repo.root, "evidence: trust the ops key")


def test_a_key_that_links_out_of_the_keys_folder_is_refused_even_when_approved(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = _linked_key(attack_repo)
    code, out, err = _gate_yml(
        attack_repo, capsys, head, attack_repo.base, approved(attack_repo, head)
    )
    assert (code, out) == (9, [])
    assert err == [
        "twinbuild: evidence/keys/ops.pub: trust root: a symlink (mode 120000); a link lets what "
        "it points at decide, and that is no trust root, so no approval can pass it: commit the "
        "file itself"
    ]


def test_a_docs_edit_could_rotate_a_linked_key_so_keys_are_never_read_through_a_link(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """Had the link reached the default branch (an admin's bypass, an older gate), a docs-only
    PR would swap the key and every checkout of main trust mallory; now nothing reads a key
    through a link: the gate stops (exit 2) until the link is replaced by the key."""
    merged = _linked_key(attack_repo)
    git(attack_repo.root, "checkout", "-q", "-b", "rotate")
    shutil.copy(_key(attack_repo, "mallory"), attack_repo.root / "docs/keys/ops.pub")
    head = commit_all(attack_repo.root, "docs: tidy the key listing")
    code, out, err = _gate_yml(attack_repo, capsys, head, merged)
    line = (
        "evidence/keys/ops.pub: a symlink; a trusted key is a file committed in evidence/keys/ "
        "(a link lets what it points at, which is no trust root, decide): replace the link with "
        "the key"
    )
    assert (code, out, err) == (2, [], [f"twinbuild: {line}"])  # gate.yml's --keys default
    git(attack_repo.root, "checkout", "-q", head)  # main once the docs PR merged
    with pytest.raises(ConfigError) as refused:
        load_trusted(attack_repo.root / "evidence/keys")
    assert str(refused.value) == f"{attack_repo.root}/{line}"


def test_the_keys_folder_itself_as_a_link_is_a_trust_root(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    # The repository before its first key: no evidence/keys/ on the base.
    git(attack_repo.root, "rm", "-rq", "evidence/keys")
    base = commit_all(attack_repo.root, "no keys yet")
    (attack_repo.root / "docs/keys").mkdir(parents=True)
    shutil.copy(_key(attack_repo, "mallory"), attack_repo.root / "docs/keys/m.pub")
    (attack_repo.root / "evidence").mkdir(exist_ok=True)
    (attack_repo.root / "evidence/keys").symlink_to("../docs/keys")
    head = commit_all(attack_repo.root, "docs: where keys are described")
    code, _, err = _gate_yml(attack_repo, capsys, head, base, approved(attack_repo, head))
    assert code == 9
    assert is_trust_root("evidence/keys")
    assert err == [
        "twinbuild: evidence/keys: trust root: a symlink (mode 120000); a link lets what it "
        "points at decide, and that is no trust root, so no approval can pass it: commit the "
        "file itself"
    ]
    git(attack_repo.root, "checkout", "-q", head)
    with pytest.raises(ConfigError, match=r"evidence/keys: a symlink; a trusted key is a file"):
        load_trusted(attack_repo.root / "evidence/keys")


def test_a_submodule_at_a_trust_root_is_refused_even_when_approved(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = attack_repo.root / "evidence/keys/shared"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    shutil.copy(_key(attack_repo, "mallory"), sub / "m.pub")
    commit_all(sub, "the keys of the org")
    head = commit_all(attack_repo.root, "evidence: the org's shared keys")
    shutil.rmtree(sub)  # the checkout of the base has no such folder
    code, _, err = _gate_yml(
        attack_repo, capsys, head, attack_repo.base, approved(attack_repo, head)
    )
    assert code == 9
    assert err == [
        "twinbuild: evidence/keys/shared: trust root: a gitlink, i.e. a submodule (mode 160000); a link "
        "lets what it points at decide, and that is no trust root, so no approval can pass it: "
        "commit the file itself"
    ]
