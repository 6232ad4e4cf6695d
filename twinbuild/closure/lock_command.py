"""``twinbuild lock``: every image's lock made where it is missing or stale, and only there.

A lock is stale when the image's slice of the manifest (``PinManifest.image_digest``), what it asks
the resolver (its pins' requirements, split by the recipe's ``--no-deps`` layers) or the base
capture it was made from changed. ``--upgrade`` re-resolves every image for the newest releases
the manifest allows; ``--upgrade NAME...`` moves only those pins (or distributions), keeping
every other version. The first stale image resolves alone, then the others in parallel on the
index pages it fetched (``uv.forget_old_pages`` first drops the pages past the window); the
locks are written only once all of them resolved (each atomically), so a failure leaves every
lock as it was. The report says per image what moved (old -> new) and which images rebuild:
exactly those whose lock changed.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from twinbuild.closure import lockfile, uv
from twinbuild.closure.capture import capture_path, read_capture
from twinbuild.closure.local import local_stale_reason, resolve_local
from twinbuild.closure.lock_model import ImageLock
from twinbuild.closure.resolve import (
    NO_FILE_NOTE,
    ImageRequest,
    asked,
    dist_name,
    resolve_image,
)
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest


@dataclass(frozen=True, slots=True, kw_only=True)
class LockOptions:
    """What ``twinbuild lock`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    #: --upgrade: None (keep every version), () (everything), or the pins/distributions to move
    upgrade: tuple[str, ...] | None = None
    variant: tuple[str, ...] = ()  # --variant: only these (default: every variant)
    index_url: str | None = None
    dry_run: bool = False

    @property
    def upgrade_all(self) -> bool:
        return self.upgrade == ()

    @property
    def upgrade_names(self) -> tuple[str, ...]:
        return self.upgrade or ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved:
    name: str
    old: str  # "" where it is new
    new: str  # "" where it is gone


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageOutcome:
    image: str
    state: str  # "up to date", "created", "updated", "unchanged" (re-resolved, same content)
    why: str = ""
    moved: tuple[Moved, ...] = ()
    unresolved: tuple[str, ...] = ()  # what could not be resolved here (git refs, indexes)


@dataclass(frozen=True, slots=True, kw_only=True)
class LockReport:
    images: tuple[ImageOutcome, ...]
    rebuild: str  # the images whose lock changed, as PinManifest.label names them
    written: tuple[str, ...] = ()
    dry_run: bool = False
    notes: tuple[str, ...] = field(default=())

    def text(self) -> str:
        out: list[str] = []
        for o in self.images:
            head = f"{o.image}: {o.state}"
            if o.why:
                head += f" ({o.why})"
            if o.state == "created":
                head += f": {len(o.moved)} entries"
            out.append(head)
            if o.state != "created":
                out += [f"  {m.name}: {m.old or '(new)'} -> {m.new or '(gone)'}" for m in o.moved]
            out += [f"  not resolved here: {u}" for u in o.unresolved]
        out.append(f"rebuild: {self.rebuild or 'nothing'}")
        if self.dry_run:
            out.append("dry run: pins/lock/ left as it was")
        return "\n".join(out)


def stale_reason(
    manifest: PinManifest, root: Path, image: ImageKey, previous: ImageLock | None
) -> str | None:
    """Why ``image``'s lock must be made again; None when it is up to date."""
    if previous is None:
        return "no lock yet"
    if previous.manifest_digest != manifest.image_digest(image):
        return "the image's pins or settings in the manifest changed"
    if previous.asked != asked(manifest, root, image).lines():
        return "what the image asks the resolver changed (its recipe's layers)"
    capture = read_capture(capture_path(root, image.name))
    if (capture.digest if capture else "") != previous.base.capture_digest:
        return "the base capture changed"
    return None


def _upgrade_set(manifest: PinManifest, image: ImageKey, names: tuple[str, ...]) -> frozenset[str]:
    out: set[str] = set()
    resolved = {p.name: p for p in manifest.resolve(image)}
    for name in names:
        pin = manifest.find(name)
        if pin is not None and pin.name in resolved:
            r = resolved[pin.name]
            out.add(pin.name)
            if r.values.dist:
                out.add(dist_name(r.values.dist))
        else:
            out.add(canonicalize_name(name))
    return frozenset(out)


def _known(manifest: PinManifest, locks: dict[ImageKey, ImageLock | None], name: str) -> bool:
    if manifest.find(name) is not None:
        return True
    wanted = canonicalize_name(name)
    return any(lock and lock.dist(wanted) for lock in locks.values())


def lock_all(options: LockOptions) -> LockReport:
    manifest = load(options.manifest)
    root = options.root
    images = manifest.images(options.variant or None)
    previous = {i: lockfile.read_if_there(lockfile.lock_path(root, i.name)) for i in images}
    for name in options.upgrade_names:
        if not _known(manifest, previous, name):
            raise ConfigError(
                f"--upgrade {name}: no pin of {manifest.path} and no locked distribution has "
                "that name; `twinbuild pins table` lists the pins"
            )
    todo: dict[ImageKey, tuple[str, frozenset[str]]] = {}
    for image in images:
        moving = _upgrade_set(manifest, image, options.upgrade_names)
        why = stale_reason(manifest, root, image, previous[image])
        touched = bool(options.upgrade_names) and _touches(previous[image], moving, manifest, image)
        if (reason := _why(options, why, touched=touched)) is not None:
            todo[image] = (reason, moving)
    resolver = uv.version() if todo else ""
    unreachable: set[str] = set()

    def one(image: ImageKey) -> ImageLock:
        why, moving = todo[image]
        del why
        return resolve_image(
            ImageRequest(
                manifest=manifest, root=root, image=image, previous=previous[image],
                capture=read_capture(capture_path(root, image.name)),
                index_url=options.index_url, upgrade_all=options.upgrade_all, upgrade=moving,
                resolver=resolver, unreachable=unreachable,
            )
        )  # fmt: skip

    local_previous = {
        i: lockfile.read_if_there(lockfile.lock_path(root, i.name, "local")) for i in images
    }
    local_todo: dict[ImageKey, str] = {}
    for image in images:
        why = local_stale_reason(manifest, image, local_previous[image])
        old = local_previous[image]
        touched = bool(options.upgrade_names) and (
            old is None
            or any(old.dist(n) for n in _upgrade_set(manifest, image, options.upgrade_names))
        )
        if (reason := _why(options, why, touched=touched)) is not None:
            local_todo[image] = reason
    if local_todo and not resolver:
        resolver = uv.version()

    def one_local(image: ImageKey) -> ImageLock:
        return resolve_local(
            manifest, image, local_previous[image], index_url=options.index_url,
            upgrade_all=options.upgrade_all,
            upgrade=_upgrade_set(manifest, image, options.upgrade_names), resolver=resolver,
        )  # fmt: skip

    made: dict[ImageKey, ImageLock] = {}
    if todo or local_todo:
        uv.forget_old_pages()
    rest = list(todo)
    if rest:
        # The first image alone: the index pages it asks for are the others' too (the same
        # projects on another platform), so they find them in the cache instead of each asking.
        first = rest.pop(0)
        made[first] = one(first)
    with ThreadPoolExecutor(max_workers=max(1, min(6, len(rest) + len(local_todo)))) as pool:
        futures = {image: pool.submit(one, image) for image in rest}
        local_futures = {image: pool.submit(one_local, image) for image in local_todo}
        made |= {image: future.result() for image, future in futures.items()}
        local_made = {image: future.result() for image, future in local_futures.items()}
    outcomes: list[ImageOutcome] = []
    changed: list[ImageKey] = []
    written: list[str] = []
    for image in images:
        if image not in made:
            outcomes.append(ImageOutcome(image=image.name, state="up to date",
                                         unresolved=_unresolved(previous[image])))  # fmt: skip
            continue
        new = made[image]
        outcome = _outcome(image.name, previous[image], new, todo[image][0],
                           unresolved=_unresolved(new))  # fmt: skip
        outcomes.append(outcome)
        if outcome.state != "unchanged":
            changed.append(image)
    local_changed: list[ImageKey] = []
    for image in images:
        name = f"local/{image.name}"
        if image not in local_made:
            outcomes.append(ImageOutcome(image=name, state="up to date"))
            continue
        outcome = _outcome(name, local_previous[image], local_made[image], local_todo[image])
        outcomes.append(outcome)
        if outcome.state != "unchanged":
            local_changed.append(image)
    if not options.dry_run:
        for image in changed:
            written.append(str(lockfile.write(root, made[image]).relative_to(root)))
        for image in local_changed:
            written.append(str(lockfile.write(root, local_made[image]).relative_to(root)))
    rebuild = manifest.label(changed) if changed else ""
    if local_changed:
        rebuild = ", ".join(x for x in (rebuild, f"local {manifest.label(local_changed)}") if x)
    return LockReport(
        images=tuple(outcomes), rebuild=rebuild, written=tuple(written), dry_run=options.dry_run,
    )  # fmt: skip


def _why(options: LockOptions, stale: str | None, *, touched: bool) -> str | None:
    """Why one lock is resolved again (None: it is kept): ``stale`` (its reason, or None), or
    an ``--upgrade`` that names what the lock holds (``touched``), or ``--upgrade`` of all."""
    if options.upgrade_all:
        return stale or "--upgrade"
    if options.upgrade_names and touched:
        return stale or f"--upgrade {' '.join(options.upgrade_names)}"
    return stale


def _outcome(
    name: str, old: ImageLock | None, new: ImageLock, why: str, *, unresolved: tuple[str, ...] = ()
) -> ImageOutcome:
    """What resolving one lock again came to: created, updated, or unchanged in content."""
    same = old is not None and old.content_digest() == new.content_digest()
    state = "created" if old is None else ("unchanged" if same else "updated")
    return ImageOutcome(image=name, state=state, why=why, moved=moved_between(old, new),
                        unresolved=unresolved)  # fmt: skip


def _touches(
    lock: ImageLock | None, moving: frozenset[str], manifest: PinManifest, image: ImageKey
) -> bool:
    if lock is None:
        return True
    names = {p.name for p in manifest.resolve(image)}
    return any(lock.dist(n) for n in moving) or bool(moving & names)


def moved_between(old: ImageLock | None, new: ImageLock) -> tuple[Moved, ...]:
    """Every distribution version and git commit that differs from ``old`` to ``new``."""
    before = old.versions() if old else {}
    after = new.versions()
    moved = [
        Moved(name=n, old=before.get(n, ""), new=after.get(n, ""))
        for n in sorted(set(before) | set(after))
        if before.get(n) != after.get(n)
    ]
    old_git = {g.pin: g.commit for g in old.git} if old else {}
    moved += [
        Moved(name=g.pin, old=old_git.get(g.pin, ""), new=g.commit)
        for g in new.git
        if old_git.get(g.pin, "") != g.commit
    ]
    return tuple(moved)


def _unresolved(lock: ImageLock | None) -> tuple[str, ...]:
    if lock is None:
        return ()
    out = [f"git {g.pin} ({g.ref})" for g in lock.git if not g.resolved]
    for d in lock.dists:
        if not d.files and d.origin == "layer":
            out.append(f"{d.name}=={d.version}: {d.note}" if NO_FILE_NOTE in d.note
                       else f"{d.name} on {d.index}")  # fmt: skip
    if not lock.base.captured:
        out.append(f"base {lock.base.image}")
    return tuple(out)
