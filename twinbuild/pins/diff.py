"""``twinbuild pins diff``: what moved in the manifest between two revisions, and what must rebuild.

Both sides are read with ``git show REV:pins/manifest.toml`` and loaded by the manifest model, so a
pin is compared by its effective values per image (a variant on one architecture, overrides
applied), not by its TOML text. Images that move the same way are named together, by variant.
Each image's lock (``pins/lock/IMAGE.toml``) is compared too (``lock_diff.py``): the packages
that moved in it, old -> new, and the image rebuilds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load, load_bytes
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    NOTE_VALUES,
    PROFILES,
    ImageKey,
    PinManifest,
    Profile,
    ResolvedPin,
    Variant,
)
from twinbuild.pins.lock_diff import LockChange, lock_changes
from twinbuild.util import shown
from twinbuild.util.git import rev_arg, run_git

Status = Literal["added", "removed", "changed"]
#: Fields that do not reach the image (they are not in ``image_digest``).
_NOTES = ("line", "why", "floating", *NOTE_VALUES)


@dataclass(frozen=True, slots=True, kw_only=True)
class PinChange:
    name: str
    status: Status
    #: image -> (old, new) as a person reads them; None where the pin is absent
    values: dict[ImageKey, tuple[str | None, str | None]]

    def grouped(self) -> list[tuple[list[ImageKey], tuple[str | None, str | None]]]:
        """The images that moved the same way, together, in first-seen order."""
        groups: dict[tuple[str | None, str | None], list[ImageKey]] = {}
        for image, delta in self.values.items():
            groups.setdefault(delta, []).append(image)
        return [(images, delta) for delta, images in groups.items()]

    @property
    def notes_only(self) -> bool:
        """Only ``why`` or ``floating`` changed: no image changes."""
        return not self.values


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingChange:
    key: str  # e.g. variants.cu13.base
    old: str
    new: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestDiff:
    rev_a: str
    rev_b: str
    manifest: str
    pins: list[PinChange]
    settings: list[SettingChange]
    rebuild: dict[ImageKey, tuple[Profile, ...]]
    new: PinManifest | None = None  # names the images (by variant) in what is printed
    #: Each image's lock that moved between the two revisions (``pins/lock/``).
    locks: tuple[LockChange, ...] = ()

    def label(self, images: list[ImageKey]) -> str:
        if self.new is None:
            return ", ".join(i.name for i in images)
        return self.new.label(images)

    def rebuild_line(self) -> str:
        if not self.rebuild:
            return "none"
        groups: dict[tuple[Profile, ...], list[ImageKey]] = {}
        for image, profiles in self.rebuild.items():
            groups.setdefault(profiles, []).append(image)
        return "; ".join(f"{self.label(i)} ({', '.join(p)})" for p, i in groups.items())

    def text(self) -> str:
        out = [f"pins diff {self.rev_a}..{self.rev_b} ({self.manifest})"]
        if not self.pins and not self.settings:
            out.append("no pin changes")
        for change in self.settings:
            out.append(f"setting {change.key}: {change.old} -> {change.new}")
        for pin in self.pins:
            if pin.notes_only:
                out.append(f"{pin.status} {pin.name}: why/floating only (no image change)")
                continue
            out.append(f"{pin.status} {pin.name}")
            for images, (old, new) in pin.grouped():
                out.append(f"  {self.label(images)}: {old or '(absent)'} -> {new or '(absent)'}")
        for lock in self.locks:
            out.append(f"lock {lock.image} {lock.status} ({lock.path}): {len(lock.moved)} moved")
            out += [f"  {m.name}: {m.old or '(new)'} -> {m.new or '(gone)'}" for m in lock.moved]
        out.append(f"rebuild: {self.rebuild_line()}")
        return "\n".join(out) + "\n"

    def markdown(self) -> str:
        out = [f"### Pin changes `{self.rev_a}`..`{self.rev_b}`", ""]
        if not self.pins and not self.settings:
            out += ["No pin changes.", ""]
        else:
            out += ["| pin | change | variants | old | new |", "|---|---|---|---|---|"]
            for s in self.settings:
                out.append(f"| `{s.key}` | setting | | {_cell(s.old)} | {_cell(s.new)} |")
            for pin in self.pins:
                if pin.notes_only:
                    out.append(f"| `{pin.name}` | {pin.status} (why/floating only) | | | |")
                for images, (old, new) in pin.grouped():
                    row = (f"`{pin.name}`", pin.status, self.label(images), _cell(old), _cell(new))
                    out.append("| " + " | ".join(row) + " |")
            out.append("")
        if self.locks:
            out += ["| lock | change | package | old | new |", "|---|---|---|---|---|"]
            for lock in self.locks:
                if not lock.moved:
                    out.append(f"| `{lock.path}` | {lock.status} | | | |")
                for m in lock.moved:
                    row = (f"`{lock.path}`", lock.status, f"`{m.name}`", _cell(m.old or None),
                           _cell(m.new or None))  # fmt: skip
                    out.append("| " + " | ".join(row) + " |")
            out.append("")
        out.append(f"**Images to rebuild:** {self.rebuild_line()}")
        return "\n".join(out) + "\n"


def _cell(value: str | None) -> str:
    return "—" if value is None else shown.code_cell(value)


# -- comparing two manifests ---------------------------------------------------------------------


def rebuild_needed(old: PinManifest, new: PinManifest) -> dict[ImageKey, tuple[Profile, ...]]:
    """Images of ``new`` (and profiles, production first) whose slice of the manifest differs
    from ``old``'s, or that ``old`` has not."""
    before = set(old.images())
    out: dict[ImageKey, tuple[Profile, ...]] = {}
    for image in new.images():
        changed = tuple(
            profile
            for profile in PROFILES[::-1]
            if image not in before
            or old.image_digest(image, profile) != new.image_digest(image, profile)
        )
        if changed:
            out[image] = changed
    return out


def compare(
    old: PinManifest,
    new: PinManifest,
    *,
    rev_a: str = "old",
    rev_b: str = "new",
    label: str | None = None,
) -> ManifestDiff:
    images = list(dict.fromkeys([*new.images(), *old.images()]))
    before, after = set(old.images()), set(new.images())
    olds = {i: {r.name: r for r in old.resolve(i)} if i in before else {} for i in images}
    news = {i: {r.name: r for r in new.resolve(i)} if i in after else {} for i in images}
    changes: list[PinChange] = []
    for name in [*old.pins, *(n for n in new.pins if n not in old.pins)]:
        status: Status = (
            "added" if name not in old.pins else "removed" if name not in new.pins else "changed"
        )
        values: dict[ImageKey, tuple[str | None, str | None]] = {}
        notes = False
        for image in images:
            a, b = olds[image].get(name), news[image].get(name)
            if a is None and b is None:
                continue
            if a is not None and b is not None:
                if _plain(a, _NOTES) == _plain(b, _NOTES):
                    notes = notes or _plain(a, ("line",)) != _plain(b, ("line",))
                    continue
                values[image] = _delta(a, b)
            else:
                values[image] = (_show(a), _show(b))
        if values or notes:
            changes.append(PinChange(name=name, status=status, values=values))
    return ManifestDiff(
        rev_a=rev_a,
        rev_b=rev_b,
        manifest=label or str(new.path),
        pins=changes,
        settings=_settings(old, new),
        rebuild=rebuild_needed(old, new),
        new=new,
    )


def _plain(pin: ResolvedPin, skip: tuple[str, ...]) -> dict[str, object]:
    return {k: v for k, v in pin.flat().items() if k not in skip}


def _show(pin: ResolvedPin | None) -> str | None:
    return None if pin is None else pin.expected()


def _delta(a: ResolvedPin, b: ResolvedPin) -> tuple[str, str]:
    if a.expected() != b.expected():
        return a.expected(), b.expected()
    # same pinned value, other build-relevant fields moved (layer, install, path, ...)
    old, new = _plain(a, _NOTES), _plain(b, _NOTES)
    keys = [k for k in old if old[k] != new[k]]
    return (
        ", ".join(f"{k}={old[k]!r}" for k in keys),
        ", ".join(f"{k}={new[k]!r}" for k in keys),
    )


def _variant_settings(v: Variant | None) -> dict[str, str]:
    if v is None:
        return {"variant": "(absent)"}
    return {
        "base": v.base.ref + (f" (floating: {v.base.floating})" if v.base.floating else ""),
        "archs": ", ".join(v.archs),
        "recipe": v.recipe,
        "python": v.python,
        "toolkit": v.toolkit,
        "vendor": v.vendor,
        "gpu_archs": ", ".join(v.gpu_archs),
        "build_args": _args(v.build_args),
        "binaries": ", ".join(v.binaries),
        "validate": v.validate,
    }


def _args(args: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(args.items()))


def _settings(old: PinManifest, new: PinManifest) -> list[SettingChange]:
    out: list[SettingChange] = []
    for name in dict.fromkeys([*new.variants, *old.variants]):
        a, b = _variant_settings(old.variants.get(name)), _variant_settings(new.variants.get(name))
        for key in dict.fromkeys([*b, *a]):
            x, y = a.get(key, "(absent)"), b.get(key, "(absent)")
            if x != y:
                out.append(SettingChange(key=f"variants.{name}.{key}", old=x, new=y))
    if _args(old.build_args) != _args(new.build_args):
        out.append(
            SettingChange(key="build_args", old=_args(old.build_args), new=_args(new.build_args))
        )
    la, lb = old.local, new.local
    local = {
        "suite": (la.suite, lb.suite),
        "mirror": (la.mirror, lb.mirror),
        "packages": (", ".join(la.packages), ", ".join(lb.packages)),
        "variants": (", ".join(old.local_variants()), ", ".join(new.local_variants())),
    }
    out += [
        SettingChange(key=f"local.{key}", old=x, new=y) for key, (x, y) in local.items() if x != y
    ]
    return out


# -- reading revisions ---------------------------------------------------------------------------


def bytes_at(rev: str, manifest: Path, *, repo: Path) -> bytes | None:
    """The file's bytes at ``rev`` (None when the revision has no such file)."""
    if run_git(repo, "rev-parse", "--git-dir").returncode != 0:
        # say so, rather than blame a revision name that cannot exist here
        raise ConfigError(
            f"pins diff: {repo} is not in a git repository; run it in a clone of the repository "
            "or pass --root PATH to one"
        )
    if run_git(repo, "rev-parse", "--verify", "-q", f"{rev}^{{commit}}").returncode != 0:
        raise ConfigError(
            f"pins diff: unknown revision '{rev}' in {repo}; fetch it or check the name"
        )
    shown = run_git(repo, "show", f"{rev}:./{manifest.as_posix()}", binary=True)
    return shown.stdout if shown.returncode == 0 else None


def manifest_at(rev: str, manifest: Path, *, repo: Path) -> PinManifest:
    data = bytes_at(rev, manifest, repo=repo)
    if data is None:
        raise ConfigError(f"{rev}:{manifest}: no manifest at that revision; pick a later one")
    return load_bytes(data, Path(f"{rev}:{manifest}"))  # read like the file: UTF-8, bounded


WORKTREE = "working tree"


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffOptions:
    """What ``twinbuild pins diff`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()  # the git repository
    rev_a: str | None = None  # None: HEAD
    rev_b: str | None = None  # None: the working tree
    format: Literal["text", "json", "markdown"] = "text"


def diff_pins(options: DiffOptions) -> ManifestDiff:
    """:func:`diff_revs` with the options of ``twinbuild pins diff``."""
    return diff_revs(options.rev_a, options.rev_b, manifest=options.manifest, repo=options.root)


def diff_revs(
    rev_a: str | None = None,
    rev_b: str | None = None,
    *,
    manifest: Path = DEFAULT_PATH,
    repo: Path = Path(),
) -> ManifestDiff:
    """Like ``git diff``: no revision compares HEAD with the working tree, one compares that
    revision with the working tree, two compare the two revisions. An uncommitted bump can so be
    reviewed before it is committed."""
    rev_a = rev_arg(rev_a or "HEAD", option="REV_A")
    if rev_b is not None:
        rev_arg(rev_b, option="REV_B")
    old = manifest_at(rev_a, manifest, repo=repo)
    if rev_b is None:
        path = manifest if manifest.is_absolute() else repo / manifest
        new = load(path)
    else:
        new = manifest_at(rev_b, manifest, repo=repo)
    diff = compare(old, new, rev_a=rev_a, rev_b=rev_b or WORKTREE, label=str(manifest))
    if manifest.is_absolute():
        return diff  # revisions of a manifest git does not name relative to the repository
    locks = lock_changes(rev_a, rev_b, folder=(manifest.parent / "lock").as_posix(), repo=repo)
    return with_locks(diff, locks, new)


def with_locks(diff: ManifestDiff, locks: tuple[LockChange, ...], new: PinManifest) -> ManifestDiff:
    """``diff`` with the locks that moved: each image whose lock is there and moved rebuilds
    (its lock is an input of its every build)."""
    rebuild = dict(diff.rebuild)
    by_name = {i.name: i for i in new.images()}
    for lock in locks:
        image = by_name.get(lock.image)
        if image is not None and lock.status != "removed":
            rebuild[image] = PROFILES[::-1]
    ordered = {i: rebuild[i] for i in new.images() if i in rebuild}
    return replace(diff, locks=locks, rebuild=ordered)
