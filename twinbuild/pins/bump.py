"""``twinbuild pins bump``: move one pin in pins/manifest.toml, keeping its comments and layout.

A pin moves on every platform that carries it, so a symmetric pin stays symmetric. Moving one
platform of a symmetric pin needs ``--diverge --reason``; a bump that makes a divergent pin the same
on both platforms again folds the overrides back into one table. The result must load and pass the
manifest lint before anything is written, and the write is atomic.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import tomlkit
from packaging.version import InvalidVersion, Version
from tomlkit.items import InlineTable, Null, Table, Whitespace

from twinbuild.errors import ConfigError, EngineError
from twinbuild.lint.checks import ANY_HEX40, FULL_SHA, HEX_PREFIX, is_placeholder, lint_manifest
from twinbuild.lint.checks import SHA256 as SHA256_HEX
from twinbuild.manifest import url_version
from twinbuild.manifest.loader import load, loads
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    PLATFORMS,
    Kind,
    Manifest,
    Pin,
    Platform,
    Profile,
    ResolvedPin,
)
from twinbuild.pins.diff import rebuild_needed
from twinbuild.pins.upstream import UpstreamCheck, check_commit
from twinbuild.util.atomic import write_atomic

Field = Literal["commit", "version"]
_FITS: dict[Field, tuple[Kind, ...]] = {"commit": ("git",), "version": ("pypi", "url", "apt")}
#: The floating counterpart a new exact value replaces in the same table.
_REPLACES: dict[Field, str] = {"commit": "ref", "version": "range"}


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpRequest:
    name: str
    why: str
    commit: str | None = None
    version: str | None = None
    platform: Platform | None = None
    diverge: bool = False
    reason: str | None = None
    url: str | None = None  # a url pin's new download (default: its url with the version moved)
    sha256: str | None = None  # its sha256 (default: fetched and hashed)

    @property
    def field(self) -> Field:
        return "commit" if self.commit is not None else "version"

    @property
    def value(self) -> str:
        return self.commit if self.commit is not None else (self.version or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpResult:
    path: Path
    pin: str
    moved: dict[Platform, tuple[str, str]]  # platform -> (old, new) as a person reads them
    rebuild: dict[Platform, tuple[Profile, ...]]  # images whose manifest slice changed
    upstream: UpstreamCheck | None
    text: str
    written: bool

    def to_dict(self) -> dict[str, object]:
        """``pins bump --format json``: what moved, what rebuilds (not the manifest's text)."""
        return {
            "manifest": str(self.path), "pin": self.pin, "written": self.written,
            "moved": {p: {"old": old, "new": new} for p, (old, new) in self.moved.items()},
            "rebuild": {p: list(profiles) for p, profiles in self.rebuild.items()},
            "upstream": self.upstream.describe() if self.upstream is not None else None,
        }  # fmt: skip

    def report(self) -> str:
        lines = [f"pins.{self.pin}:"]
        for platform, (old, new) in self.moved.items():
            lines.append(f"  {platform}: {old} -> {new}" if old != new else f"  {platform}: {new}")
        if self.upstream is not None:
            lines.append(f"upstream: {self.upstream.describe()}")
        if self.rebuild:
            lines.append(
                "rebuild: "
                + ", ".join(f"{p} ({', '.join(prof)})" for p, prof in self.rebuild.items())
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
    downloads = plan_downloads(old, request, fetch=fetch)
    new_text = edit(old, request, downloads=downloads)
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
    )


# -- the edit ------------------------------------------------------------------------------------


def edit(
    old: Manifest, request: BumpRequest, *, downloads: Mapping[Platform, Download] | None = None
) -> str:
    """The manifest text after the bump (not yet linted or written); ``downloads``: a url pin's
    new url and sha256 per platform (:func:`plan_downloads`)."""
    pin = _check_request(old, request)
    field = request.field
    carriers = _carriers(old, pin, request)
    doc = tomlkit.parse(old.text)
    table = _pin_table(doc, pin.name)
    one_of_two = request.platform is not None and len(pin.platforms) > 1
    for platform in carriers:
        sub = _sub(table, platform)
        target: Table | InlineTable = table
        if sub is not None and (field in sub or _REPLACES[field] in sub):  # pinned or floating
            target = sub
        elif one_of_two:
            if sub is None:
                sub = tomlkit.table()
                _set(sub, field, request.value)
                sub.add(tomlkit.nl())  # keep the blank line before the next pin
                table[platform] = sub
            target = sub
        _set(target, field, request.value)
        download = (downloads or {}).get(platform)
        if download is not None:
            # beside the url where this platform's table sets one, else where the version went
            home = sub if sub is not None and "url" in sub else target
            home["url"], home["sha256"] = download.url, download.sha256
    if request.diverge:
        table["divergence"] = request.reason or ""
    table["why"] = request.why
    text = tomlkit.dumps(doc)
    moved = _reload(old, text)
    return _tidy(moved, text, pin.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Download:
    """A url pin's new download on one platform."""

    url: str
    sha256: str


def plan_downloads(
    old: Manifest, request: BumpRequest, *, fetch: Callable[[str, str], str] | None = None
) -> dict[Platform, Download]:
    """Where a url pin's ``--version`` bump downloads from, and that file's sha256.

    The url moves with the version (``v1.36.3`` -> ``v1.37.0``) unless ``--url`` names the new
    one; the sha256 is ``--sha256``, else the new file fetched and hashed. The old sha256 never
    stays beside a new url: without a new one the bump is refused. A pin that ``installs`` another
    version than its download's keeps its url (unless ``--url`` moves it).
    """
    pin = _check_request(old, request)
    where = f"{old.where('pins', pin.name)}: pins.{pin.name}"
    resolved = {p: _resolved(old, pin.name, p) for p in pin.platforms}
    carriers = [p for p in _carriers(old, pin, request) if resolved[p].kind == "url"]
    asked = request.url is not None or request.sha256 is not None
    if request.field != "version" or not carriers:
        if asked:
            raise ConfigError(f"{where}: --url and --sha256 move a url pin's download; drop them")
        return {}
    if request.sha256 is not None and not SHA256_HEX.match(request.sha256):
        raise ConfigError(f"{where}: --sha256 '{request.sha256}' is not 64 lower-case hex")
    if pin.installs is not None and request.url is None:
        if request.sha256 is not None:
            raise ConfigError(
                f"{where}: installs {pin.installs!r}: its download stays, and so does its "
                "sha256; pass --url with --sha256 to move the download too"
            )
        return {}
    hasher = fetch or _fetch_hash
    found: dict[str, str] = {}
    out: dict[Platform, Download] = {}
    for platform in carriers:
        values = resolved[platform].values
        old_url, old_version = values.url or "", values.version or ""
        url = request.url or url_version.moved(old_url, old_version, request.value)
        if url is None:
            raise ConfigError(
                f"{where}: its url {old_url} carries no version {old_version!r} to move to "
                f"{request.value}; pass --url NEW_URL (and --sha256 HEX), nothing written"
            )
        if url == old_url and request.sha256 is None:
            out[platform] = Download(url=url, sha256=values.sha256 or "")
            continue
        sha = request.sha256 or found.get(url) or hasher(url, f"pins bump {pin.name}")
        found[url] = sha
        if url != old_url and sha == values.sha256:
            raise ConfigError(
                f"{where}: --sha256 is the old download's ({old_url}); the new url {url} needs "
                "its own checksum, nothing written"
            )
        out[platform] = Download(url=url, sha256=sha)
    if request.sha256 is not None and len({d.url for d in out.values()}) > 1:
        raise ConfigError(
            f"{where}: one --sha256 for {len(out)} different downloads; bump each platform "
            "with --platform P --url URL --sha256 HEX"
        )
    return out


def _fetch_hash(url: str, what: str) -> str:
    from twinbuild.pins.download import sha256_of

    try:
        return sha256_of(url, what=what)
    except EngineError as exc:
        raise EngineError(
            f"{exc}; without the new file's sha256 the url cannot move: pass --sha256 HEX (the "
            "release's published checksum), nothing written"
        ) from None


def _check_request(old: Manifest, request: BumpRequest) -> Pin:
    name = request.name
    if (request.commit is None) == (request.version is None):
        raise ConfigError(f"pins bump {name}: pass exactly one of --commit SHA or --version V")
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
    if request.diverge and (request.platform is None or is_placeholder(request.reason)):
        raise ConfigError(
            f'{where}: --diverge needs --platform P and --reason "why the platforms differ"'
        )
    if request.reason is not None and not request.diverge:
        raise ConfigError(f"{where}: --reason goes with --diverge; add --diverge or drop --reason")
    if request.platform is not None and request.platform not in pin.platforms:
        raise ConfigError(
            f"{where}: not on {request.platform} (platforms = {list(pin.platforms)}); "
            "drop --platform"
        )
    return pin


def _carriers(old: Manifest, pin: Pin, request: BumpRequest) -> list[Platform]:
    """The platforms the bump moves; checks the value against each one's kind."""
    where = f"{old.where('pins', pin.name)}: pins.{pin.name}"
    resolved = {p: _resolved(old, pin.name, p) for p in pin.platforms}
    targets = [request.platform] if request.platform is not None else list(pin.platforms)
    field = request.field
    carriers = [p for p in targets if resolved[p].kind in _FITS[field]]
    if not carriers:
        kind = resolved[targets[0]].kind
        other = "--commit" if kind == "git" else "--version"
        raise ConfigError(f"{where}: a {kind} pin takes {other}, not --{field}")
    if field == "commit":
        _check_commit(where, request.value)
    else:
        _check_version(where, request.value, {resolved[p].kind for p in carriers})
    symmetric = (
        len(pin.platforms) == len(PLATFORMS)
        and len({r.value_key() for r in resolved.values()}) == 1
    )
    if request.platform is not None and symmetric and not request.diverge:
        others = [p for p in pin.platforms if p != request.platform]
        raise ConfigError(
            f"{where}: the same on {', '.join(pin.platforms)}; moving only {request.platform} "
            f"leaves {', '.join(others)} behind: drop --platform to move both, or pass "
            f'--diverge --reason "why they differ"'
        )
    return carriers


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
        except InvalidVersion:
            raise ConfigError(
                f"{where}: '{version}' is not a PEP 440 version; pass an exact one, e.g. 1.2.3"
            ) from None


def _tidy(moved: Manifest, text: str, name: str) -> str:
    """Fold a pin symmetric again into one table; drop a 'floating' that no longer floats."""
    pin = moved.pins[name]
    resolved = [_resolved(moved, name, p) for p in pin.platforms]
    symmetric = len(pin.platforms) == len(PLATFORMS) and len({r.value_key() for r in resolved}) == 1
    fold = symmetric and (pin.overrides or pin.divergence is not None)
    still_floats = any(r.values.ref is not None or r.values.range is not None for r in resolved)
    unfloat = pin.floating is not None and not still_floats
    if not fold and not unfloat:
        return text
    doc = tomlkit.parse(text)
    table = _pin_table(doc, name)
    if fold:
        for platform in PLATFORMS:
            sub = _sub(table, platform)
            if sub is None:
                continue
            for key in list(sub.keys()):
                value = sub[key]
                if table.get(key) == value:
                    continue
                if isinstance(sub, InlineTable):  # its values have no line end of their own
                    value = tomlkit.item(value.unwrap())
                table[key] = value
            del table[platform]
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


def _sub(table: Table, platform: Platform) -> Table | InlineTable | None:
    """The pin's override for ``platform``: a ``[pins.NAME.P]`` table or ``P = { ... }`` inline
    (an inline one was once skipped: the bump then set the pin's own value, which the override
    still hid, and the pin did not move)."""
    sub = table.get(platform)
    return sub if isinstance(sub, Table | InlineTable) else None


def _ends_blank(table: Table) -> bool:
    """Whether the table's own body ends in whitespace (the blank line before the next table)."""
    items = [item for _, item in table.value.body if not isinstance(item, Null)]
    return bool(items) and isinstance(items[-1], Whitespace)


def _set(table: Table | InlineTable, field: Field, value: str) -> None:
    """Set ``field``; an exact value takes the place (and line) of the floating key it replaces."""
    replaced = _REPLACES[field]
    if replaced in table and field not in table:
        # tomlkit has no public rename; _replace keeps the key's position and trailing comment
        table.value._replace(replaced, field, tomlkit.item(value))
        return
    table[field] = value
    if replaced in table:
        del table[replaced]


def _resolved(manifest: Manifest, name: str, platform: Platform) -> ResolvedPin:
    return next(r for r in manifest.resolve(platform) if r.name == name)


def _reload(old: Manifest, text: str) -> Manifest:
    try:
        return loads(text, old.path)
    except ConfigError as exc:
        first = str(exc).split("\n", 1)[0]
        raise ConfigError(
            f"{old.path}: the bump would leave a manifest that does not load, nothing written: "
            f"{first}"
        ) from None


def _moved(old: Manifest, new: Manifest, name: str) -> dict[Platform, tuple[str, str]]:
    out: dict[Platform, tuple[str, str]] = {}
    for platform in new.pins[name].platforms:
        out[platform] = (
            _resolved(old, name, platform).expected(),
            _resolved(new, name, platform).expected(),
        )
    return out
