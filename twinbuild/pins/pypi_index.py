"""A package index's newest release of a distribution: the PyPI side of ``pins outdated``.

The index is asked its simple API page for the project (PEP 691 JSON where it speaks it, the PEP
503 HTML page otherwise) through :mod:`twinbuild.util.exchange`: one deadline, a bounded answer,
https (plain http only to this machine), no redirect followed. A release counts when one of its
files is not yanked; a pre-release only when the pin itself is one. The index is the pin's own
``index``, else ``--index-url``, else the one pip uses (``PIP_INDEX_URL``, else pip's default).
"""

from __future__ import annotations

import html.parser
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from twinbuild.errors import ConfigError, EngineError
from twinbuild.util.exchange import Clock, Request, exchange, loopback

#: The largest project page read (torch's JSON page lists thousands of files in a few MiB).
PAGE_MAX = 64 << 20
_JSON = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{_JSON}, text/html;q=0.1"


def default_index() -> str:
    """The index pip uses: ``PIP_INDEX_URL`` where set, else pip's own default."""
    configured = os.environ.get("PIP_INDEX_URL", "").split()
    if configured:
        return configured[0]
    try:
        # pip's default, named by pip alone; its internals load only when no index is named
        from pip._internal.models.index import PyPI
    except ImportError:
        raise ConfigError(
            "pins outdated: pip is not installed here, so its index is unknown; pass "
            "--index-url URL (a simple API index) or set PIP_INDEX_URL"
        ) from None
    return str(PyPI.simple_url)


@dataclass(frozen=True, slots=True, kw_only=True)
class Releases:
    """What an index lists for one project: every version with a file that is not yanked."""

    project: str
    index: str
    versions: tuple[Version, ...]

    def latest(self, *, pre: bool = False) -> Version | None:
        found = [v for v in self.versions if pre or not v.is_prerelease]
        return max(found) if found else None


def releases(index: str, dist: str, *, clock: Clock) -> Releases:
    """Ask ``index`` for ``dist``'s files; EngineError when it does not answer as an index."""
    project = canonicalize_name(dist.split("[", 1)[0])
    base = index.rstrip("/") + "/"
    url = urljoin(base, f"{project}/")
    parts = urlsplit(url)
    local = loopback(parts.netloc)
    if parts.scheme not in ("https", "http", "file") or (parts.scheme == "http" and not local):
        raise ConfigError(
            f"index {index}: not an https address (plain http only to this machine); pass an "
            "https --index-url"
        )
    what = f"pins outdated {dist}"
    if parts.scheme == "file":
        return _from_file(index, project, unquote(parts.path))
    answer = exchange(
        Request(
            method="GET", url=url, what=what, headers={"Accept": _ACCEPT}, limit=PAGE_MAX,
            limit_note="a project page of the simple API is at most 64 MiB", loopback=local,
            peer="index",
        ),
        clock,
    )  # fmt: skip
    if answer.status == 404:  # the index answered: a row of its own, not an unreachable index
        raise ConfigError(f"{what}: the index {parts.netloc} has no project {project!r}")
    if answer.status != 200:
        raise EngineError(
            f"{what}: the index {parts.netloc} answered {answer.status}: {answer.text()}"
        )
    kind = answer.header("Content-Type").split(";", 1)[0].strip().lower()
    if kind == _JSON:
        files = _json_files(answer.body, what)
    elif kind in ("text/html", "") and _looks_like_html(answer.body):
        files = _html_files(answer.body)
    else:
        raise EngineError(
            f"{what}: the index {parts.netloc} answered something malformed "
            f"({(kind or 'no Content-Type')[:60]!r}, not a simple API page); check --index-url"
        )
    return Releases(project=project, index=index, versions=_versions(project, files))


def _from_file(index: str, project: str, folder: str) -> Releases:
    """A ``file://`` index (a local mirror): its project folder's page, or the files in it."""
    page = Path(folder) / "index.html"
    if page.is_file():
        files = _html_files(page.read_bytes())
    elif Path(folder).is_dir():
        files = [(p.name, False) for p in Path(folder).iterdir()]
    else:
        raise EngineError(f"pins outdated {project}: the index {index} has no project folder")
    return Releases(project=project, index=index, versions=_versions(project, files))


def _json_files(body: bytes, what: str) -> list[tuple[str, bool]]:
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise EngineError(f"{what}: the index answered malformed JSON (no parse)") from None
    entries = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise EngineError(f"{what}: the index answered malformed JSON (no files list)")
    out: list[tuple[str, bool]] = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("filename"), str):
            out.append((entry["filename"], bool(entry.get("yanked"))))
    return out


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[str, bool]] = []
        self._yanked = False
        self._inside = False
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._inside, self._text = True, []
            self._yanked = any(name == "data-yanked" for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        if self._inside:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._inside:
            self._inside = False
            self.files.append(("".join(self._text).strip(), self._yanked))


def _looks_like_html(body: bytes) -> bool:
    """A PEP 503 page: HTML with its anchors (a project without files still has ``<html>``),
    not random bytes an index, a proxy or a captive portal answered with."""
    head = body[:4096].lower()
    return b"<html" in head or b"<!doctype html" in head or b"<a " in body.lower()


def _html_files(body: bytes) -> list[tuple[str, bool]]:
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    return parser.files


def _versions(project: str, files: list[tuple[str, bool]]) -> tuple[Version, ...]:
    found: set[Version] = set()
    for name, yanked in files:
        if yanked:
            continue
        version = _version_of(name)
        if version is not None and version[0] == project:
            found.add(version[1])
    return tuple(sorted(found))


def _version_of(filename: str) -> tuple[str, Version] | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
            return str(name), version
        if filename.endswith((".tar.gz", ".zip")):
            sname, sversion = parse_sdist_filename(filename)
            return str(sname), sversion
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None
