"""``twinbuild pins outdated``: which pins have a newer release, branch head or base tag.

One row per pin (per distinct value, where the variants differ) and per base: its current value,
the latest its source knows, and which images it moves (image and profile). The sources are
the package index (PyPI pins, :mod:`twinbuild.pins.pypi_index`), ``git ls-remote`` of the branch
a git pin ``track``s or the ref it floats on (:mod:`twinbuild.pins.heads`) and the bases' registries
(:mod:`twinbuild.pins.tags`); they are asked at once, a few requests in flight.

A source that cannot be asked is one line each (``unreachable``), its rows marked ``unknown``
and the report ``partial``; when nothing could be asked at all the command fails (exit 3).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from twinbuild.closure.lock_model import ImageLock
from twinbuild.errors import EngineError, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest, ResolvedPin
from twinbuild.manifest.rendered import render
from twinbuild.pins.heads import head
from twinbuild.pins.pypi_index import default_index, releases
from twinbuild.pins.tags import list_tags, newest
from twinbuild.util import environ, shown
from twinbuild.util.exchange import Clock
from twinbuild.util.exchange import clock as registry_clock

Source = Literal["pypi", "git", "registry"]
SOURCES: tuple[Source, ...] = get_args(Source)
Status = Literal["outdated", "current", "floating", "unchecked", "unknown"]
STATUSES: tuple[Status, ...] = get_args(Status)
INDEX_TIMEOUT_VAR = "TWINBUILD_INDEX_TIMEOUT"
INDEX_BUDGET = 2
"""All of one command's index requests together get this many request timeouts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutdatedOptions:
    """What ``twinbuild pins outdated`` was asked for."""

    manifest: Path = DEFAULT_PATH
    sources: tuple[Source, ...] = SOURCES
    index_url: str | None = None  # default: the pin's own index, else the one pip uses
    base_registry: str | None = None  # ask this registry (a mirror) for the bases' tags
    jobs: int = 8  # requests in flight


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One pin's value (on ``variants``' images) or one base: what it is, what is newest, what
    moves."""

    pin: str  # the pin's name, or variants.<v>.base
    kind: str  # pypi, git, url, apt, base
    source: Source | None  # None: nothing to ask (url, apt)
    variants: tuple[str, ...]  # the images it is on: cu13-amd64, ...
    images: tuple[str, ...]  # "cu13-amd64:production", "cu13-amd64:local", ...: what a bump
    # rebuilds
    current: str
    latest: str | None
    status: Status
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pin": self.pin, "kind": self.kind, "source": self.source,
            "variants": list(self.variants), "images": list(self.images),
            "current": self.current, "latest": self.latest, "status": self.status,
            "note": self.note,
        }  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class OutdatedReport:
    manifest: str
    asked: tuple[Source, ...]
    rows: tuple[Row, ...]
    #: one line per source that could not be asked for some or all of its pins
    unreachable: tuple[str, ...] = ()

    @property
    def partial(self) -> bool:
        return bool(self.unreachable)

    def counts(self) -> dict[Status, int]:
        return {s: sum(1 for r in self.rows if r.status == s) for s in STATUSES}

    def summary(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        return f"{len(self.rows)} rows: {counts}" + (" (partial)" if self.partial else "")

    def text(self) -> str:
        lines = [f"pins outdated ({self.manifest}; asked {', '.join(self.asked) or 'nothing'})"]
        width = max((len(r.pin) for r in self.rows), default=0)
        for r in self.rows:
            moved = (
                f"{r.current} -> {r.latest}" if r.latest and r.latest != r.current else (r.current)
            )
            note = f"; {r.note}" if r.note else ""
            lines.append(f"{r.pin:<{width}}  {r.status:<9}  {moved}  [{_images(r)}]{note}")
        lines.append(self.summary())
        return "\n".join(lines) + "\n"

    def markdown(self) -> str:
        lines = [
            f"### Outdated pins ({self.summary()})", "",
            "| pin | status | current | latest | moves |", "| --- | --- | --- | --- | --- |",
        ]  # fmt: skip
        for r in self.rows:
            if r.status in ("current", "unchecked"):
                continue
            lines.append(
                shown.row((shown.code_cell(r.pin), r.status, shown.code_cell(r.current),
                           shown.code_cell(r.latest or ""), shown.cell(_images(r))))
            )  # fmt: skip
        lines += [f"- unreachable: {shown.one_line(line)}" for line in self.unreachable]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest": self.manifest, "asked": list(self.asked), "partial": self.partial,
            "unreachable": list(self.unreachable), "counts": self.counts(),
            "rows": [r.to_dict() for r in self.rows],
        }  # fmt: skip


def _images(row: Row) -> str:
    return ", ".join(row.images) or "no image"


# -- what to ask -------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Ask:
    """One question to a source, and the row it fills."""

    source: Source
    key: tuple[str, str]  # what the answer is cached under: (where, what)
    row: Row
    answer: Callable[[str], tuple[str | None, Status, str]] = field(repr=False)


def outdated_pins(options: OutdatedOptions) -> OutdatedReport:
    """Ask every source ``options`` names about every pin of the manifest; see the module doc."""
    manifest = load(options.manifest)
    index = options.index_url
    if "pypi" in options.sources and index is None:
        index = default_index()
    clock = index_clock() if "pypi" in options.sources else None
    asks, rows = _questions(manifest, options, index or "", clock)
    answered, unreachable = _ask_all(asks, options)
    if asks and not answered:
        raise EngineError("pins outdated: nothing could be asked:\n" + "\n".join(unreachable))
    report_rows = [*rows, *(a.row for a in asks)]
    order = {name: i for i, name in enumerate(["variants", *manifest.pins])}
    report_rows.sort(key=lambda r: (order.get(r.pin.split(".")[0], len(order)), r.variants))
    return OutdatedReport(
        manifest=str(manifest.path), asked=tuple(s for s in SOURCES if s in options.sources),
        rows=tuple(report_rows), unreachable=tuple(unreachable),
    )  # fmt: skip


def _ask_all(asks: list[_Ask], options: OutdatedOptions) -> tuple[int, list[str]]:
    """Fill every row; the number answered and one line per source with failures."""
    cache: dict[tuple[str, str], tuple[str | None, Status, str] | TwinbuildError] = {}

    def one(ask: _Ask) -> tuple[str | None, Status, str] | TwinbuildError:
        try:
            return ask.answer(ask.row.current)
        except TwinbuildError as exc:
            return exc

    firsts: dict[tuple[str, str], _Ask] = {}
    for ask in asks:
        firsts.setdefault(ask.key, ask)
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for key, result in zip(firsts, pool.map(one, firsts.values()), strict=True):
            cache[key] = result
    failed: dict[Source, list[str]] = {}
    answered = 0
    for ask in asks:
        result = cache[ask.key]
        if isinstance(result, EngineError):
            failed.setdefault(ask.source, []).append(str(result).splitlines()[0])
            ask.row = _with(ask.row, latest=None, status="unknown", note="not asked: unreachable")
            continue
        answered += 1
        if isinstance(result, TwinbuildError):  # the source answered: no such project or ref
            ask.row = _with(ask.row, latest=None, status="unknown", note=str(result)[:200])
            continue
        latest, status, note = result
        ask.row = _with(ask.row, latest=latest, status=status, note=note or ask.row.note)
    lines = []
    for source in SOURCES:
        if source in failed:
            total = sum(1 for a in asks if a.source == source)
            lines.append(
                f"{source}: {failed[source][0]} ({len(failed[source])} of {total} not asked)"
            )
    return answered, lines


def _with(row: Row, **changes: Any) -> Row:
    values = row.to_dict() | changes
    values["variants"], values["images"] = tuple(values["variants"]), tuple(values["images"])
    return Row(**values)


def _questions(
    manifest: PinManifest, options: OutdatedOptions, index: str, clock: Clock | None
) -> tuple[list[_Ask], list[Row]]:
    """The questions to ask, and the rows no source answers (url, apt, untracked commits)."""
    asks: list[_Ask] = []
    rows: list[Row] = []
    local = {
        i: {pin.name for pin, _ in render(manifest, i, "local").skipped}
        for i in manifest.images(manifest.local_variants())
    }
    if "registry" in options.sources:
        asks += _base_questions(manifest, options)
    for name, pin in manifest.pins.items():
        groups: dict[tuple[object, ...], list[ResolvedPin]] = {}
        keys: dict[tuple[object, ...], list[ImageKey]] = {}
        for key in manifest.images(pin.variants):
            resolved = next(r for r in manifest.resolve(key) if r.name == name)
            value: tuple[object, ...] = (*resolved.value_key(), resolved.values.track)
            groups.setdefault(value, []).append(resolved)
            keys.setdefault(value, []).append(key)
        for value, members in groups.items():
            first = members[0]
            on = tuple(keys[value])
            images = tuple(
                image
                for i in on
                for image in (
                    f"{i.name}:production",
                    *([f"{i.name}:local"] if i in local and name not in local[i] else []),
                )
            )
            ask, row = _pin_question(
                first, tuple(i.name for i in on), images, options, index, clock
            )
            if ask is not None and first.kind == "pypi" and first.values.version is None:
                ask = _locked(ask, manifest, first, on)
            if ask is not None:
                asks.append(ask)
            elif row is not None:
                rows.append(row)
    return asks, rows


def _lock_of(manifest: PinManifest, image: ImageKey) -> ImageLock | None:
    """The image's lock beside the manifest (``pins/lock/``), where there is one."""
    from twinbuild.closure.lockfile import read_if_there

    path = manifest.path.parent / "lock" / f"{image.name}.toml"
    with contextlib.suppress(TwinbuildError):  # an unreadable lock is the lint's to name
        return read_if_there(path)
    return None


def _locked(ask: _Ask, manifest: PinManifest, pin: ResolvedPin, on: tuple[ImageKey, ...]) -> _Ask:
    """A floating PyPI pin's row says the version its images' locks hold, and compares the
    index's newest release with it: ``twinbuild lock --upgrade`` moves it."""
    from twinbuild.closure.resolve import dist_name
    from twinbuild.manifest.rendered import requirement

    name = dist_name(requirement(pin))
    held = set()
    for image in on:
        lock = _lock_of(manifest, image)
        dist = lock.dist(name) if lock else None
        if dist is not None and dist.version:
            held.add(dist.version)
    if not held:
        return ask
    shown = ", ".join(sorted(held))
    row = _with(ask.row, current=f"{ask.row.current} (locked {shown})")
    floating = ask.answer

    def answer(current: str) -> tuple[str | None, Status, str]:
        latest, status, note = floating(current)
        if status != "floating" or latest is None:
            return latest, status, note
        with contextlib.suppress(InvalidVersion):
            if any(Version(latest) > Version(v) for v in held):
                why = f"the lock holds {shown}; `twinbuild lock --upgrade {pin.name}` moves it"
                return latest, "outdated", "; ".join(x for x in (note, why) if x)
        return latest, "current", note

    return dataclasses.replace(ask, row=row, answer=answer)


def _pin_question(
    r: ResolvedPin, variants: tuple[str, ...], images: tuple[str, ...],
    options: OutdatedOptions, index: str, clock: Clock | None,
) -> tuple[_Ask | None, Row | None]:  # fmt: skip
    v = r.values
    base: dict[str, Any] = {"pin": r.name, "kind": r.kind, "variants": variants, "images": images}
    if r.kind == "pypi":
        current = v.version if v.version is not None else (v.range or "(unpinned)")
        row = Row(**base, source="pypi", current=current, latest=None, status="unknown")
        if "pypi" not in options.sources or clock is None:
            return None, _with(row, note="pypi not asked")
        where = options.index_url or v.index or index
        dist = v.dist or r.name
        return _Ask(
            source="pypi", key=(where, dist), row=row, answer=_pypi_answer(where, dist, v, clock)
        ), None
    if r.kind == "git":
        ref = v.track or v.ref
        current = v.commit or v.ref or ""
        row = Row(**base, source="git", current=current, latest=None, status="unknown")
        if ref is None or v.repo is None:
            note = 'declares no track: add track = "BRANCH" to compare'
            return None, _with(row, source=None, status="unchecked", note=note)
        if "git" not in options.sources:
            return None, _with(row, note="git not asked")
        repo = v.repo
        ask = _Ask(source="git", key=(repo, ref), row=row, answer=_git_answer(repo, ref, v))
        return ask, None
    note = (
        "a url pin: bump with --version (the url moves, a new sha256 is taken)"
        if r.kind == "url"
        else "an apt package: the base image's archive decides"
    )
    current = v.version or (v.url or "") if r.kind == "url" else v.version or "(unpinned)"
    return None, Row(**base, source=None, current=current, latest=None, status="unchecked",
                     note=note)  # fmt: skip


def index_clock() -> Clock:
    """The deadlines of the command's index requests: ``$TWINBUILD_INDEX_TIMEOUT`` seconds each
    (30), and :data:`INDEX_BUDGET` times that for all of them together, however many pins ask:
    an index that drips answers each request just inside its deadline, and 70 pins at 8 in
    flight took 271 s before the budget was one for the command."""
    seconds = environ.whole(
        INDEX_TIMEOUT_VAR, low=1, high=3600,
        hint="set whole seconds, e.g. 30, or unset it for the default",
    )  # fmt: skip
    timeout = float(seconds or 30)
    return Clock(
        timeout=timeout, budget=timeout * INDEX_BUDGET,
        hint=f"${INDEX_TIMEOUT_VAR}={timeout:g} sets it; a command gets {INDEX_BUDGET} times that",
    )  # fmt: skip


def _pypi_answer(
    index: str, dist: str, values: Any, clock: Clock
) -> Callable[[str], tuple[str | None, Status, str]]:
    def answer(current: str) -> tuple[str | None, Status, str]:
        found = releases(index, dist, clock=clock)
        pre = False
        if values.version is not None:
            with contextlib.suppress(InvalidVersion):
                pre = Version(values.version).is_prerelease
        latest = found.latest(pre=pre)
        if latest is None:
            return None, "unknown", "the index lists no release"
        if values.version is None:
            note = ""
            try:
                if values.range and latest not in SpecifierSet(values.range):
                    note = f"latest is outside the range {values.range}"
            except InvalidSpecifier:
                pass
            return str(latest), "floating", note
        try:
            newer = latest > Version(values.version)
        except InvalidVersion:
            return str(latest), "unknown", f"{values.version!r} is not a PEP 440 version"
        return str(latest), "outdated" if newer else "current", ""

    return answer


def _git_answer(
    repo: str, ref: str, values: Any
) -> Callable[[str], tuple[str | None, Status, str]]:
    def answer(current: str) -> tuple[str | None, Status, str]:
        latest = head(repo, ref)
        if values.commit is None:
            return latest, "floating", f"follows {ref}"
        status: Status = "current" if latest == values.commit else "outdated"
        return latest, status, f"track {ref}"

    return answer


def _base_questions(manifest: PinManifest, options: OutdatedOptions) -> Iterable[_Ask]:
    clock = registry_clock()
    for name, spec in manifest.variants.items():
        base = spec.base
        row = Row(
            pin=f"variants.{name}.base", kind="base", source="registry",
            variants=tuple(i.name for i in spec.images()),
            images=tuple(f"{i.name}:production" for i in spec.images()), current=base.tag,
            latest=None, status="unknown", note=base.repository,
        )  # fmt: skip

        def answer(
            current: str, repository: str = base.repository
        ) -> tuple[str | None, Status, str]:
            latest = newest(current, list_tags(repository, clock=clock,
                                               registry=options.base_registry))  # fmt: skip
            if latest is None:
                return None, "unknown", f"{repository}: no tag of the shape of {current}"
            status: Status = "current" if latest == current else "outdated"
            return latest, status, repository

        yield _Ask(
            source="registry", key=(options.base_registry or "", f"{base.repository}:{base.tag}"),
            row=row, answer=answer,
        )  # fmt: skip
