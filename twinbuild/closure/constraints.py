"""The production recipes' pip constraints, generated from each image's lock.

Every ``pip install`` of a production layer takes ``-c`` of this file (as the recipe filters it
against the base, ``images/common/base_constraints.py``), so a floating pin and every
dependency a layer resolves install at the lock's exact version, whatever the index publishes
after the lock was made. docs/pins.md ("Production builds install under the lock") says what it
covers and what it cannot.

One line per locked distribution, ``name==version``, and no ``--hash``: a hash in a constraints
file is honoured only from pip 26.1 on, and in every pip it switches the whole install to
hash-checking mode, which refuses the git, url, directory and editable requirements of the
layers and every dependency without a locked hash (``tests/unit/test_constraints.py`` shows
both with the real pip). Not constrained: a distribution a git or url pin installs (pip refuses
a version constraint on a requirement given by url), and, where the lock has no capture of the
base, what the base itself has installed (the recipe's filter leaves it to the base).

The file is not one of the rendered files the inputs hash feeds by content: it is a function of
the image's lock and of this code, both of which the hash covers as files of the tree, so the
gate, which renders from the manifest alone, computes the same hash.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from packaging.utils import canonicalize_name

from twinbuild.closure import lockfile
from twinbuild.closure.lock_model import ImageLock
from twinbuild.manifest.rendered import GENERATED, Rendered, requirement

#: Where the generated file lies in the build context.
CONSTRAINTS = f"{GENERATED}/pip/constraints.txt"
#: The marker line the recipe's filter reads: whether the lock knows the base's installed set.
CAPTURED = "# twinbuild-base: captured"
NOT_CAPTURED = "# twinbuild-base: not captured"


def constraints_text(
    lock: ImageLock | None, source: str, by_url: frozenset[str] = frozenset()
) -> str:
    """The constraints file of the image whose lock is ``lock`` (read from ``source``);
    ``by_url``: the normalised names the image's git and url pins install."""
    if lock is None:
        return (
            f"# {source}: no lock, so nothing is constrained: run `twinbuild lock` and commit "
            "it (docs/pins.md)\n"
            f"{NOT_CAPTURED}\n"
        )
    by_url = by_url | {canonicalize_name(g.dist) for g in lock.git if g.dist}
    head = [
        f"# Generated from {source} by twinbuild: every pip install of a layer takes it (-c).",
        "# Exact versions, no hashes: docs/pins.md, 'Production builds install under the lock'.",
    ]
    if lock.base.captured:
        head += [
            f"# The base {lock.base.image} is captured ({lock.base.capture_digest}): its",
            "# distributions are constrained to the captured versions (origin base).",
            CAPTURED,
        ]
    else:
        head += [
            f"# No capture of the base {lock.base.image}: the build leaves out every line the",
            "# base has installed, which pip keeps or, where a layer needs another version,",
            "# takes from the index unconstrained, until `twinbuild base capture` runs.",
            NOT_CAPTURED,
        ]
    lines = [f"{d.name}=={d.version}" for d in lock.dists if d.version and d.name not in by_url]
    return "\n".join(head + lines) + "\n"


def with_lock(root: Path, rendered: Rendered) -> Rendered:
    """``rendered`` with its image's constraints file, for a production build (the local
    profile's wheelhouse installs exactly the lock's files and needs none)."""
    if rendered.profile != "production":
        return rendered
    path = lockfile.lock_path(root, rendered.image.name)
    source = path.relative_to(root).as_posix()
    by_url = frozenset(
        canonicalize_name(pin.values.dist or pin.name)
        for pin in rendered.installed
        if pin.kind in ("git", "url")
    )
    lock = lockfile.read_if_there(path)
    text = constraints_text(lock, source, by_url)
    files, args = {**rendered.files, CONSTRAINTS: text}, dict(rendered.args)
    # A git pin on a branch or tag builds at the commit its lock resolved, not at the ref's tip
    # on the day of the build (checkout.sh takes COMMIT over REF; a pip line names the commit).
    commits = {g.pin: g.commit for g in (lock.git if lock else ()) if g.commit}
    for pin in rendered.installed:
        commit = commits.get(pin.name)
        if pin.kind != "git" or pin.values.commit or commit is None:
            continue
        if pin.install == "pip":
            at = replace(pin, values=replace(pin.values, commit=commit))
            name = f"{GENERATED}/pip/{pin.layer}.txt"
            files[name] = files[name].replace(requirement(pin) + "\n", requirement(at) + "\n")
        else:
            args[f"{pin.arg_prefix()}_COMMIT"] = commit
    return replace(rendered, files=files, args=args)
