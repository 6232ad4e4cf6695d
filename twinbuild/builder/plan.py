"""``twinbuild plan``: which images a change affects, and which input says so.

An image (a variant on one architecture) is fed by its slice of the manifest (``image_digest``,
both profiles) and, deny by default, by every other file but docs/, tests/, tools/, evidence/,
README.md and the other recipe families' ``images/<other>/`` (``inputs_rule.families_fed_by``: the
rule the inputs hash uses). A change to the docs or the tests builds nothing. When the change
cannot be computed (no git, unknown or shallow base) the plan builds everything and says why: a
missed rebuild is worse than a spare one. The workflows take their matrices from here: ``matrix``
lists the local profile's images to build, each with its variant and architecture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from twinbuild.errors import ConfigError, TwinbuildError
from twinbuild.inputs_rule import LOCKS, families_fed_by, lock_owner
from twinbuild.manifest.loader import load, load_bytes
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest
from twinbuild.pins.diff import bytes_at, compare
from twinbuild.pins.lock_diff import lock_change
from twinbuild.util import github
from twinbuild.util.git import rev_arg, run_git

DEFAULT_REMOTE_BRANCH = "origin/main"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    base: str | None  # what the working tree was compared with
    base_note: str  # how the base was chosen
    images: tuple[ImageKey, ...]  # every image of the manifest, in its order
    reasons: dict[ImageKey, list[str]] = field(default_factory=dict)
    fallback: str | None = None  # set when everything is planned because the diff failed
    #: The images a local-profile CI job builds and smoke-tests when they change.
    local: tuple[ImageKey, ...] = ()

    def builds(self, image: ImageKey) -> bool:
        return self.fallback is not None or bool(self.reasons.get(image))

    @property
    def any(self) -> bool:
        return any(self.builds(i) for i in self.images)

    def reason_lines(self) -> list[str]:
        if self.fallback is not None:
            return [f"{i.name}: {self.fallback}" for i in self.images]
        return [f"{i.name}: {why}" for i in self.images for why in self.reasons.get(i, [])]

    def text(self) -> str:
        if self.fallback is not None:
            out = [f"plan: build everything ({self.fallback})"]
        else:
            out = [f"plan: changes since {self.base} ({self.base_note})"]
        for image in self.images:
            if not self.builds(image):
                out.append(f"{image.name}: skip (no image input changed)")
                continue
            out.append(f"{image.name}: build")
            out += [f"  {why}" for why in self.reasons.get(image, [])]
        return "\n".join(out) + "\n"

    def matrix(self) -> dict[str, list[dict[str, str]]]:
        """The local images to build, as a GitHub Actions matrix (``include``)."""
        return {
            "include": [
                {"variant": i.variant, "arch": i.arch, "name": i.name}
                for i in self.local
                if self.builds(i)
            ]
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "base_note": self.base_note,
            "fallback": self.fallback,
            "images": [
                {
                    "variant": i.variant,
                    "arch": i.arch,
                    "name": i.name,
                    "build": self.builds(i),
                    "reasons": list(self.reasons.get(i, [])),
                }
                for i in self.images
            ],
            "matrix": self.matrix(),
        }

    def outputs(self) -> dict[str, str]:
        """The step outputs: ``<image>`` and ``<variant>`` (true/false), ``any``, the
        ``matrix`` of local images to build (JSON) and the reasons."""
        values: dict[str, str] = {i.name: str(self.builds(i)).lower() for i in self.images}
        for variant in dict.fromkeys(i.variant for i in self.images):
            mine = [i for i in self.images if i.variant == variant]
            values[variant] = str(any(self.builds(i) for i in mine)).lower()
        values["any"] = str(self.any).lower()
        values["matrix"] = json.dumps(self.matrix(), separators=(",", ":"))
        values["reasons"] = "\n".join(self.reason_lines())
        return values


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOptions:
    """What ``twinbuild plan`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    base: str | None = None  # None: merge-base with origin/main, else HEAD~1
    github_output: bool = False  # append the plan to $GITHUB_OUTPUT
    format: Literal["text", "json"] = "text"


def plan_change(options: PlanOptions) -> Plan:
    """The plan for the working tree under ``options.root``; written as step outputs if asked."""
    result = plan(options.root, options.base, manifest=options.manifest)
    if options.github_output:
        github.write_outputs(result.outputs(), who="plan")
    return result


def plan(root: Path = Path(), base: str | None = None, *, manifest: Path = DEFAULT_PATH) -> Plan:
    """Compare ``base`` (default: merge-base with origin/main, else HEAD~1) with the worktree."""
    if base is not None:
        rev_arg(base, option="--base")
    tracked = _in_repository(root, manifest)  # before reading it: a stray file is refused first
    current = load(manifest if manifest.is_absolute() else root / manifest)
    images = tuple(current.images())
    local = tuple(current.images(current.local_variants()))
    if run_git(root, "rev-parse", "--is-inside-work-tree").returncode != 0:
        return _everything(base, f"{root} is not a git repository", images, local)
    manifest = tracked
    base, note = _choose_base(root, base)
    if run_git(root, "rev-parse", "--verify", "-q", f"{base}^{{commit}}").returncode != 0:
        shallow = run_git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        why = (
            f"cannot resolve base '{base}' in a shallow clone; fetch full history "
            "(actions/checkout fetch-depth: 0)"
            if shallow
            else f"unknown base revision '{base}'"
        )
        return _everything(base, why, images, local)
    changed = _changed_files(root, base)
    if changed is None:
        return _everything(base, f"git diff {base} failed", images, local)
    families = tuple(dict.fromkeys(v.recipe for v in current.variants.values()))
    reasons: dict[ImageKey, list[str]] = {i: [] for i in images}
    for path in changed:
        if path == manifest.as_posix():
            for image, why in _manifest_reasons(root, base, manifest, current):
                reasons[image].append(why)
            continue
        owner = lock_owner(path)
        if owner is not None:  # an image's lock feeds that image alone
            for image in images:
                if image.name == owner:
                    reasons[image].append(_lock_reason(root, base, path))
            continue
        fed = families_fed_by(path, families)
        for image in images:
            if current.variant(image.variant).recipe in fed:
                reasons[image].append(f"{path} changed")
    return Plan(
        base=base, base_note=note, images=images, local=local,
        reasons={i: r for i, r in reasons.items() if r},
    )  # fmt: skip


def _lock_reason(root: Path, base: str, path: str) -> str:
    """``pins/lock/cu13-amd64.toml changed (its lock): ray 2.54.0 -> 2.55.1``: the packages that
    moved in it; a base capture beside the locks is named as such."""
    if Path(path).parent.as_posix() != LOCKS.rstrip("/"):
        return f"{path} changed (its base capture)"
    try:
        change = lock_change(base, None, path, repo=root)
    except TwinbuildError:  # it rebuilds all the same; the lint names what is wrong with it
        return f"{path} changed (its lock, which does not read back: `twinbuild lint` says why)"
    if change is None:
        return f"{path} changed (its lock)"
    return f"{path} {change.status} (its lock): {change.summary()}"


def _everything(
    base: str | None, why: str, images: tuple[ImageKey, ...], local: tuple[ImageKey, ...]
) -> Plan:
    return Plan(base=base, base_note="", fallback=why, images=images, local=local)


def _choose_base(root: Path, base: str | None) -> tuple[str, str]:
    if base is not None:
        return base, "--base"
    if run_git(root, "rev-parse", "--verify", "-q", DEFAULT_REMOTE_BRANCH).returncode == 0:
        merge_base = run_git(root, "merge-base", "HEAD", DEFAULT_REMOTE_BRANCH)
        if merge_base.returncode == 0 and merge_base.stdout.strip():
            return merge_base.stdout.strip(), f"merge-base with {DEFAULT_REMOTE_BRANCH}"
    return "HEAD~1", f"no {DEFAULT_REMOTE_BRANCH} to compare with"


def _changed_files(root: Path, base: str) -> list[str] | None:
    tracked = run_git(root, "diff", "--name-only", "--no-renames", "--relative", base, "--")
    untracked = run_git(root, "ls-files", "--others", "--exclude-standard")
    if tracked.returncode != 0 or untracked.returncode != 0:
        return None
    return sorted({*tracked.stdout.splitlines(), *untracked.stdout.splitlines()} - {""})


def _in_repository(root: Path, manifest: Path) -> Path:
    """The manifest as git names it (relative to ``root``): an absolute path compared with git's
    relative names would never match, and a manifest change would plan nothing."""
    if not manifest.is_absolute():
        return manifest
    try:
        return manifest.resolve().relative_to(root.resolve())
    except ValueError:
        raise ConfigError(
            f"--manifest {manifest}: not inside the repository {root.resolve()}; "
            "plan compares revisions of a tracked manifest"
        ) from None


def _manifest_reasons(
    root: Path, base: str, manifest: Path, new: PinManifest
) -> list[tuple[ImageKey, str]]:
    """Which images' slices of the manifest moved, naming the pins and settings that did."""
    where = f"{manifest}"
    images = new.images()
    old_data = bytes_at(base, manifest, repo=root)
    if old_data is None:
        return [(i, f"{where} is new since {base}") for i in images]
    try:
        old = load_bytes(old_data, Path(f"{base}:{manifest}"))
    except ConfigError:
        return [(i, f"{where} does not load at {base}") for i in images]
    diff = compare(old, new)
    out: list[tuple[ImageKey, str]] = []
    for image, profiles in diff.rebuild.items():
        items = [f"pins.{c.name} {c.status}" for c in diff.pins if image in c.values]
        items += [
            s.key
            for s in diff.settings
            if s.key.startswith((f"variants.{image.variant}.", "local.", "build_args"))
        ]
        what = ", ".join(items) or "slice changed"
        out.append((image, f"{where} ({', '.join(profiles)}): {what}"))
    return out
