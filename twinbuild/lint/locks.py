"""The lock lint: every image's lock under ``pins/lock/`` against the manifest and itself.

Run where a repository keeps locks (a ``pins/lock/`` folder), on every image's production lock
and its local lock (``pins/lock/local/<image>.toml``). Each finding names the lock file:

- TB201 a floating PyPI pin with no lock entry (no lock for the image, or none for the pin);
- TB202 a lock entry no pin, dependency or base capture explains;
- TB203 a lock older than the manifest (the image's pins or settings, what it asks the resolver)
  or than the base capture it was made from;
- TB204 a lock that does not parse, or whose entry was edited by hand (its check says so);
- TB205 what the lock could not resolve here (a git branch or tag, a base capture, an apt
  version, a pin's own index): the command to run where the source is reachable;
  like TB010 it fails only with ``--strict``;
- TB206 a pin whose locked version the index has no file of for the image's platform (the
  image cannot install it); it fails only with ``--strict``.
"""

from __future__ import annotations

from pathlib import Path

from twinbuild.closure import lockfile
from twinbuild.closure.capture import capture_path, read_capture
from twinbuild.closure.local import local_asked, local_stale_reason
from twinbuild.closure.lock_model import ImageLock
from twinbuild.closure.resolve import NO_FILE_NOTE, asked, dist_name
from twinbuild.errors import LockInvalid
from twinbuild.lint.findings import Finding
from twinbuild.manifest.model import ImageKey, PinManifest
from twinbuild.manifest.rendered import requirement

CODES = {
    "TB201": "floating PyPI pin with no lock entry (pins/lock/)",
    "TB202": "lock entry no pin, dependency or base capture explains",
    "TB203": "lock older than the manifest or the base capture",
    "TB204": "lock that does not parse, or an entry edited by hand",
    "TB205": "not resolvable here: a git ref, base capture, apt version or index (--strict)",
    "TB206": "pin the index has no file of for the image's platform (--strict)",
}
#: The codes that fail only with --strict (as TB010).
STRICT_ONLY = frozenset({"TB205", "TB206"})


def applies(root: Path) -> bool:
    """The lock lint runs where the repository keeps locks."""
    return (root / lockfile.LOCK_DIR).is_dir()


def lint_locks(manifest: PinManifest, root: Path) -> list[Finding]:
    """Every lock finding, strict-only ones included (the caller decides)."""
    out: list[Finding] = []
    for image in manifest.images():
        path = lockfile.lock_path(root, image.name)
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        try:
            lock = lockfile.read_if_there(path)
        except LockInvalid as exc:
            out.append(Finding(path=str(shown), line=0, code="TB204", message=str(exc)))
            continue
        text = path.read_text(encoding="utf-8") if lock is not None else ""
        out += _image(manifest, root, image, lock, str(shown), _Lines(text))
        out += _local(manifest, root, image)
    return out


def _local(manifest: PinManifest, root: Path, image: ImageKey) -> list[Finding]:
    """The local lock of ``image`` (``pins/lock/local/<image>.toml``), by the same rules: a
    floating local pin with no lock or entry (TB201), an entry no local pin asks for (TB202),
    a lock older than the local pins (TB203), one that does not parse or was edited (TB204)."""
    path = lockfile.lock_path(root, image.name, "local")
    shown = str(path.relative_to(root) if path.is_relative_to(root) else path)
    try:
        lock = lockfile.read_if_there(path)
    except LockInvalid as exc:
        return [Finding(path=shown, line=0, code="TB204", message=str(exc))]
    what = local_asked(manifest, image)
    floating = [(p, r) for p, r in what.pins if p.floating is not None or p.values.version is None]
    if lock is None:
        return [
            Finding(path=shown, line=0, code="TB201",
                    message=f"pins.{p.name} ({r}) floats and the local image {image.name} has "
                    "no lock; run `twinbuild lock` and commit pins/lock/local/")
            for p, r in floating
        ]  # fmt: skip
    line_of = _Lines(path.read_text(encoding="utf-8"))
    out: list[Finding] = []
    if local_stale_reason(manifest, image, lock) is not None:
        out.append(Finding(
            path=shown, line=line_of("[lock]"), code="TB203",
            message=f"older than {manifest.path}: the pins the local profile installs changed; "
            "run `twinbuild lock` and commit it",
        ))  # fmt: skip
    names = {d.name for d in lock.dists}
    for pin, req in floating:
        if dist_name(req) not in names:
            out.append(Finding(
                path=shown, line=0, code="TB201",
                message=f"pins.{pin.name} ({req}) floats and has no entry; run `twinbuild lock` "
                "and commit it",
            ))  # fmt: skip
    asked_names = {dist_name(r) for _, r in what.pins}
    for d in lock.dists:
        if d.name not in asked_names:
            out.append(Finding(
                path=shown, line=line_of("[[dist]]", f'name = "{d.name}"'), code="TB202",
                message=f"dist {d.name} {d.version}: no pin the local profile installs asks for "
                "it; run `twinbuild lock` (it drops what nothing asks for)",
            ))  # fmt: skip
    return out


class _Lines:
    """Where each entry of a lock starts: its header and first key, as ``lockfile.render``
    writes them (indexed once, on the first finding that asks)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.index: dict[tuple[str, ...], int] | None = None

    def __call__(self, *needles: str) -> int:
        if self.index is None:
            lines = self.text.split("\n")
            self.index = {}
            for i, line in enumerate(lines):
                if line.startswith("["):
                    self.index.setdefault((line,), i + 1)
                    if i + 1 < len(lines):
                        self.index.setdefault((line, lines[i + 1]), i + 1)
        return self.index.get(needles, 0)


def _image(
    manifest: PinManifest,
    root: Path,
    image: ImageKey,
    lock: ImageLock | None,
    shown: str,
    line_of: _Lines,
) -> list[Finding]:
    out: list[Finding] = []
    pins = [p for p in manifest.resolve(image) if p.kind == "pypi" and p.install == "pip"]
    if lock is None:
        for pin in pins:
            if pin.floating is not None or pin.values.version is None:
                out.append(Finding(
                    path=shown, line=0, code="TB201",
                    message=f"pins.{pin.name} ({requirement(pin)}) floats and {image.name} has "
                    "no lock; run `twinbuild lock` and commit pins/lock/",
                ))  # fmt: skip
        return out
    if lock.manifest_digest != manifest.image_digest(image):
        out.append(Finding(
            path=shown, line=line_of("[lock]"), code="TB203",
            message=f"older than {manifest.path}: {image.name}'s pins or settings changed since "
            "it was made; run `twinbuild lock` and commit it",
        ))  # fmt: skip
    elif lock.asked != asked(manifest, root, image).lines():
        out.append(Finding(
            path=shown, line=line_of("[lock]"), code="TB203",
            message="older than the recipe: what the image asks the resolver changed (a layer's "
            "--no-deps); run `twinbuild lock` and commit it",
        ))  # fmt: skip
    capture = read_capture(capture_path(root, image.name))
    if (capture.digest if capture else "") != lock.base.capture_digest:
        out.append(Finding(
            path=shown, line=line_of("[base]"), code="TB203",
            message="older than the base capture pins/lock/base/"
            f"{image.name}.toml; run `twinbuild lock` and commit it",
        ))  # fmt: skip
    names = {d.name for d in lock.dists}
    for pin in pins:
        name = dist_name(requirement(pin))
        if name not in names and (pin.floating is not None or pin.values.version is None):
            out.append(Finding(
                path=shown, line=0, code="TB201",
                message=f"pins.{pin.name} ({requirement(pin)}) floats and has no entry; run "
                "`twinbuild lock` and commit it",
            ))  # fmt: skip
    for d in lock.dists:
        at = line_of("[[dist]]", f'name = "{d.name}"') if d.note or not d.pins else 0
        unexplained = (
            d.origin == "layer" and not d.pins and (not d.via or not set(d.via) <= names)
        ) or (d.origin == "base" and not lock.base.captured)
        if unexplained:
            out.append(Finding(
                path=shown, line=at, code="TB202",
                message=f"dist {d.name} {d.version}: no pin, dependency or base capture brings "
                "it; run `twinbuild lock` (it drops what nothing asks for)",
            ))  # fmt: skip
        if d.note.startswith(NO_FILE_NOTE):
            out.append(Finding(path=shown, line=at, code="TB206",
                               message=f"dist {d.name}=={d.version}: {d.note}"))  # fmt: skip
        elif not d.files and d.origin == "layer":
            out.append(Finding(path=shown, line=at, code="TB205",
                               message=f"dist {d.name}: {d.note}"))  # fmt: skip
    for g in lock.git:
        if not g.resolved:
            out.append(Finding(
                path=shown, line=line_of("[[git]]", f'pin = "{g.pin}"'), code="TB205",
                message=f"git {g.pin}: {g.note}",
            ))  # fmt: skip
    for a in lock.apt:
        if not a.version:
            out.append(Finding(
                path=shown, line=line_of("[[apt]]", f'pin = "{a.pin}"'), code="TB205",
                message=f"apt {a.pin}: {a.note}",
            ))  # fmt: skip
    if not lock.base.captured:
        out.append(Finding(path=shown, line=line_of("[base]"), code="TB205",
                           message=f"base: {lock.base.note}"))  # fmt: skip
    return out


def resolved_pins(manifest: PinManifest, root: Path) -> frozenset[str]:
    """The pins every image's fresh lock resolves: a PyPI pin locked at a version with its files,
    a git pin at a commit. Their floating is the lock's to decide, so TB010 leaves them out."""
    locks: dict[ImageKey, ImageLock | None] = {}
    for image in manifest.images():
        try:
            lock = lockfile.read_if_there(lockfile.lock_path(root, image.name))
        except LockInvalid:
            lock = None  # TB204 names it
        fresh = lock is not None and lock.manifest_digest == manifest.image_digest(image)
        locks[image] = lock if fresh else None
    out = set()
    for name, pin in manifest.pins.items():
        images = manifest.images(pin.variants)
        if images and all(_resolves(locks[i], manifest, i, name) for i in images):
            out.add(name)
    return frozenset(out)


def _resolves(lock: ImageLock | None, manifest: PinManifest, image: ImageKey, name: str) -> bool:
    if lock is None:
        return False
    pin = next(p for p in manifest.resolve(image) if p.name == name)
    if pin.kind == "git":
        return any(g.pin == name and g.resolved for g in lock.git)
    if pin.kind != "pypi" or pin.install != "pip":
        return False
    dist = lock.dist(dist_name(requirement(pin)))
    return dist is not None and bool(dist.version) and bool(dist.files)
