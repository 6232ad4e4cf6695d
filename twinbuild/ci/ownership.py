"""TB-W008: every trust root has a code owner the gate can count.

The gate passes a change to a trust root only with an approval of the PR head by one of its
@user owners in the base's CODEOWNERS (:mod:`twinbuild.evidence.trust_roots`). A trust root that
nobody owns, or only a team or an e-mail address does (the workflow token cannot list a team's
members), can then never change: find it here, on the default branch, before a PR needs it.
Checked: every file of the tree that is a trust root, and paths a PR could add (a workflow, a key,
a module, ``setup.py``, a ``.pth`` file, another CODEOWNERS, a ``.gitattributes`` in any
folder).
"""

from __future__ import annotations

from pathlib import Path

from twinbuild.lint.findings import Finding
from twinbuild.util import bounded
from twinbuild.util.codeowners import LOCATIONS, MAX_BYTES, CodeOwners, find, placeholder_lines
from twinbuild.util.repo_tree import WorkTree

#: Paths a PR could add that would be trust roots, whether or not any exists yet.
PROBES = (
    ".github/workflows/new.yml",
    ".github/actions/new/action.yml",
    "evidence/keys/new.pub",
    "twinbuild/new.py",
    "setup.py",
    "new.pth",
    "CODEOWNERS",
    "docs/CODEOWNERS",
    "evidence/.gitattributes",
    "docs/.gitmodules",
    "tests/.lfsconfig",
)
#: Most findings shown; the rest are counted in one more.
MAX_FINDINGS = 20


def placeholder(root: Path, *, in_ci: bool) -> tuple[list[Finding], list[str]]:
    """TB-W011: CODEOWNERS names the login twinbuild ships as a placeholder, which anyone may
    register (the gate refuses such a CODEOWNERS, exit 9). In GitHub Actions, where a deployment's
    CI runs, each line is a finding; elsewhere (a clone of twinbuild itself, which ships the
    placeholder) a note that says what CI will say: (findings, notes)."""
    owners = _codeowners(root)
    lines = placeholder_lines(owners) if owners is not None else []
    if not in_ci:
        return [], [f"note: {line} (a finding in GitHub Actions, TB-W011)" for line in lines]
    findings = []
    for line in lines:
        where, _, message = line.partition(": ")
        path, _, number = where.rpartition(":")
        findings.append(Finding(path=path, line=int(number), code="TB-W011", message=message))
    return findings, []


def check(root: Path) -> list[Finding]:
    """The TB-W008 findings for the repository at ``root``."""
    # the gate's own rule; its package (keys, signing: cryptography) loads only when this runs
    from twinbuild.evidence.trust_roots import is_trust_root

    owners = _codeowners(root)
    if owners is None:
        return [
            Finding(
                path=LOCATIONS[0],
                line=1,
                code="TB-W008",
                message=f"no CODEOWNERS ({', '.join(LOCATIONS)}); the gate refuses every change "
                "to a trust root that no @user owns: add .github/CODEOWNERS naming maintainers",
            )
        ]
    paths = {e.path for e in WorkTree(root).listing()} | set(PROBES)
    findings = [_uncovered(owners, path) for path in sorted(paths) if is_trust_root(path)]
    found = [f for f in findings if f is not None]
    if len(found) > MAX_FINDINGS:
        rest = len(found) - MAX_FINDINGS
        found = [
            *found[:MAX_FINDINGS],
            Finding(
                path=found[0].path, line=found[0].line, code="TB-W008",
                message=f"... and {rest} more trust roots without a @user owner",
            ),
        ]  # fmt: skip
    return found


def _codeowners(root: Path) -> CodeOwners | None:
    def read(location: str) -> str | None:
        path = root / location
        if not path.exists() and not path.is_symlink():
            return None
        return bounded.read_text(path, limit=MAX_BYTES, what="CODEOWNERS")

    return find(read, where="")


def _uncovered(owners: CodeOwners, path: str) -> Finding | None:
    rule = owners.rule_for(path)
    if rule is not None and rule.users():
        return None
    if rule is None:
        line, why = 1, "no line matches it"
    else:
        shown = " ".join(rule.owners) if rule.owners else "no owners"
        line, why = rule.line, f"line {rule.line} ({rule.pattern}) gives it {shown}"
    return Finding(
        path=owners.source,
        line=line,
        code="TB-W008",
        message=f"trust root {path} has no @user code owner ({why}); the gate counts approvals "
        "by @user owners only, so a change to it could never pass: name a maintainer's login",
    )
