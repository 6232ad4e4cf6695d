"""``twinbuild pins bump``: move one pin in pins/manifest.toml, keeping its comments and layout.

A pin moves on every variant that carries it, so a symmetric pin stays symmetric: the value is set
in the pin's own table and in every override table (a group's, a variant's, an architecture's)
that sets it. Moving one variant or group of a symmetric pin needs ``--diverge --reason``, which
writes its override table and names it in the divergence; a bump that makes a divergent pin the
same on every variant again folds the overrides back into one table. ``--fetch`` pins a ``url``
pin's sha256 from what its url serves. The result must load and pass the manifest lint before
anything is written, and the write is atomic; the report names every image that moved and every
image that rebuilds.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import tomlkit
from packaging.version import Version
from tomlkit.items import InlineTable, Null, Table, Whitespace

from twinbuild.errors import ConfigError, EngineError
from twinbuild.lint.checks import ANY_HEX40, FULL_SHA, HEX_PREFIX, is_placeholder, lint_manifest
from twinbuild.lint.checks import SHA256 as SHA256_HEX
from twinbuild.manifest import url_version
from twinbuild.manifest.loader import load, loads
from twinbuild.manifest.messages import unknown_name
from twinbuild.manifest.model import (
    ARCH_NAMES,
    DEFAULT_PATH,
    ImageKey,
    Kind,
    Pin,
    PinManifest,
    Profile,
    ResolvedPin,
    Values,
)
from twinbuild.pins.diff import rebuild_needed
from twinbuild.pins.upstream import UpstreamCheck, check_commit
from twinbuild.util.atomic import write_atomic

Field = Literal["commit", "version", "sha256"]
_FITS: dict[Field, tuple[Kind, ...]] = {
    "commit": ("git",), "version": ("pypi", "url", "apt"), "sha256": ("url",),
}  # fmt: skip
#: The floating counterpart a new exact value replaces in the same table.
_REPLACES: dict[Field, str] = {"commit": "ref", "version": "range", "sha256": "sha256"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpRequest:
    name: str
    why: str
    commit: str | None = None
    version: str | None = None
    fetch: bool = False  # pin a url pin's sha256 from what its url serves
    variant: str | None = None  # a variant or group: move only its images
    diverge: bool = False
    reason: str | None = None
    url: str | None = None  # a url pin's new download (default: its url with the version moved)
    sha256: str | None = None  # its sha256 (default: fetched and hashed)

    @property
    def field(self) -> Field:
        if self.fetch:
            return "sha256"
        return "commit" if self.commit is not None else "version"

    @property
    def value(self) -> str:
        return self.commit if self.commit is not None else (self.version or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpResult:
    path: Path
    pin: str
    moved: dict[ImageKey, tuple[str, str]]  # image -> (old, new) as a person reads them
    rebuild: dict[ImageKey, tuple[Profile, ...]]  # images whose manifest slice changed
    upstream: UpstreamCheck | None
    text: str
    written: bool
    manifest: PinManifest  # the manifest after the bump: names the images by variant

    def to_dict(self) -> dict[str, object]:
        """``pins bump --format json``: what moved, what rebuilds (not the manifest's text)."""
        return {
            "manifest": str(self.path), "pin": self.pin, "written": self.written,
            "moved": {i.name: {"old": old, "new": new} for i, (old, new) in self.moved.items()},
            "rebuild": {i.name: list(profiles) for i, profiles in self.rebuild.items()},
            "upstream": self.upstream.describe() if self.upstream is not None else None,
        }  # fmt: skip

    def report(self) -> str:
        lines = [f"pins.{self.pin}:"]
        groups: dict[tuple[str, str], list[ImageKey]] = {}
        for image, delta in self.moved.items():
            groups.setdefault(delta, []).append(image)
        for (old, new), images in groups.items():
            label = self.manifest.label(images)
            lines.append(f"  {label}: {old} -> {new}" if old != new else f"  {label}: {new}")
        if self.upstream is not None:
            lines.append(f"upstream: {self.upstream.describe()}")
        if self.rebuild:
            by: dict[tuple[Profile, ...], list[ImageKey]] = {}
            for image, profiles in self.rebuild.items():
                by.setdefault(profiles, []).append(image)
            lines.append(
                "rebuild: "
                + "; ".join(f"{self.manifest.label(i)} ({', '.join(p)})" for p, i in by.items())
            )
        else:
            lines.append("rebuild: none (no image input changed)")
        if not self.written:
            lines.append(f"dry run: {self.path} left as it was")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpOptions:
    """What ``twinbuild pins bump`` was asked for: the request, where, and whether to write."""

    manifest: Path = DEFAULT_PATH
    upstream: str | None = None  # a local clone or mirror to check the commit against
    dry_run: bool = False  # report, write nothing
    request: BumpRequest


def bump_pin(options: BumpOptions) -> BumpResult:
    """:func:`bump` with the options of ``twinbuild pins bump``."""
    return bump(
        options.manifest, options.request, upstream=options.upstream, write=not options.dry_run
    )


def bump(
    path: Path,
    request: BumpRequest,
    *,
    upstream: str | None = None,
    write: bool = True,
    fetch: Callable[[str, str], str] | None = None,
) -> BumpResult:
    """Move a pin in the manifest at ``path``; refuse (and write nothing) if the result is bad.

    ``fetch(url, what)`` hashes a url pin's new download (default: fetch it and hash it).
    """
    old = load(path)
    found = old.find(request.name)  # `torch_memory_saver` names the pin `torch-memory-saver` too
    if found is not None:
        request = replace(request, name=found.name)
    if request.fetch:
        new_text = edit(old, request, hashes=_fetched(old, request))
    else:
        new_text = edit(old, request, downloads=plan_downloads(old, request, fetch=fetch))
    new = _reload(old, new_text)
    findings = lint_manifest(new).findings
    if findings:
        listed = "\n".join(f"  {f}" for f in findings)
        raise ConfigError(
            f"{path}: pins.{request.name}: the bump would fail the lint, nothing written:\n{listed}"
        )
    checked = None
    if upstream is not None:
        if request.commit is None:
            raise ConfigError(
                f"pins.{request.name}: --upstream checks a commit; drop it for --version"
            )
        checked = check_commit(upstream, request.value, pin=request.name)
    if write:
        write_atomic(path, new_text)
    return BumpResult(
        path=path,
        pin=request.name,
        moved=_moved(old, new, request.name),
        rebuild=rebuild_needed(old, new),
        upstream=checked,
        text=new_text,
        written=write,
        manifest=new,
    )


# -- the edit ------------------------------------------------------------------------------------


def edit(
    old: PinManifest,
    request: BumpRequest,
    *,
    hashes: dict[str, str] | None = None,
    downloads: Mapping[ImageKey, Download] | None = None,
) -> str:
    """The manifest text after the bump (not yet linted or written). ``hashes`` (``--fetch``)
    maps each url the pin names to the sha256 of what it served; ``downloads``: a url pin's new
    url and sha256 per image (:func:`plan_downloads`)."""
    pin = _check_request(old, request)
    field = request.field
    targets = _targets(old, pin, request)
    doc = tomlkit.parse(old.text)
    table = _pin_table(doc, pin.name)
    if hashes is not None:
        _set_hashes(old, pin, table, hashes)
    elif request.variant is not None and request.diverge:
        sub = _sub(table, request.variant)
        if sub is None:
            sub = tomlkit.table()
            table[request.variant] = sub
        _set(sub, field, request.value)
        download = next(iter((downloads or {}).values()), None)
        if download is not None:
            sub["url"], sub["sha256"] = download.url, download.sha256
            if download.path is not None:
                sub["path"] = download.path
        if not _ends_blank(table):
            table.add(tomlkit.nl())  # keep the blank line before the next pin
        reasons = dict(pin.divergence or {})
        reasons[request.variant] = request.reason or ""
        table["divergence"] = _inline(reasons)
    else:
        holders = _holders(old, pin, field, targets)
        if request.variant is not None and None in holders:
            everyone = old.images(pin.variants)
            sharing = [
                i for i in everyone if i not in targets and None in _holders(old, pin, field, [i])
            ]
            if sharing:
                raise ConfigError(
                    f"{old.where('pins', pin.name)}: pins.{pin.name}: its {field} is shared with "
                    f"{old.label(sharing)}; moving only {request.variant} needs --diverge "
                    '--reason "why it differs"'
                )
        for selector in holders:
            holder = table if selector is None else _sub(table, selector)
            if holder is not None:
                _set(holder, field, request.value)
        for image, download in (downloads or {}).items():
            # beside the url where an override of this image sets one, else in the pin's table
            where = _holder(pin, old.selectors(image), "url")
            home = table if where is None else _sub(table, where)
            if home is not None:
                home["url"], home["sha256"] = download.url, download.sha256
            at = _holder(pin, old.selectors(image), "path")
            held = table if at is None else _sub(table, at)
            if download.path is not None and held is not None:
                held["path"] = download.path
    _move_installs(pin, table, request)
    table["why"] = request.why
    text = tomlkit.dumps(doc)
    moved = _reload(old, text)
    return _tidy(moved, text, pin.name)


def _inline(values: dict[str, str]) -> InlineTable:
    inline = tomlkit.inline_table()
    inline.update(values)
    return inline


def _holders(old: PinManifest, pin: Pin, field: Field, targets: list[ImageKey]) -> list[str | None]:
    """The tables to set ``field`` in so every target image takes the new value: the topmost
    table that sets it (or its floating counterpart) for each image; the pin's own table (None)
    where no override does."""
    out: list[str | None] = []
    for image in targets:
        holder: str | None = None
        for selector in old.selectors(image):
            values = pin.overrides.get(selector)
            if values is not None and (
                getattr(values, field) is not None or getattr(values, _REPLACES[field]) is not None
            ):
                holder = selector
        if holder not in out:
            out.append(holder)
    return out


def _holder(pin: Pin, selectors: tuple[str, ...], key: Literal["url", "path"]) -> str | None:
    """The topmost override of ``selectors`` that sets the pin's ``key`` (None: the pin's
    table)."""
    holder: str | None = None
    for selector in selectors:
        values = pin.overrides.get(selector)
        if values is not None and getattr(values, key) is not None:
            holder = selector
    return holder


def _move_installs(pin: Pin, table: Table, request: BumpRequest) -> None:
    """An ``installs`` note names the version it installs: it moves with it."""
    if pin.installs is None or request.field != "version":
        return
    old = {pin.common.version, *(v.version for v in pin.overrides.values())} - {None}
    text = pin.installs
    for version in sorted(v for v in old if v is not None):
        text = url_version.moved(text, version, request.value) or text
    if text != pin.installs:
        table["installs"] = text


def _fetched(old: PinManifest, request: BumpRequest) -> dict[str, str]:
    """``--fetch``: the sha256 of every url the pin names on any of its images."""
    from twinbuild.pins.download import sha256_of  # the HTTP client only for a url pin's hash

    pin = _check_request(old, request)
    urls: dict[str, str] = {}
    for image in _targets(old, pin, request):
        url = _resolved(old, pin.name, image).values.url
        if url and url not in urls:
            urls[url] = sha256_of(url, what=f"pins.{pin.name}")
    return urls


def _set_hashes(old: PinManifest, pin: Pin, table: Table, hashes: dict[str, str]) -> None:
    """Write each url's sha256 into the table that names that url."""
    for selector in (None, *pin.overrides):
        values = pin.common if selector is None else pin.overrides[selector]
        holder = table if selector is None else _sub(table, selector)
        if values.url is not None and values.url in hashes and holder is not None:
            holder["sha256"] = hashes[values.url]


@dataclass(frozen=True, slots=True, kw_only=True)
class Download:
    """A url pin's new download on one image; ``path`` where the file goes, when its name
    says the version too (None: it stays)."""

    url: str
    sha256: str
    path: str | None = None


def _moved_path(values: Values, new: str) -> str | None:
    """The pin's path with the version its file name says moved to ``new``; None when the file
    name says none."""
    if values.path is None or values.version is None:
        return None
    if values.version not in url_version.file_versions(values.path):
        return None
    return url_version.moved(values.path, values.version, new)


def plan_downloads(
    old: PinManifest, request: BumpRequest, *, fetch: Callable[[str, str], str] | None = None
) -> dict[ImageKey, Download]:
    """Where a url pin's ``--version`` bump downloads from, and that file's sha256.

    The url moves with the version (``v1.36.3`` -> ``v1.37.0``) unless ``--url`` names the new
    one; the sha256 is ``--sha256``, else the new file fetched and hashed. The old sha256 never
    stays beside a new url: without a new one the bump is refused. A pin that ``installs`` another
    version than its download's keeps its url (unless ``--url`` moves it).
    """
    pin = _check_request(old, request)
    where = f"{old.where('pins', pin.name)}: pins.{pin.name}"
    asked = request.url is not None or request.sha256 is not None
    if request.field != "version":
        if asked:
            raise ConfigError(f"{where}: --url and --sha256 move a url pin's download; drop them")
        return {}
    resolved = {i: _resolved(old, pin.name, i) for i in old.images(pin.variants)}
    carriers = [i for i in _targets(old, pin, request) if resolved[i].kind == "url"]
    if not carriers:
        if asked:
            raise ConfigError(f"{where}: --url and --sha256 move a url pin's download; drop them")
        return {}
    if request.sha256 is not None and not SHA256_HEX.match(request.sha256):
        raise ConfigError(f"{where}: --sha256 '{request.sha256}' is not 64 lower-case hex")
    if pin.installs is not None and request.url is None:
        for image in carriers:
            values = resolved[image].values
            named = url_version.file_versions(values.url or "")
            if named:  # the file is of a version; installs explains only the rest of the url
                raise ConfigError(
                    f"{where}: its url's file name {url_version.file_name(values.url or '')!r} "
                    f"says {', '.join(named)}, and installs says the rest of the url is not the "
                    f"version, so where {request.value} is downloaded from cannot be guessed: "
                    "pass --url NEW_URL (and --sha256 HEX), nothing written"
                )
        if request.sha256 is not None:
            raise ConfigError(
                f"{where}: installs {pin.installs!r}: its download stays, and so does its "
                "sha256; pass --url with --sha256 to move the download too"
            )
        return {}
    hasher = fetch or _fetch_hash
    found: dict[str, str] = {}
    out: dict[ImageKey, Download] = {}
    for image in carriers:
        values = resolved[image].values
        old_url, old_version = values.url or "", values.version or ""
        url = request.url or url_version.moved(old_url, old_version, request.value)
        if url is None:
            raise ConfigError(
                f"{where}: its url {old_url} carries no version {old_version!r} to move to "
                f"{request.value}; pass --url NEW_URL (and --sha256 HEX), nothing written"
            )
        if url == old_url and request.sha256 is None:
            out[image] = Download(
                url=url, sha256=values.sha256 or "", path=_moved_path(values, request.value)
            )
            continue
        sha = request.sha256 or found.get(url) or hasher(url, f"pins bump {pin.name}")
        found[url] = sha
        if url != old_url and sha == values.sha256:
            raise ConfigError(
                f"{where}: --sha256 is the old download's ({old_url}); the new url {url} needs "
                "its own checksum, nothing written"
            )
        out[image] = Download(url=url, sha256=sha, path=_moved_path(values, request.value))
    if request.sha256 is not None and len({d.url for d in out.values()}) > 1:
        raise ConfigError(
            f"{where}: one --sha256 for {len({d.url for d in out.values()})} different downloads; "
            "bump each variant "
            "with --variant V --url URL --sha256 HEX"
        )
    return out


def _fetch_hash(url: str, what: str) -> str:
    from twinbuild.pins.download import sha256_of  # the HTTP client only for a url pin's hash

    try:
        return sha256_of(url, what=what)
    except EngineError as exc:
        raise EngineError(
            f"{exc}; without the new file's sha256 the url cannot move: pass --sha256 HEX (the "
            "release's published checksum), nothing written"
        ) from None


def _check_request(old: PinManifest, request: BumpRequest) -> Pin:
    name = request.name
    given = sum(x for x in (request.commit is not None, request.version is not None, request.fetch))
    if given != 1:
        raise ConfigError(
            f"pins bump {name}: pass exactly one of --commit SHA, --version V or --fetch"
        )
    pin = old.find(name)
    if pin is None:
        close = difflib.get_close_matches(name, list(old.pins), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else "; twinbuild pins table lists them"
        raise ConfigError(f"{old.path}: no pin named '{name}'{hint}")
    where = f"{old.where('pins', name)}: pins.{name}"
    if is_placeholder(request.why):
        raise ConfigError(
            f"{where}: --why '{request.why}' says nothing; give the new pin's provenance "
            "(PR, release, merge commit)"
        )
    if request.diverge and (request.variant is None or is_placeholder(request.reason)):
        raise ConfigError(f'{where}: --diverge needs --variant NAME and --reason "why it differs"')
    if request.diverge and request.fetch:
        raise ConfigError(f"{where}: --fetch pins what the urls serve; it does not diverge")
    if request.reason is not None and not request.diverge:
        raise ConfigError(f"{where}: --reason goes with --diverge; add --diverge or drop --reason")
    if request.variant is not None:
        members = old.members(request.variant)
        if not members:
            known = (*old.variants, *old.groups)
            raise ConfigError(
                f"{where}: --variant: {unknown_name('variant or group', request.variant, known)}"
            )
        if not set(members) & set(pin.variants):
            raise ConfigError(
                f"{where}: not on {request.variant} (variants = {list(pin.variants)}); "
                "drop --variant"
            )
    return pin


def _targets(old: PinManifest, pin: Pin, request: BumpRequest) -> list[ImageKey]:
    """The images the bump moves; checks the value against each one's kind."""
    where = f"{old.where('pins', pin.name)}: pins.{pin.name}"
    images = list(old.images(pin.variants))
    wanted = old.members(request.variant) if request.variant is not None else pin.variants
    targets = [i for i in images if i.variant in wanted]
    field = request.field
    resolved = {i: _resolved(old, pin.name, i) for i in images}
    fitting = [i for i in targets if resolved[i].kind in _FITS[field]]
    if not fitting:
        kind = resolved[targets[0]].kind
        other = {"git": "--commit", "url": "--version or --fetch"}.get(kind, "--version")
        flag = "--fetch" if field == "sha256" else f"--{field}"
        raise ConfigError(f"{where}: a {kind} pin takes {other}, not {flag}")
    if field == "commit":
        _check_commit(where, request.value)
    elif field == "version":
        _check_version(where, request.value, {resolved[i].kind for i in fitting})
    others = [i for i in images if i.variant not in wanted]
    symmetric = bool(others) and all(
        resolved[o].value_key() == resolved[t].value_key()
        for o in others
        for t in fitting
        if o.arch == t.arch
    )
    if request.variant is not None and symmetric and not request.diverge and field != "sha256":
        left = sorted({o.variant for o in others})
        raise ConfigError(
            f"{where}: the same on every variant; moving only {request.variant} leaves "
            f"{', '.join(left)} behind: drop --variant to move them all, or pass "
            f'--diverge --reason "why they differ"'
        )
    return fitting


def _check_commit(where: str, commit: str) -> None:
    if FULL_SHA.match(commit):
        return
    if ANY_HEX40.match(commit):
        raise ConfigError(f"{where}: '{commit}' has upper-case hex; pass it in lower case")
    if HEX_PREFIX.match(commit.lower()):
        raise ConfigError(
            f"{where}: '{commit}' is a short SHA; pass the full 40-hex commit "
            f"(git rev-parse {commit} in a clone)"
        )
    raise ConfigError(
        f"{where}: '{commit}' is not a commit SHA (a branch or tag moves); "
        "pass the full 40-hex merge commit"
    )


def _check_version(where: str, version: str, kinds: set[Kind]) -> None:
    if not version.strip() or any(c.isspace() for c in version):
        raise ConfigError(f"{where}: '{version}' is not a version; pass an exact one, e.g. 1.2.3")
    if kinds & {"pypi", "url"}:
        try:
            Version(version)
        except ValueError:  # InvalidVersion, or a number over Python's 4,300 digits
            raise ConfigError(
                f"{where}: '{version}' is not a PEP 440 version; pass an exact one, e.g. 1.2.3"
            ) from None


def _tidy(moved: PinManifest, text: str, name: str) -> str:
    """Fold a pin symmetric again into one table; drop a 'floating' that no longer floats."""
    pin = moved.pins[name]
    images = moved.images(pin.variants)
    resolved = {i: _resolved(moved, name, i) for i in images}
    by_arch: dict[str, set[tuple[str | None, ...]]] = {}
    for image, r in resolved.items():
        by_arch.setdefault(image.arch, set()).add(r.value_key())
    symmetric = all(len(keys) == 1 for keys in by_arch.values())
    shared = [s for s in pin.overrides if s not in ARCH_NAMES.values()]
    fold = symmetric and (bool(shared) or pin.divergence is not None)
    still_floats = any(
        r.values.ref is not None or r.values.range is not None or r.values.sha256 == ""
        for r in resolved.values()
    )
    unfloat = pin.floating is not None and not still_floats
    if not fold and not unfloat:
        return text
    doc = tomlkit.parse(text)
    table = _pin_table(doc, name)
    if fold:
        for selector in shared:
            sub = _sub(table, selector)
            if sub is None:
                continue
            for key in list(sub.keys()):
                value = sub[key]
                if table.get(key) == value:
                    continue
                if isinstance(sub, InlineTable):  # its values have no line end of their own
                    value = tomlkit.item(value.unwrap())
                table[key] = value
            del table[selector]
        if "divergence" in table:
            del table["divergence"]
        if not _ends_blank(table):
            table.add(tomlkit.nl())
    if unfloat:
        del table["floating"]
    out = tomlkit.dumps(doc)
    if fold:
        out = _value_after_kind(out, name)
    # The blank line added after a folded table is not wanted when that table ends the file.
    return out if text.endswith("\n\n") else re.sub(r"\n+\Z", "\n", out)


def _key_lines(lines: list[str], start: int, end: int) -> dict[str, int]:
    return {
        line.split(" = ", 1)[0]: i
        for i, line in enumerate(lines[start:end], start)
        if " = " in line
    }


def _value_after_kind(text: str, name: str) -> str:
    """A folded table got its version (or commit) last; Renovate's managers read a pin where
    its table opens (twinbuild.lint.renovate_layout): move that line up, after kind and dist,
    or after repo for a commit."""
    lines = text.split("\n")
    header = f"[pins.{name}]"
    if header not in lines:
        return text
    start = lines.index(header) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("[")), len(lines))
    keys = _key_lines(lines, start, end)
    for value, after in (("version", ("dist", "kind")), ("range", ("dist", "kind")),
                         ("commit", ("repo",))):  # fmt: skip
        anchor = next((keys[a] for a in after if a in keys), None)
        if value not in keys or anchor is None or keys[value] == anchor + 1:
            continue
        moved = lines.pop(keys[value])
        at = anchor + 1 if keys[value] > anchor else anchor
        lines.insert(at, moved)
        keys = _key_lines(lines, start, end)
    return "\n".join(lines)


# -- tomlkit and model helpers -------------------------------------------------------------------


def _pin_table(doc: Any, name: str) -> Table:
    table = doc["pins"][name]
    if not isinstance(table, Table):  # the loader accepted it, so only an inline table gets here
        raise ConfigError(f"pins.{name}: write it as a [pins.{name}] table to let bump edit it")
    return table


def _sub(table: Table, selector: str) -> Table | InlineTable | None:
    """The pin's override for ``selector``: a ``[pins.NAME.S]`` table or ``S = { ... }`` inline
    (an inline one was once skipped: the bump then set the pin's own value, which the override
    still hid, and the pin did not move)."""
    sub = table.get(selector)
    return sub if isinstance(sub, Table | InlineTable) else None


def _ends_blank(table: Table) -> bool:
    """Whether the table's own body ends in whitespace (the blank line before the next table)."""
    items = [item for _, item in table.value.body if not isinstance(item, Null)]
    return bool(items) and isinstance(items[-1], Whitespace)


def _set(table: Table | InlineTable, field: Field, value: str) -> None:
    """Set ``field``; an exact value takes the place (and line) of the floating key it replaces."""
    replaced = _REPLACES[field]
    if replaced != field and replaced in table and field not in table:
        # tomlkit has no public rename; _replace keeps the key's position and trailing comment
        table.value._replace(replaced, field, tomlkit.item(value))
        return
    table[field] = value
    if replaced != field and replaced in table:
        del table[replaced]


def _resolved(manifest: PinManifest, name: str, image: ImageKey) -> ResolvedPin:
    return next(r for r in manifest.resolve(image) if r.name == name)


def _reload(old: PinManifest, text: str) -> PinManifest:
    try:
        return loads(text, old.path)
    except ConfigError as exc:
        first = str(exc).split("\n", 1)[0]
        raise ConfigError(
            f"{old.path}: the bump would leave a manifest that does not load, nothing written: "
            f"{first}"
        ) from None


def _moved(old: PinManifest, new: PinManifest, name: str) -> dict[ImageKey, tuple[str, str]]:
    out: dict[ImageKey, tuple[str, str]] = {}
    for image in new.images(new.pins[name].variants):
        out[image] = (
            _resolved(old, name, image).expected(),
            _resolved(new, name, image).expected(),
        )
    return out
