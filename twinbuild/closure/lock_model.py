"""The lock of one image's closure: every Python distribution it ends up with, every git pin's
commit, every apt package, each as resolved, with what brought it.

``twinbuild lock`` makes an :class:`ImageLock` per image (``resolve.py``) and writes it as TOML
under ``pins/lock/`` (``lockfile.py``); the lint, the build, the smoke suite and the evidence read
it back. Every entry carries a short ``check`` of its own fields and the lock a digest of all of
them (:meth:`ImageLock.content_digest`), so a version or hash changed by hand is told apart from
what the resolver wrote, by name.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal

#: Bumped when the file's shape changes: a lock of another format is stale, never misread.
FORMAT = 1
#: Where a distribution comes from: the base image's installed set, or a layer of the recipe.
Origin = Literal["base", "layer"]
#: The index a distribution was resolved on: ``default`` (the one uv and pip use here, a mirror
#: of it or ``--index-url``), else the pin's own ``index``.
DEFAULT_INDEX = "default"


def short_check(data: object) -> str:
    """16 hex of the SHA-256 of ``data`` as canonical JSON: an entry's own check."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class LockedFile:
    """One file of a distribution the image may install: its name and SHA-256."""

    name: str
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedDist:
    """One Python distribution of the closure, at one exact version."""

    name: str  # PEP 503 normalised
    version: str
    origin: Origin = "layer"
    index: str = DEFAULT_INDEX
    #: The files of that version this image's platform and Python may install (wheels, sdist);
    #: empty where the index could not be asked here (``note`` says so).
    files: tuple[LockedFile, ...] = ()
    #: The pins that name it (none for a dependency).
    pins: tuple[str, ...] = ()
    #: The distributions that require it (none for a pin or a base distribution).
    via: tuple[str, ...] = ()
    #: Installed without its dependencies (``--no-deps``), as its layer installs it.
    no_deps: bool = False
    note: str = ""

    def fields(self) -> dict[str, object]:
        return {
            "name": self.name, "version": self.version, "origin": self.origin,
            "index": self.index, "files": [[f.name, f.sha256] for f in self.files],
            "pins": list(self.pins), "via": list(self.via), "no_deps": self.no_deps,
            "note": self.note,
        }  # fmt: skip

    @property
    def check(self) -> str:
        return short_check(self.fields())


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedGit:
    """A git pin's commit: the pinned one, or a branch or tag resolved where its source answers."""

    pin: str
    repo: str
    ref: str  # the branch or tag the manifest names; "" for a pin by commit
    commit: str  # "" while the ref could not be resolved here (``note`` says what to run)
    dist: str = ""
    note: str = ""

    def fields(self) -> dict[str, object]:
        return {"pin": self.pin, "repo": self.repo, "ref": self.ref, "commit": self.commit,
                "dist": self.dist, "note": self.note}  # fmt: skip

    @property
    def check(self) -> str:
        return short_check(self.fields())

    @property
    def resolved(self) -> bool:
        return bool(self.commit)


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedApt:
    """An apt package: its version as installed in the image, where a capture of it exists."""

    pin: str
    package: str
    version: str  # "" while no capture of the image's archive exists (``note`` says so)
    note: str = ""

    def fields(self) -> dict[str, object]:
        return {"pin": self.pin, "package": self.package, "version": self.version,
                "note": self.note}  # fmt: skip

    @property
    def check(self) -> str:
        return short_check(self.fields())


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseState:
    """What the lock knows of the base image's own installed set."""

    image: str  # the pull reference
    captured: bool
    capture_digest: str = ""  # the capture file's digest; "" when there is none
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageLock:
    """The lock of one image (a variant on one architecture) in the production profile."""

    image: str  # ImageKey.name: cu13-amd64
    variant: str
    arch: str
    python: str
    platform: str  # uv's --python-platform
    manifest_digest: str  # PinManifest.image_digest of the image it was made from
    base: BaseState
    resolver: str  # "uv 0.13.9"
    dists: tuple[LockedDist, ...] = ()
    git: tuple[LockedGit, ...] = ()
    apt: tuple[LockedApt, ...] = ()
    #: The pins' requirements the resolution was asked for, as given to the resolver: a pin
    #: whose spec changes makes the lock stale even where the manifest digest would not tell.
    asked: tuple[str, ...] = field(default=())
    #: The profile whose image this locks: "production" (``pins/lock/<image>.toml``) or "local"
    #: (``pins/lock/local/<image>.toml``: what images/local installs on the embedded base).
    profile: str = "production"

    def content(self) -> dict[str, object]:
        """Everything the resolution decided: what :meth:`content_digest` hashes."""
        local = {"profile": self.profile} if self.profile != "production" else {}
        return {
            **local,
            "format": FORMAT, "image": self.image, "python": self.python,
            "platform": self.platform, "manifest_digest": self.manifest_digest,
            "base": [self.base.image, self.base.captured, self.base.capture_digest],
            "asked": list(self.asked),
            "dists": [d.fields() for d in self.dists],
            "git": [g.fields() for g in self.git],
            "apt": [a.fields() for a in self.apt],
        }  # fmt: skip

    def content_digest(self) -> str:
        blob = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()

    def dist(self, name: str) -> LockedDist | None:
        return next((d for d in self.dists if d.name == name), None)

    def versions(self) -> dict[str, str]:
        """Every locked distribution's version by name."""
        return {d.name: d.version for d in self.dists}
