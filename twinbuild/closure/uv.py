"""The resolver: ``uv pip compile``, run the one way twinbuild runs it, and its answer read back.

uv resolves for a Python and platform other than this host's (``--python-version``,
``--python-platform``), writes PEP 751 (``--format pylock.toml``: every file of the chosen version
that platform may install, with its hash) and says which requirement brought each package (its
``requirements.txt`` annotations, from a second run on the cache the first filled). It never
downloads a Python here, reads no user or project configuration, keeps its cache under
twinbuild's, and is bounded: each HTTP request by ``TWINBUILD_LOCK_TIMEOUT`` seconds (default
30; one retry), the whole run by ten times that. How it ends is mapped to one line and an exit
code: a package or version the index lacks or a conflict (:class:`ResolutionFailed`), an index
that does not answer or stalls (:class:`IndexUnreachable`), a resolver killed midway
(:class:`ResolverFailed`).

What the cache may hold back: nothing older than ``TWINBUILD_LOCK_FRESH`` seconds (default
600). A lock run that resolves anything first removes from uv's cache every index page older
than that (:func:`forget_old_pages`; a page lists a project's releases); then each resolution
runs from the cache alone, and only where the cache lacks a page does uv ask the index, for
every page the index's own caching headers no longer call fresh (an index that sends none, like
this machine's, has each asked again). So a release published more than that window before the
run is always seen, one published within it may not be until the window passes or ``--upgrade``
asks again; a cached page that lacks the very release the manifest names is asked afresh at
once (:func:`resolve`). ``--upgrade`` asks the index for every page it moves. uv is handed the
interpreter running twinbuild (``--python``): it builds source distributions for their metadata
only (the target is ``--python-version`` and ``--python-platform``), and left to find one
itself it queried every Python on PATH, which on a machine of pyenv shims took a second and a
half a run, ten times the resolution (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

from twinbuild.errors import ConfigError, IndexUnreachable, ResolutionFailed, ResolverFailed
from twinbuild.util import environ, process
from twinbuild.util.paths import cache_root

DEFAULT_TIMEOUT_S = 30
DEFAULT_FRESH_S = 600
_ROUNDS = 8  # pages asked afresh, one at a time, before a resolution is called failed
#: Environment uv would otherwise read: another index, a config file, a Python download.
_DROPPED = (
    "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_CONSTRAINT",
    "UV_OVERRIDE", "UV_FIND_LINKS", "UV_CONFIG_FILE", "UV_OFFLINE", "UV_NO_CACHE",
    "UV_REFRESH", "UV_REFRESH_PACKAGE", "UV_PYTHON", "UV_EXCLUDE_NEWER",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """One package of uv's answer."""

    name: str
    version: str
    files: tuple[tuple[str, str], ...]  # (file name, sha256)
    via: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """One resolution: what to resolve, for which Python and platform, against which index."""

    requirements: tuple[str, ...]
    python: str
    platform: str
    overrides: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    no_deps: bool = False
    index_url: str | None = None  # None: uv's default index
    extra_index: str | None = None  # a pin's own index, before the default one
    upgrade: bool = False
    upgrade_packages: tuple[str, ...] = ()
    #: From the cache alone, no index asked (:func:`resolve` tries this first).
    offline: bool = False
    #: Asked of the index afresh whatever their cached pages' headers say.
    refresh_packages: tuple[str, ...] = ()
    source: str = "pins/lock"  # the lock file the messages name


def binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        raise ConfigError(
            "uv: not installed; `pip install uv` (twinbuild depends on it: locks/gate.txt)"
        ) from None
    return str(find_uv_bin())


def timeout_s() -> int:
    found = environ.whole("TWINBUILD_LOCK_TIMEOUT", low=1, high=3600, hint="seconds")
    return DEFAULT_TIMEOUT_S if found is None else found


def version() -> str:
    words = process.run([binary(), "--version"], timeout=60).out.split()
    return f"uv {words[1]}" if len(words) >= 2 else "uv"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env.update(
        UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1", UV_HTTP_TIMEOUT=str(timeout_s()),
        UV_HTTP_RETRIES="1", UV_CACHE_DIR=str(cache_root() / "uv"), NO_COLOR="1",
        UV_NO_PROGRESS="1", RUST_LOG="warn",
    )  # fmt: skip
    return env


def _base_args(ask: Ask) -> list[str]:
    args = ["pip", "compile", "--quiet", "--python", sys.executable, "--python-version",
            ask.python, "--python-platform", ask.platform, "--no-header",
            "--no-strip-extras"]  # fmt: skip
    if ask.index_url:
        args += ["--default-index", ask.index_url]
    if ask.extra_index:
        args += ["--index", ask.extra_index]
    if ask.no_deps:
        args.append("--no-deps")
    if ask.offline:
        args.append("--offline")
    return args


def fresh_s() -> int:
    """How old a cached index page may be and still answer a lock run (seconds)."""
    found = environ.whole("TWINBUILD_LOCK_FRESH", low=0, high=86400, hint="seconds")
    return DEFAULT_FRESH_S if found is None else found


def forget_old_pages(now: float | None = None) -> int:
    """Remove from uv's cache every index page older than :func:`fresh_s`; how many went.

    A page lists a project's releases and changes when one is published; a file's metadata,
    kept beside it, never changes (a file is immutable on an index), so it stays."""
    cutoff = (time.time() if now is None else now) - fresh_s()
    gone = 0
    root = cache_root() / "uv"
    for bucket in (*root.glob("simple-v*"), *root.glob("flat-index-v*")):
        for path in bucket.rglob("*"):
            try:
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    gone += 1
            except FileNotFoundError:  # another run removed or replaced it
                continue
    return gone


def resolve(ask: Ask) -> list[Found]:
    """Resolve ``ask``; every package with its files and what brought it.

    From the cache first (its pages younger than :func:`fresh_s`: :func:`forget_old_pages`
    ran before). Where the cache lacks a page, or the data of a release a page lists, the
    index is asked (every page uv's caching rules call stale). Where a cached page lacks the
    release asked for, that one page is asked afresh and the cache tried again, up to
    :data:`_ROUNDS` pages. An upgrade asks the index for every page it moves."""
    if ask.upgrade or ask.upgrade_packages:
        return _online(ask)
    asked: list[str] = []
    while True:
        try:
            return _resolve(replace(ask, offline=True))
        except _Missed:
            return _online(ask)
        except _Lacking as exc:
            if exc.package in asked or len(asked) >= _ROUNDS:
                raise ResolutionFailed(str(exc)) from None
            asked.append(exc.package)
            _refresh_page(ask, exc.package)


def _online(ask: Ask) -> list[Found]:
    """Resolve asking the index; a page fresh by its headers that lacks the release asked for
    is asked again once."""
    try:
        return _resolve(ask)
    except _Lacking as exc:
        if ask.upgrade:
            raise ResolutionFailed(str(exc)) from None
        try:
            return _resolve(replace(ask, refresh_packages=(exc.package,)))
        except _Lacking as again:
            raise ResolutionFailed(str(again)) from None


def _refresh_page(ask: Ask, name: str) -> None:
    """Ask the index for ``name``'s page afresh, into the cache (the answer itself unused)."""
    with tempfile.TemporaryDirectory(prefix="twinbuild-uv-") as work:
        req = _file(Path(work) / "requirements.in", [name])
        one = replace(ask, no_deps=True)
        try:
            _run([*_base_args(one), str(req), "--refresh-package", name, "-o",
                  str(Path(work) / "out.txt")], one)  # fmt: skip
        except ResolutionFailed:
            return  # no release of it fits this platform at all: the page is cached all the same


def _resolve(ask: Ask) -> list[Found]:
    with tempfile.TemporaryDirectory(prefix="twinbuild-uv-") as work:
        folder = Path(work)
        req = _file(folder / "requirements.in", ask.requirements)
        args = [*_base_args(ask), str(req)]
        if ask.overrides:
            args += ["--overrides", str(_file(folder / "overrides.txt", ask.overrides))]
        if ask.constraints:
            args += ["--constraints", str(_file(folder / "constraints.txt", ask.constraints))]
        moving: list[str] = ["--upgrade", "--refresh"] if ask.upgrade else []
        for name in ask.upgrade_packages:
            moving += ["--upgrade-package", name, "--refresh-package", name]
        for name in ask.refresh_packages:
            moving += ["--refresh-package", name]
        out = folder / "pylock.toml"
        _run([*args, *moving, "--generate-hashes", "--format", "pylock.toml", "-o", str(out)], ask)
        found = _read_pylock(out, ask.source)
        if ask.no_deps:
            return found
        # Who brought what: the same resolution, pinned, written as requirements.txt with uv's
        # annotations (on the cache the first run filled: no index is asked again).
        pinned = _file(folder / "pinned.txt", [f"{f.name}=={f.version}" for f in found])
        text_out = folder / "annotated.txt"
        offline = [] if ask.offline else ["--offline"]
        _run([*args, "--constraints", str(pinned), *offline, "--annotation-style", "line",
              "-o", str(text_out)], ask)  # fmt: skip
        via = _read_via(text_out)
        return [
            Found(name=f.name, version=f.version, files=f.files, via=via.get(f.name, ()))
            for f in found
        ]


def _file(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _run(args: list[str], ask: Ask) -> None:
    """Run uv; from the cache alone (``ask.offline``), a release uv skipped because its data
    is not cached is a miss (:class:`_Missed`), never an answer: uv would otherwise resolve
    an older release and say nothing at its default level."""
    limit = timeout_s() * 10
    try:  # a stall past the deadline, or Ctrl-C: uv and whatever it started go together
        done = process.run([binary(), *args], timeout=limit, env=_env(), only_env=True)
    except process.CommandTimedOut:
        raise IndexUnreachable(
            f"{ask.source}: the resolver got no answer from the index within {limit} s; check "
            "the index (--index-url) and the network, or raise TWINBUILD_LOCK_TIMEOUT; the lock "
            "was left as it was"
        ) from None
    code, stderr = done.code, done.err
    if code == 0:
        skipped = _SKIPPED.search(stderr) if ask.offline else None
        if skipped:
            raise _Missed(f"{ask.source}: {skipped.group(0)}", "")
        return
    if code < 0:
        name = signal.Signals(-code).name
        raise ResolverFailed(
            f"{ask.source}: the resolver (uv) was killed by {name} midway; nothing was written, "
            "the lock was left as it was; run `twinbuild lock` again"
        )
    raise _classify(stderr, ask)


_NETWORK = re.compile(
    r"error sending request|dns error|failed to lookup address|Connection refused|"
    r"operation timed out|timed out|Request failed after|connection closed|"
    r"Network connectivity is disabled|tcp connect error",
    re.IGNORECASE,
)


class _Lacking(ResolutionFailed):
    """uv named one package the index, as cached, has no fitting release of."""

    def __init__(self, message: str, package: str) -> None:
        super().__init__(message)
        self.package = package


class _Missed(_Lacking):
    """uv, kept from the index, needed a page or a release's data the cache does not hold."""


_LACKING = re.compile(
    r"Because ([A-Za-z0-9._-]+) was not found in the package registry|"
    r"there is no version of ([A-Za-z0-9._-]+)|"
    r"Because only ([A-Za-z0-9._-]+)\S* is available|"
    r"Because ([A-Za-z0-9._-]+)==\S+ has no wheels with a matching platform"
)
#: What uv says (at its warning level, ``RUST_LOG=warn``) of a release it skipped offline.
_SKIPPED = re.compile(r"`?[A-Za-z0-9._-]+==\S+`? needs to be downloaded from a registry")
_MISSED = re.compile(
    r"was not found in the cache|network was disabled|Network connectivity is disabled|"
    r"needs to be downloaded from a registry"
)
_MISSED_PAGE = re.compile(r"Because ([A-Za-z0-9._-]+) was not found in the cache")
_NOT_FOUND = re.compile(
    r"Because ([A-Za-z0-9._-]+) was not found in the package registry|"
    r"there is no version of ([A-Za-z0-9._-]+)(\S*)|"
    r"Because only ([A-Za-z0-9._-]+)\S* is available"
)


def _classify(stderr: str, ask: Ask) -> Exception:
    text = " ".join(stderr.split())
    cut = text[:600] + (" ..." if len(text) > 600 else "")
    failed = _classified(text, cut, ask)
    if ask.offline and _MISSED.search(text):
        named = _MISSED_PAGE.search(text)
        return _Missed(str(failed), canonicalize_name(named.group(1)) if named else "")
    lacking = _LACKING.search(text)
    if isinstance(failed, ResolutionFailed) and lacking:
        package = canonicalize_name(next(g for g in lacking.groups() if g))
        return _Lacking(str(failed), package)
    return failed


def _classified(text: str, cut: str, ask: Ask) -> Exception:
    if "No solution found" in text or "unsatisfiable" in text:
        missing = _NOT_FOUND.search(text)
        if missing and "incompatible" not in text and "depends on" not in text:
            name = next(g for g in missing.groups() if g)
            return ResolutionFailed(
                f"{ask.source}: the index has no release of {name} that the manifest allows "
                f"({cut}); fix its pin in pins/manifest.toml; the lock was left as it was"
            )
        return ResolutionFailed(
            f"{ask.source}: no closure satisfies the requirements ({cut}); change one of the two "
            "requirements it names in pins/manifest.toml; the lock was left as it was"
        )
    if _NETWORK.search(text):
        where = ask.index_url or ask.extra_index or "the default index"
        return IndexUnreachable(
            f"{ask.source}: the package index {where} did not answer ({cut}); check the index "
            "and the network, then run `twinbuild lock` again; the lock was left as it was"
        )
    return ResolutionFailed(
        f"{ask.source}: the resolver failed ({cut}); fix what it names in pins/manifest.toml; "
        "the lock was left as it was"
    )


def _read_pylock(path: Path, source: str) -> list[Found]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ResolverFailed(
            f"{source}: the resolver's output could not be read ({exc}); run `twinbuild lock` again"
        ) from None
    found = []
    for package in raw.get("packages", []):
        files: list[tuple[str, str]] = []
        sdist = package.get("sdist")
        for entry in [*package.get("wheels", []), *([sdist] if sdist else [])]:
            url = entry.get("url") or entry.get("path") or entry.get("name") or ""
            sha = entry.get("hashes", {}).get("sha256", "")
            files.append((entry.get("name") or unquote(urlsplit(url).path.rsplit("/", 1)[-1]), sha))
        found.append(
            Found(
                name=canonicalize_name(package["name"]),
                version=str(package.get("version", "")),
                files=tuple(sorted(files)),
            )
        )
    return found


_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)(?:\s+#\s*via\s+(.*))?$")


def _read_via(path: Path) -> dict[str, tuple[str, ...]]:
    via: dict[str, tuple[str, ...]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _ENTRY.match(line.strip())
        if not m:
            continue
        names = [w.strip() for w in (m.group(3) or "").split(",")]
        via[canonicalize_name(m.group(1))] = tuple(
            sorted({canonicalize_name(n) for n in names if n and not n.startswith("-")})
        )
    return via
