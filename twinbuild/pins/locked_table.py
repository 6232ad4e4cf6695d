"""``twinbuild pins table`` with the locks read (``pins/lock/``): each floating pin's status
says what each image's lock resolved it to (``-> 2.55.1 cu13-amd64, cu13-arm64; 2.54.0
rocm700-mi30x-amd64``), and ``--closure IMAGE`` lists one image's whole closure as its lock
holds it: every distribution (name, version, origin, what brought it), git pin and apt package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.closure import lockfile
from twinbuild.closure.lock_model import DEFAULT_INDEX, ImageLock, LockedDist
from twinbuild.closure.resolve import dist_name
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest, ResolvedPin
from twinbuild.manifest.rendered import requirement
from twinbuild.manifest.table import PinTable, pin_table


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedTableOptions:
    """What ``twinbuild pins table`` was asked for."""

    manifest: Path = DEFAULT_PATH
    closure: str | None = None  # --closure IMAGE: that image's whole closure instead


def locked_table(options: LockedTableOptions) -> PinTable:
    """The pin table with the locks' versions, or one image's closure."""
    manifest = load(options.manifest)
    if options.closure is not None:
        return closure_table(manifest, options.closure)
    return with_locks(manifest)


def _lock_path(manifest: PinManifest, image: str) -> Path:
    return manifest.path.parent / "lock" / f"{image}.toml"


def with_locks(manifest: PinManifest) -> PinTable:
    """:func:`pin_table`, each floating pin's status ending with its locked values."""
    table = pin_table(manifest)
    locks = {i: lockfile.read_if_there(_lock_path(manifest, i.name)) for i in manifest.images()}
    if not any(locks.values()):
        return table
    per = {i: {r.name: r for r in manifest.resolve(i)} for i in manifest.images()}
    rows = []
    for row in table.rows:
        pin = manifest.pins.get(row[0])
        if pin is not None and pin.floating is not None:
            groups: dict[str, list[str]] = {}
            for image, lock in locks.items():
                resolved = per[image].get(pin.name)
                if resolved is not None:
                    groups.setdefault(_locked(resolved, lock), []).append(image.name)
            shown = "; ".join(f"{value} {', '.join(names)}" for value, names in groups.items())
            rows.append((*row[:-1], f"{row[-1]} -> {shown}"))
        else:
            rows.append(row)
    return PinTable(title=table.title, header=table.header, rows=tuple(rows))


def _locked(pin: ResolvedPin, lock: ImageLock | None) -> str:
    """What ``lock`` resolved ``pin`` to, as one word."""
    if lock is None:
        return "(no lock)"
    if pin.kind == "git":
        git = next((g for g in lock.git if g.pin == pin.name), None)
        if git is None:
            return "(not in the lock)"
        return git.commit[:12] if git.commit else "(not resolved here)"
    if pin.kind == "apt":
        apt = next((a for a in lock.apt if a.pin == pin.name), None)
        if apt is None:
            return "(not in the lock)"
        return apt.version or "(no capture)"
    dist = lock.dist(dist_name(requirement(pin))) if pin.kind == "pypi" else None
    if dist is None:
        return "(not in the lock)"
    return dist.version + ("" if dist.files or dist.origin == "base" else " (no files here)")


def closure_table(manifest: PinManifest, name: str) -> PinTable:
    """Every entry of ``name``'s lock: distributions, then git pins, then apt packages."""
    images: dict[str, ImageKey] = {i.name: i for i in manifest.images()}
    if name not in images:
        raise ConfigError(
            f"--closure {name}: {manifest.path} has no such image; its images: {', '.join(images)}"
        )
    path = _lock_path(manifest, name)
    lock = lockfile.read_if_there(path)
    if lock is None:
        raise ConfigError(f"--closure {name}: {path} does not exist yet; run `twinbuild lock`")
    rows: list[tuple[str, ...]] = [
        (d.name, d.version or "-", _origin(d), _via(d)) for d in lock.dists
    ]
    rows += [
        (g.pin, g.commit or f"(@{g.ref} not resolved here)", f"git {g.repo}", f"pin {g.pin}")
        for g in lock.git
    ]
    rows += [(a.package, a.version or "(no capture)", "apt", f"pin {a.pin}") for a in lock.apt]
    counts = f"{len(lock.dists)} distributions, {len(lock.git)} git, {len(lock.apt)} apt"
    return PinTable(
        title=f"Closure of {name} ({path}: {counts})",
        header=("name", "version", "origin", "via"),
        rows=tuple(rows),
    )


def _origin(dist: LockedDist) -> str:
    where = dist.origin + (" --no-deps" if dist.no_deps else "")
    return where if dist.index == DEFAULT_INDEX else f"{where}, index {dist.index}"


def _via(dist: LockedDist) -> str:
    if dist.pins:
        return "pin " + ", ".join(dist.pins)
    if dist.via:
        return ", ".join(dist.via)
    return "the base" if dist.origin == "base" else "-"
