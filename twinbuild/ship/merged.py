"""What a release binds to: the default branch's checkout it runs from, never the evidence alone.

Sound evidence proves what the GPUs saw, not that anyone merged the PR: a validation push runs
the head's own push workflows, and one of them can dispatch ``release.yml`` with the evidence its
own validation produced. So a release ships only what its checkout (the default branch's HEAD)
holds: the statement's inputs hash and manifest digest must be what this code computes from
HEAD's git objects (:func:`~twinbuild.evidence.head.commit_inputs`, never read from the evidence),
and the validated commit must be HEAD or one of its ancestors. Refusals are exit 9, one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.errors import ConfigError, TrustRootRefused
from twinbuild.evidence.head import CommitInputs, commit_inputs
from twinbuild.evidence.statement import Statement
from twinbuild.util.git import run_git

_SHIPS = "a release ships only what the default branch holds"
_RELEASE = "then release from a checkout of the default branch"


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkout:
    """The release checkout: where it is, its HEAD, and the inputs this code computes there."""

    repo: Path
    head: str
    inputs: CommitInputs


def checkout_at(repo: Path) -> Checkout:
    """The checkout at ``repo`` as a release binds to it: HEAD's commit and its inputs."""
    found = run_git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    head = found.stdout.strip()
    if found.returncode != 0 or not head:
        raise ConfigError(
            f"--repo {repo}: no commit checked out there; run `twinbuild release` in a checkout "
            "of the default branch (or pass it with --repo)"
        )
    return Checkout(repo=repo, head=head, inputs=commit_inputs(head, repo=repo))


def check_merged(statement: Statement, checkout: Checkout, *, source: str) -> None:
    """Refuse (exit 9) evidence that is not about what ``checkout``'s HEAD holds."""
    p, head = statement.predicate, checkout.head
    commit = p.source.commit
    at = f"this checkout's HEAD {head[:12]} has"
    wanted = checkout.inputs.inputs.get(p.image)
    if wanted is None:
        raise TrustRootRefused(
            f"{source}: predicate.image: the evidence tested {p.image.name}, an image {at} not "
            f"in its manifest; {_SHIPS}: merge the PR, {_RELEASE}"
        )
    if p.build.inputs_hash != wanted:
        raise TrustRootRefused(
            f"{source}: build.inputs_hash: the evidence tested {p.image.name} inputs "
            f"{p.build.inputs_hash} (commit {commit[:12]}), {at} {wanted}; {_SHIPS}: merge the "
            f"PR, {_RELEASE}"
        )
    if p.build.manifest_digest != checkout.inputs.manifest_digest:
        raise TrustRootRefused(
            f"{source}: build.manifest_digest: the evidence tested pins/manifest.toml "
            f"{p.build.manifest_digest} (commit {commit[:12]}), {at} "
            f"{checkout.inputs.manifest_digest}; {_SHIPS}: merge the PR, {_RELEASE}"
        )
    ancestor = run_git(checkout.repo, "merge-base", "--is-ancestor", commit, head)
    if ancestor.returncode == 1:
        raise TrustRootRefused(
            f"{source}: source.commit: the evidence validated {commit}, which is not in the "
            f"history of this checkout's HEAD {head[:12]}; {_SHIPS}: merge the PR with a merge "
            f"commit (a squash or rebase writes commits no validation tested), {_RELEASE}"
        )
    if ancestor.returncode != 0:
        raise TrustRootRefused(
            f"{source}: source.commit: the evidence validated {commit}, which is not in this "
            f"checkout; {_SHIPS}: fetch the default branch with its whole history (fetch-depth: "
            f"0) and release once the PR is merged"
        )
