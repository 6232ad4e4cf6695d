"""Closure conformance: every distribution in the image exactly the lock's, and nothing else.

Pure functions over the collector's answer (:class:`Collected`) and the image's lock
(``pins/lock/<image>.toml``): no container, no engine. One :class:`ClosureResult` per
difference, each naming the package, the lock's version, the image's version and whether the
base or a layer brought it:

- a distribution the image holds at another version than the lock's (the #2600 class: a layer
  that force-installs an older ``nvidia-cutlass-dsl`` over the locked one);
- one the lock has and the image lacks; one the image has and the lock does not;
- a git pin installed at another commit than the lock's (PEP 610 ``direct_url.json``), without
  a commit (an index release in its place), or not at all; a checked-out one (``checkouts``)
  at another commit than the lock's;
- an apt package at another version than the lock's (where the lock knows one).

A local image's lock (``pins/lock/local/<image>.toml``) holds what its layers install; the
embedded base's own distributions come from that base's capture, kept in the cache by its image
id (:func:`held_to` adds them, marked as the base's).

What the lock marks as not resolvable here (a git ref, an apt version without a capture) is
not compared; a lock made without a capture of its base cannot tell the base's distributions
from extra ones, so "not in the lock" is then said of them as "the base or a layer".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from twinbuild.closure import lockfile
from twinbuild.closure.capture import BaseCapture, read_capture
from twinbuild.closure.lock_model import BaseState, ImageLock, LockedDist
from twinbuild.errors import LockInvalid
from twinbuild.smoke.conformance import Collected, Outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosureResult:
    package: str
    outcome: Outcome
    message: str
    locked: str  # the lock's version or commit ("" where the lock has none)
    found: str  # the image's ("" where it has none)
    brought_by: str  # "base", "layer", or "the base or a layer"


def with_base(lock: ImageLock, capture: BaseCapture) -> ImageLock:
    """``lock`` with the base's captured distributions it lacks, each marked as the base's."""
    have = {d.name for d in lock.dists}
    extra = [LockedDist(name=n, version=v, origin="base") for n, v in capture.dists.items()
             if n not in have]  # fmt: skip
    return dataclasses.replace(
        lock,
        dists=tuple(sorted((*lock.dists, *extra), key=lambda d: d.name)),
        base=BaseState(image=capture.image, captured=True, capture_digest=capture.digest),
    )


def held_to(lock_path: str, capture_path: str | None) -> ImageLock:
    """What the closure check holds the image to: its lock, with its base's capture (a local
    image's embedded base) where one is named."""
    lock = lockfile.read(Path(lock_path))
    if capture_path is None:
        return lock
    capture = read_capture(Path(capture_path))
    if capture is None:
        raise LockInvalid(f"{capture_path}: the base capture is gone; run `twinbuild base`")
    return with_base(lock, capture)


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def check_closure(
    lock: ImageLock,
    found: Collected,
    *,
    source: str,
    checkouts: Mapping[str, str] | None = None,
    left_out: frozenset[str] = frozenset(),
) -> list[ClosureResult]:
    """Every difference between ``found`` and ``lock`` (``source``: the lock file, for messages);
    an empty list when the image holds exactly the lock's closure. ``checkouts``: the path of
    each checked-out git pin, by pin name (the lock's git entry has no distribution).
    ``left_out``: the git pins the image's profile left out (its per-pin checks skip them and
    say so, from the image's own label), not looked for; one the image holds anyway is still
    compared."""
    out: list[ClosureResult] = []
    git_dists = {canonicalize_name(g.dist): g for g in lock.git if g.dist}
    locked = {d.name: d for d in lock.dists}

    def fail(package: str, locked_v: str, found_v: str, by: str, what: str) -> None:
        out.append(ClosureResult(
            package=package, outcome="failed", locked=locked_v, found=found_v, brought_by=by,
            message=f"{source}: {package}: {what} (lock {locked_v or '-'}, image "
            f"{found_v or '-'}, brought by {by})",
        ))  # fmt: skip

    for name, dist in sorted(locked.items()):
        held = found.dists.get(name)
        if not dist.version:
            continue
        if held is None:
            fail(name, dist.version, "", dist.origin, "locked but not in the image")
        elif not _same(held.version, dist.version):
            fail(name, dist.version, held.version, dist.origin,
                 "the image holds another version than the lock's")  # fmt: skip
    for name, git in sorted(git_dists.items()):
        held = found.dists.get(name)
        vcs = (held.direct_url or {}).get("vcs_info") if held is not None else None
        commit = vcs.get("commit_id", "") if isinstance(vcs, dict) else ""
        if not git.commit:
            continue  # a ref not resolvable here: not compared (the lint names the command)
        if held is None and git.pin in left_out:
            continue
        if held is None:
            fail(name, git.commit, "", "layer", "locked but not in the image")
        elif not commit:
            # an index release or a local copy in place of the git pin: no PEP 610 commit
            fail(name, git.commit, f"{held.version} (not from git)", "layer",
                 "installed from another source than the lock's git commit")  # fmt: skip
        elif commit != git.commit:
            fail(name, git.commit, commit, "layer", "installed from another commit than the lock's")
    for git in lock.git:
        path = (checkouts or {}).get(git.pin)
        if git.dist or not git.commit or path is None:
            continue
        seen = found.checkouts.get(path)
        if seen is None or not seen.commit:
            fail(git.pin, git.commit, "", "layer", f"no checkout at {path}")
        elif seen.commit != git.commit:
            fail(git.pin, git.commit, seen.commit, "layer",
                 f"checked out at {path} at another commit than the lock's")  # fmt: skip
    base_known = lock.base.captured
    for name, held in sorted(found.dists.items()):
        if name in locked or name in git_dists:
            continue
        # with a capture, the base's own are in the lock: what is left a layer brought
        by = "layer" if base_known else "the base or a layer"
        fail(name, "", held.version, by, "in the image but not in the lock")
    for apt in lock.apt:
        if not apt.version:
            continue
        got = found.apt.get(apt.package)
        if got != apt.version:
            fail(apt.package, apt.version, got or "", "layer",
                 "the image's apt package is at another version than the lock's")  # fmt: skip
    return out
