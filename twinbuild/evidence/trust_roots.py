"""Trust roots: the paths that decide what counts, so a change to one never passes on automation.

The gate, the signer, the GPU smoke harness and the recorder are twinbuild itself, installed from
the default branch by the privileged workflows; the workflows, the trusted keys and CODEOWNERS say
who runs what and whose signature counts. Once merged, a change to any of them judges every later
PR. So, deny by default like the image inputs, every path is a trust root except the image
definitions the evidence is about (``images/``, ``pins/``) and the paths nothing runs
(:data:`twinbuild.inputs_rule.NOT_INPUTS`); ``evidence/keys/`` and every CODEOWNERS file are
trust roots again. A PR that changes one (added, deleted, edited, mode changed) passes only with
an approval of its exact head commit by a code owner of that path, as the base's CODEOWNERS says:
the head's own CODEOWNERS is one of the changes, never the judge.

A trust root that is a link (a symlink, a submodule) is refused whoever approves it: a checkout
follows it, so what it points at, which is no trust root, would decide (``evidence/keys/k.pub ->
../../docs/k.pub`` made every docs edit a key rotation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from twinbuild.evidence.reviews import Review, standing
from twinbuild.inputs_rule import NOT_INPUTS, check_name, under
from twinbuild.util import bounded
from twinbuild.util.codeowners import LOCATIONS, MAX_BYTES, CodeOwners, find
from twinbuild.util.git import tree_entries
from twinbuild.util.repo_tree import KIND_NAMES, CommitTree

#: Paths that are not trust roots, and why nothing privileged runs them.
NOT_TRUST_ROOTS: Mapping[str, str] = {
    "images/": "the recipes and the scripts they copy: image inputs, which the evidence is about",
    "pins/": "the pin manifest: an image input, which the evidence is about",
    **NOT_INPUTS,
}
#: Trust roots inside those folders: who may sign, and who may approve.
ALWAYS: tuple[str, ...] = ("evidence/keys/", *LOCATIONS)
#: Most refusal lines for one PR; the rest are counted.
MAX_LINES = 20


#: Modes git gives a link: what a checkout writes there is decided elsewhere.
LINKS = {"120000": "symlink", "160000": "gitlink"}


def is_trust_root(path: str) -> bool:
    # A folder of ALWAYS is one by its own name too: ``evidence/keys`` as a link is the folder.
    if any(under(path, prefix) or path == prefix.rstrip("/") for prefix in ALWAYS):
        return True
    return not any(under(path, prefix) for prefix in NOT_TRUST_ROOTS)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustVerdict:
    changed: tuple[str, ...]  # the trust roots the PR changes
    refusals: tuple[str, ...]  # one line each, at most MAX_LINES (+1 that counts the rest)
    approvers: tuple[str, ...]  # code owners whose approval of the head let paths pass

    def lines(self) -> list[str]:
        """What the gate prints when every changed trust root is approved."""
        if not self.changed:
            return []
        shown = ", ".join(self.changed[:3]) + (", ..." if len(self.changed) > 3 else "")
        by = ", ".join(f"@{a}" for a in self.approvers)
        return [
            f"trust roots: {len(self.changed)} changed ({shown}); each approved at the head by "
            f"a code owner ({by})"
        ]


def changed(repo: Path, base: str, landing: str) -> dict[str, str | None]:
    """The trust roots whose mode or bytes differ between ``base`` and ``landing`` (or that only
    one of them has), read from git objects, with their mode in ``landing`` (None: deleted)."""
    before = {e.path: (e.mode, e.oid) for e in tree_entries(repo, base)}
    after = {e.path: (e.mode, e.oid) for e in tree_entries(repo, landing)}
    for path in after:
        check_name(landing, path)
    moved = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    return {p: after[p][0] if p in after else None for p in sorted(moved) if is_trust_root(p)}


def base_codeowners(repo: Path, base: str) -> CodeOwners | None:
    """The CODEOWNERS file GitHub would use at ``base``, from git objects (None: there is none)."""
    tree = CommitTree(repo, base)

    def read(location: str) -> str | None:
        if not any(e.path == location for e in tree.entries(location)):
            return None
        data = tree.read([location], max_bytes=MAX_BYTES)[location]
        return bounded.decode(data, source=f"{base}:{location}", what="CODEOWNERS")

    return find(read, where=f"{base}:")


def judge(
    paths: Mapping[str, str | None],
    *,
    owners: CodeOwners | None,
    reviews: Sequence[Review] | None,
    head: str,
    base: str,
    why: Mapping[str, str] | None = None,
) -> TrustVerdict:
    """Each changed trust root passes with an approval of ``head`` by one of its @user owners;
    one that is a link (its mode in ``paths``) never does.

    ``why`` says, for a path that is no trust root by its name, why its change needs one (the
    manifest, when the PR stops gating a variant the base gates)."""
    stand = standing(reviews or ())
    refusals: list[str] = []
    approvers: set[str] = set()
    for path, mode in paths.items():
        link = LINKS.get(mode or "")
        if link is not None:
            refusals.append(
                f"{path}: trust root: {KIND_NAMES[link]}; a link lets what it points at decide, "
                "and that is no trust root, so no approval can pass it: commit the file itself"
            )
            continue
        reason = (why or {}).get(path)
        refused = _why_not(path, owners, reviews, stand, head, base, reason)
        if refused is None:
            approvers.update(_approving(owners, path, stand, head))
        else:
            what = "gate policy" if reason else "trust root"
            refusals.append(f"{path}: {what}: {refused}")
    if len(refusals) > MAX_LINES:
        rest = len(refusals) - MAX_LINES
        refusals = [*refusals[:MAX_LINES], f"... and {rest} more trust roots refused the same way"]
    return TrustVerdict(
        changed=tuple(paths), refusals=tuple(refusals), approvers=tuple(sorted(approvers))
    )


def _approving(
    owners: CodeOwners | None, path: str, stand: Mapping[str, Review], head: str
) -> list[str]:
    users = owners.users(path) if owners is not None else ()
    return [u for u in users if _approved(stand.get(u.casefold()), head)]


def _approved(review: Review | None, head: str) -> bool:
    return review is not None and review.state == "APPROVED" and review.commit == head


def _why_not(
    path: str,
    owners: CodeOwners | None,
    reviews: Sequence[Review] | None,
    stand: Mapping[str, Review],
    head: str,
    base: str,
    reason: str | None = None,
) -> str | None:
    """Why ``path`` does not pass, or None when a code owner approved the head."""
    changed_here = reason or "changed by this PR, and automation alone never passes a trust root"
    if owners is None:
        return (
            f"{changed_here}; the base {base[:12]} has no CODEOWNERS ({', '.join(LOCATIONS)}), so "
            "no approval can count: add .github/CODEOWNERS naming the owners first"
        )
    users = owners.users(path)
    if not users:
        return (
            f"{changed_here}; no @user owns it in {owners.source}, so no approval can count "
            "(teams cannot be resolved with the workflow token): name an owner there first"
        )
    named = ", ".join(f"@{u}" for u in users)
    ask = f"a code owner ({named}) must approve the head {head[:12]}, then re-run the gate"
    if reviews is None:
        return f"{changed_here}; no reviews were given (--reviews); {ask}"
    blockers = [u for u in users if _state(stand, u) == "CHANGES_REQUESTED"]
    if blockers:
        return f"{changed_here}; {', '.join('@' + u for u in blockers)} requested changes; {ask}"
    if _approving(owners, path, stand, head):
        return None
    seen = _what_reviews_say(users, stand, head)
    return f"{changed_here}; {seen}; {ask}"


def _state(stand: Mapping[str, Review], user: str) -> str | None:
    review = stand.get(user.casefold())
    return None if review is None else review.state


def _what_reviews_say(users: Sequence[str], stand: Mapping[str, Review], head: str) -> str:
    said = []
    owned = {u.casefold() for u in users}
    for login, review in stand.items():
        name = f"@{review.login}"
        if login in owned and review.state == "APPROVED":
            what = (review.commit or "a deleted commit")[:12]
            said.append(f"{name} approved {what}, not the head")
        elif login in owned and review.state == "DISMISSED":
            said.append(f"{name}'s review was dismissed")
        elif login not in owned and review.state == "APPROVED" and review.commit == head:
            said.append(f"{name} approved the head but does not own it")
    return ", ".join(said) if said else "no code owner approved it"
