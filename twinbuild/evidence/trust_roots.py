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

Paths are read as written and as a case-insensitive checkout writes them
(:func:`~twinbuild.evidence.path_folding.fold`): a path is a trust root when either reading makes
it one (``evidence/KEYS/k.pub`` lands in ``evidence/keys/`` on macOS), and exempt only when it is
exempt as written (``Docs/x.py`` is another folder on Linux). Every ``.gitattributes``,
``.gitmodules`` and ``.lfsconfig``, in any folder, is a trust root: they decide how a checkout
writes every file below them, keys and workflows included (``keys/*.pub
working-tree-encoding=UTF-16`` in ``evidence/``). A landing tree in which two paths fold to one
is refused whoever approves it (:func:`collided`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from twinbuild.errors import ConfigError, TrustRootRefused
from twinbuild.evidence.path_folding import collisions, fold
from twinbuild.evidence.permissions import OUTSIDERS, Answers
from twinbuild.evidence.reviews import Review, standing
from twinbuild.inputs_rule import NOT_INPUTS, check_name, under
from twinbuild.util import bounded
from twinbuild.util.codeowners import (
    LOCATIONS,
    MAX_BYTES,
    CodeOwners,
    find,
    placeholder_lines,
)
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
#: Files that are trust roots in any folder: they change how a checkout writes the files below
#: them (attributes: encodings, filters, line ends; submodules; LFS), so how every trust root is
#: checked out.
CHECKOUT_FILES: tuple[str, ...] = (".gitattributes", ".gitmodules", ".lfsconfig")
_FOLDED_ALWAYS = tuple(fold(prefix) for prefix in ALWAYS)  # a trailing "/" stays
#: Most refusal lines for one PR; the rest are counted.
MAX_LINES = 20


#: Modes git gives a link: what a checkout writes there is decided elsewhere.
LINKS = {"120000": "symlink", "160000": "gitlink"}


def is_trust_root(path: str) -> bool:
    """Whether a change to ``path`` needs a code owner: as written, or as a case-insensitive
    checkout writes it, it is one of the always-trust-roots or a checkout file; or it is not
    exempt as written."""
    folded = fold(path)
    for seen, always in ((path, ALWAYS), (folded, _FOLDED_ALWAYS)):
        # A folder of ALWAYS is one by its own name too: ``evidence/keys`` as a link is the folder.
        if any(under(seen, prefix) or seen == prefix.rstrip("/") for prefix in always):
            return True
    if folded.rpartition("/")[2] in CHECKOUT_FILES:
        return True
    return not any(under(path, prefix) for prefix in NOT_TRUST_ROOTS)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustVerdict:
    changed: tuple[str, ...]  # the trust roots the PR changes
    refusals: tuple[str, ...]  # one line each, at most MAX_LINES (+1 that counts the rest)
    #: Code owners whose approval of the head let paths pass, each with what GitHub said they
    #: may do (``@login: write``).
    approvers: tuple[str, ...]
    source: str = ""  # where the permission answers came from: "GitHub", or a dry run's file

    def lines(self) -> list[str]:
        """What the gate prints when every changed trust root is approved."""
        if not self.changed:
            return []
        shown = ", ".join(self.changed[:3]) + (", ..." if len(self.changed) > 3 else "")
        by = ", ".join(self.approvers)
        return [
            f"trust roots: {len(self.changed)} changed ({shown}); each approved at the head by "
            f"a code owner who can write ({by}; permissions from {self.source})"
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


def collided(repo: Path, base: str, landing: str) -> tuple[str, ...]:
    """One refusal line per pair of paths of ``landing`` that a case-insensitive checkout writes
    as one (:func:`~twinbuild.evidence.path_folding.collisions`), unless ``base`` has the same
    pair already (the PR did not make it); at most MAX_LINES, then a count."""
    found = collisions(e.path for e in tree_entries(repo, landing))
    if found:
        had = set(collisions(e.path for e in tree_entries(repo, base)))
        found = [pair for pair in found if pair not in had]
    lines = [
        f"{first}: collides with {second} under case folding and Unicode normalisation: a "
        "case-insensitive checkout (macOS, Windows) writes both as one, and which bytes it keeps "
        "depends on the order, so no approval can pass it: rename one of them"
        for first, second in found
    ]
    if len(lines) > MAX_LINES:
        lines = [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} more paths collide"]
    return tuple(lines)


def base_codeowners(repo: Path, base: str) -> CodeOwners | None:
    """The CODEOWNERS file GitHub would use at ``base``, from git objects (None: there is none);
    one with a line GitHub would skip, or naming the shipped placeholder login, is refused
    (exit 9): no approval can be judged by it."""
    tree = CommitTree(repo, base)

    def read(location: str) -> str | None:
        if not any(e.path == location for e in tree.entries(location)):
            return None
        data = tree.read([location], max_bytes=MAX_BYTES)[location]
        return bounded.decode(data, source=f"{base}:{location}", what="CODEOWNERS")

    try:
        owners = find(read, where=f"{base}:")
    except ConfigError as exc:  # a line GitHub would skip: whom it names is unknown
        raise TrustRootRefused(
            f"{exc}; the gate judges every trust root by this file, so none passes until it is "
            "fixed on the base"
        ) from None
    named = placeholder_lines(owners) if owners is not None else []
    if named:
        raise TrustRootRefused("\n".join(named))
    return owners


def judge(
    paths: Mapping[str, str | None],
    *,
    owners: CodeOwners | None,
    reviews: Sequence[Review] | None,
    head: str,
    base: str,
    answers: Answers,
    why: Mapping[str, str] | None = None,
) -> TrustVerdict:
    """Each changed trust root passes with an approval of ``head`` by one of its owners (an
    @user, or a member of an @org/team by GitHub's answer) whom GitHub says can write
    (``answers``); one that is a link (its mode in ``paths``) never does.

    ``why`` says, for a path that is no trust root by its name, why its change needs one (the
    manifest, when the PR changes which images the gate requires)."""
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
        refused, counted = _why_not(path, owners, reviews, stand, head, base, answers, reason)
        if refused is None:
            approvers.update(counted)
        else:
            what = "gate policy" if reason else "trust root"
            refusals.append(f"{path}: {what}: {refused}")
    if len(refusals) > MAX_LINES:
        rest = len(refusals) - MAX_LINES
        refusals = [*refusals[:MAX_LINES], f"... and {rest} more trust roots refused the same way"]
    return TrustVerdict(
        changed=tuple(paths), refusals=tuple(refusals), approvers=tuple(sorted(approvers)),
        source=answers.source,
    )  # fmt: skip


def _approved(review: Review | None, head: str) -> bool:
    return review is not None and review.state == "APPROVED" and review.commit == head


def _decide(
    owners: CodeOwners, path: str, stand: Mapping[str, Review], head: str, answers: Answers
) -> tuple[list[str], list[str], set[str]]:
    """Of the approvals of ``head`` by owners of ``path`` (a login, or a team member by
    GitHub's answer): those that count (``@login: level``), what is said of each that does not,
    and every login judged here."""
    users = {u.casefold() for u in owners.users(path)}
    teams = owners.teams(path)
    counted: list[str] = []
    said: list[str] = []
    judged: set[str] = set()
    for key, review in stand.items():
        login = review.login
        if login is None or not _approved(review, head):
            continue
        via = ""
        if key not in users:
            found = [answers.membership(team, login) for team in teams]
            member = next((m for m in found if m.member), None)
            if member is None:
                unknown = [m for m in found if m.problem]
                said += [
                    f"@{m.team} counts for nothing: GitHub's answer whether @{login} is a member "
                    f"{m.problem}"
                    for m in unknown
                ]
                judged.update([key] if unknown else [])
                continue
            via = f" (through @{member.team})"
        judged.add(key)
        if review.association is not None and review.association.upper() in OUTSIDERS:
            said.append(
                f"@{login} approved the head, but GitHub's review says {review.association} "
                "(no owner, member or collaborator of this repository), so it does not count"
            )
            continue
        permission = answers.permission(login)
        if permission.level is None:
            said.append(
                f"@{login} approved the head, but the answer whether @{login} can write "
                f"{permission.problem}, so it does not count"
            )
        elif not permission.writes:
            said.append(
                f"@{login} approved the head, but can {permission.level} here, not write "
                f"({answers.source}), so it does not count"
            )
        else:
            counted.append(f"@{login}{via}: {permission.level}")
    return counted, said, judged


def _why_not(
    path: str,
    owners: CodeOwners | None,
    reviews: Sequence[Review] | None,
    stand: Mapping[str, Review],
    head: str,
    base: str,
    answers: Answers,
    reason: str | None = None,
) -> tuple[str | None, list[str]]:
    """(Why ``path`` does not pass, or None, and the approvals that count)."""
    changed_here = reason or "changed by this PR, and automation alone never passes a trust root"
    if owners is None:
        return (
            f"{changed_here}; the base {base[:12]} has no CODEOWNERS ({', '.join(LOCATIONS)}), so "
            "no approval can count: add .github/CODEOWNERS naming the owners first"
        ), []
    users, teams = owners.users(path), owners.teams(path)
    if not users and not teams:
        return (
            f"{changed_here}; no @user or @org/team owns it in {owners.source}, so no approval "
            "can count: name an owner there first"
        ), []
    named = ", ".join(f"@{u}" for u in (*users, *teams))
    ask = f"a code owner ({named}) must approve the head {head[:12]}, then re-run the gate"
    if reviews is None:
        return f"{changed_here}; no reviews were given (--reviews); {ask}", []
    blockers = [u for u in users if _state(stand, u) == "CHANGES_REQUESTED"]
    if blockers:
        blocked = ", ".join("@" + u for u in blockers)
        return f"{changed_here}; {blocked} requested changes; {ask}", []
    counted, said, judged = _decide(owners, path, stand, head, answers)
    if counted:
        return None, counted
    seen = ", ".join([*said, *_what_reviews_say(users, stand, head, judged)])
    return f"{changed_here}; {seen or 'no code owner approved it'}; {ask}", []


def _state(stand: Mapping[str, Review], user: str) -> str | None:
    review = stand.get(user.casefold())
    return None if review is None else review.state


def _what_reviews_say(
    users: Sequence[str], stand: Mapping[str, Review], head: str, judged: set[str]
) -> list[str]:
    said = []
    owned = {u.casefold() for u in users}
    for login, review in stand.items():
        name = f"@{review.login}"
        if login in judged:
            continue
        if login in owned and review.state == "APPROVED":
            what = (review.commit or "a deleted commit")[:12]
            said.append(f"{name} approved {what}, not the head")
        elif login in owned and review.state == "DISMISSED":
            said.append(f"{name}'s review was dismissed")
        elif login not in owned and review.state == "APPROVED" and review.commit == head:
            said.append(f"{name} approved the head but does not own it")
    return said
