"""The build record, ``build/<profile>/<variant>/<arch>/image.json``: what the last build of one
image (a variant on one architecture) made.

``twinbuild build`` saves it, ``twinbuild push`` adds where it pushed the image, and ``twinbuild
smoke`` reads it to find the image, its base and the pins the profile left out. They hand it to
each other as a :class:`BuildRecord`, through its one ``load`` and its one ``save``.
A build that finds its image up to date keeps what push recorded for that very image, so a smoke
after ``build, push, build`` still names the pushed digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import ARCH_NAMES, ARCHS, NAME_RE, PROFILES, Arch, ImageKey, Profile
from twinbuild.util import bounded
from twinbuild.util.atomic import write_atomic
from twinbuild.util.strictjson import Fields

#: The output folder under the repository root: records, logs and locks of every build.
OUTPUT = "build"
NAME = "image.json"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRef:
    """The image a build started from: the reference the recipe named and the engine's id."""

    ref: str
    id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedPin:
    """A pin of the manifest the profile does not install, and why."""

    pin: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PushRecord:
    """Where ``twinbuild push`` put the image, once the registry confirmed its digest."""

    ref: str  # REPOSITORY@sha256:DIGEST
    registry: str
    at: str  # UTC, 2026-01-31T12:00:00Z


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRecord:
    """What one build of one image made. Only ``image_id`` must be there: the rest of an
    older or hand-written record is read where it is, left out (None, empty) where it is not."""

    image_id: str
    variant: str | None = None
    arch: Arch | None = None
    profile: Profile | None = None
    tag: str | None = None
    inputs_hash: str | None = None
    manifest_digest: str | None = None
    base: BaseRef | None = None
    skipped: tuple[SkippedPin, ...] = ()
    python: str | None = None
    log: str | None = None
    pushed: PushRecord | None = None

    def with_push(self, pushed: PushRecord) -> BuildRecord:
        return replace(self, pushed=pushed)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["skipped"] = [asdict(s) for s in self.skipped]
        if self.pushed is None:
            data.pop("pushed")
        return data

    @classmethod
    def load(cls, path: Path) -> BuildRecord | None:
        """The record at ``path``; None when there is none, ConfigError when it is unusable."""
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"{path}: unreadable build record ({exc}); rebuild the image"
            ) from exc
        return cls.from_json(data, path)

    def save(self, path: Path) -> None:
        """Write the record atomically, unless the file already says exactly this (the no-op
        build: its fsync would cost 10 ms for nothing)."""
        text = json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n"
        data = text.encode("utf-8")
        try:  # bounded: a FIFO there is refused by write_atomic, not waited on here
            if bounded.read_bytes(path, limit=len(data), what="build record") == data:
                return
        except ConfigError:  # missing, garbled, larger or not a file: write_atomic decides
            pass
        write_atomic(path, data)

    @classmethod
    def from_json(cls, data: object, path: Path) -> BuildRecord:
        if not isinstance(data, dict) or not str(data.get("image_id", "")).startswith("sha256:"):
            raise ConfigError(f"{path}: no image_id in the build record; rebuild the image")
        top = Fields(data, "record", str(path), missing="rebuild the image")

        def opt(key: str, read: Callable[[str], _T]) -> _T | None:
            return read(key) if top.data.get(key) else None  # absent, null or empty: not recorded

        return cls(
            image_id=top.text("image_id"),
            variant=opt("variant", lambda k: top.match(k, NAME_RE, "a variant name")),
            arch=opt("arch", lambda k: top.choice(k, ARCHS)),
            profile=opt("profile", lambda k: top.choice(k, PROFILES)),
            tag=opt("tag", top.text),
            inputs_hash=opt("inputs_hash", top.text),
            manifest_digest=opt("manifest_digest", top.text),
            base=opt("base", lambda k: _base(top.obj(k))),
            skipped=tuple(_skipped(s) for s in opt("skipped", top.items) or ()),
            python=opt("python", top.text),
            log=opt("log", top.text),
            pushed=opt("pushed", lambda k: _pushed(top.obj(k))),
        )


def _base(fields: Fields) -> BaseRef:
    return BaseRef(ref=fields.text("ref"), id=fields.text("id"))


def _skipped(fields: Fields) -> SkippedPin:
    return SkippedPin(pin=fields.text("pin"), reason=fields.text("reason"))


def _pushed(fields: Fields) -> PushRecord:
    return PushRecord(
        ref=fields.text("ref"), registry=fields.text("registry"), at=fields.text("at")
    )


def save_build(path: Path, made: BuildRecord) -> None:
    """Save the record of a build at ``path``, keeping what push recorded when the image is the
    same: a build that found its image up to date must not forget where that image was pushed."""
    try:
        previous = BuildRecord.load(path)
    except ConfigError:
        previous = None  # an unusable record is replaced, as it always was
    if previous is not None and previous.pushed is not None and previous.image_id == made.image_id:
        made = made.with_push(previous.pushed)
    made.save(path)


def folder(root: Path, profile: Profile, image: ImageKey) -> Path:
    """The folder of one image's builds: its record, its log and its lock."""
    return root / OUTPUT / profile / image.variant / ARCH_NAMES[image.arch]


def record_path(root: Path, profile: Profile, image: ImageKey) -> Path:
    """Where ``twinbuild build`` records the image it made."""
    return folder(root, profile, image) / NAME
