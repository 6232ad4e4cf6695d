"""``twinbuild pins diff``: what moved in the manifest between two revisions, and what must rebuild.

Both sides are read with ``git show REV:pins/manifest.toml`` and loaded by the manifest model, so a
pin is compared by its effective values per platform (overrides applied), not by its TOML text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load, load_bytes
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    NOTE_VALUES,
    PLATFORMS,
    PROFILES,
    Manifest,
    Platform,
    Profile,
    ResolvedPin,
)
from twinbuild.util.git import rev_arg, run_git

Status = Literal["added", "removed", "changed"]
#: Fields that do not reach the image (they are not in ``platform_digest``).
_NOTES = ("line", "why", "floating", *NOTE_VALUES)


@dataclass(frozen=True, slots=True, kw_only=True)
class PinChange:
    name: str
    status: Status
    #: platform -> (old, new) as a person reads them; None where the pin is absent
    values: dict[Platform, tuple[str | None, str | None]]

    @property
    def notes_only(self) -> bool:
        """Only ``why`` or ``floating`` changed: no image changes."""
        return not self.values


@dataclass(frozen=True, slots=True, kw_only=True)
class SettingChange:
    key: str  # e.g. platforms.cuda.base
    old: str
    new: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestDiff:
    rev_a: str
    rev_b: str
    manifest: str
    pins: list[PinChange]
    settings: list[SettingChange]
    rebuild: dict[Platform, tuple[Profile, ...]]

    def rebuild_line(self) -> str:
        if not self.rebuild:
            return "none"
        return ", ".join(f"{p} ({', '.join(prof)})" for p, prof in self.rebuild.items())

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
            for platform, (old, new) in pin.values.items():
                out.append(f"  {platform}: {old or '(absent)'} -> {new or '(absent)'}")
        out.append(f"rebuild: {self.rebuild_line()}")
        return "\n".join(out) + "\n"

    def markdown(self) -> str:
        out = [f"### Pin changes `{self.rev_a}`..`{self.rev_b}`", ""]
        if not self.pins and not self.settings:
            out += ["No pin changes.", ""]
        else:
            out += ["| pin | change | platform | old | new |", "|---|---|---|---|---|"]
            for s in self.settings:
                out.append(f"| `{s.key}` | setting | | {_cell(s.old)} | {_cell(s.new)} |")
            for pin in self.pins:
                if pin.notes_only:
                    out.append(f"| `{pin.name}` | {pin.status} (why/floating only) | | | |")
                for platform, (old, new) in pin.values.items():
                    row = (f"`{pin.name}`", pin.status, platform, _cell(old), _cell(new))
                    out.append("| " + " | ".join(row) + " |")
            out.append("")
        out.append(f"**Images to rebuild:** {self.rebuild_line()}")
        return "\n".join(out) + "\n"


def _cell(value: str | None) -> str:
    if value is None:
        return "—"
    return "`" + value.replace("|", "\\|").replace("`", "'") + "`"


# -- comparing two manifests ---------------------------------------------------------------------


def rebuild_needed(old: Manifest, new: Manifest) -> dict[Platform, tuple[Profile, ...]]:
    """Platforms (and profiles, production first) whose slice of the manifest differs."""
    out: dict[Platform, tuple[Profile, ...]] = {}
    for platform in PLATFORMS:
        changed = tuple(
            profile
            for profile in PROFILES[::-1]
            if old.platform_digest(platform, profile) != new.platform_digest(platform, profile)
        )
        if changed:
            out[platform] = changed
    return out


def compare(
    old: Manifest,
    new: Manifest,
    *,
    rev_a: str = "old",
    rev_b: str = "new",
    label: str | None = None,
) -> ManifestDiff:
    olds = {p: {r.name: r for r in old.resolve(p)} for p in PLATFORMS}
    news = {p: {r.name: r for r in new.resolve(p)} for p in PLATFORMS}
    changes: list[PinChange] = []
    for name in [*old.pins, *(n for n in new.pins if n not in old.pins)]:
        status: Status = (
            "added" if name not in old.pins else "removed" if name not in new.pins else "changed"
        )
        values: dict[Platform, tuple[str | None, str | None]] = {}
        notes = False
        for platform in PLATFORMS:
            a, b = olds[platform].get(name), news[platform].get(name)
            if a is None and b is None:
                continue
            if a is not None and b is not None:
                if _plain(a, _NOTES) == _plain(b, _NOTES):
                    notes = notes or _plain(a, ("line",)) != _plain(b, ("line",))
                    continue
                values[platform] = _delta(a, b)
            else:
                values[platform] = (_show(a), _show(b))
        if values or notes:
            changes.append(PinChange(name=name, status=status, values=values))
    return ManifestDiff(
        rev_a=rev_a,
        rev_b=rev_b,
        manifest=label or str(new.path),
        pins=changes,
        settings=_settings(old, new),
        rebuild=rebuild_needed(old, new),
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


def _settings(old: Manifest, new: Manifest) -> list[SettingChange]:
    out: list[SettingChange] = []
    for platform in PLATFORMS:
        a, b = old.platforms[platform], new.platforms[platform]
        pairs = {
            "base": (a.base.ref, b.base.ref),
            "python": (a.python, b.python),
            "toolkit": (a.toolkit, b.toolkit),
            "vendor": (a.vendor, b.vendor),
            "gpu_archs": (", ".join(a.gpu_archs), ", ".join(b.gpu_archs)),
            "binaries": (", ".join(a.binaries), ", ".join(b.binaries)),
        }
        out += [
            SettingChange(key=f"platforms.{platform}.{key}", old=x, new=y)
            for key, (x, y) in pairs.items()
            if x != y
        ]
    la, lb = old.local, new.local
    local = {
        "suite": (la.suite, lb.suite),
        "mirror": (la.mirror, lb.mirror),
        "packages": (", ".join(la.packages), ", ".join(lb.packages)),
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


def manifest_at(rev: str, manifest: Path, *, repo: Path) -> Manifest:
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
    return compare(old, new, rev_a=rev_a, rev_b=rev_b or WORKTREE, label=str(manifest))
