"""Compare what an image holds (the collector's JSON) with what the manifest pins, pin by pin.

Pure functions over data: no container, no engine. Every failure message names the pin (with its
manifest line), the expected value and the value found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from twinbuild.manifest.model import ResolvedPin
from twinbuild.util import exact_pin

Outcome = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dist:
    name: str
    version: str
    direct_url: Mapping[str, Any] | None
    location: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkout:
    commit: str | None
    ref: str | None
    error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Collected:
    """What the collector found in one image (or on one host)."""

    python: str
    dists: Mapping[str, Dist]  # canonical name -> the first on sys.path (the one Python imports)
    checkouts: Mapping[str, Checkout] = field(default_factory=dict)
    files: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)  # sha, error
    apt: Mapping[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Collected:
        dists: dict[str, Dist] = {}
        for row in data.get("distributions") or []:
            key = canonicalize_name(str(row["name"]))
            direct = row.get("direct_url")
            dists.setdefault(
                key,
                Dist(
                    name=str(row["name"]),
                    version=str(row["version"]),
                    direct_url=direct if isinstance(direct, dict) else None,
                    location=str(row.get("location") or ""),
                ),
            )
        return cls(
            python=str(data.get("python") or ""),
            dists=dists,
            checkouts={
                p: Checkout(commit=c.get("commit"), ref=c.get("ref"), error=c.get("error"))
                for p, c in (data.get("checkouts") or {}).items()
            },
            files={
                p: (f.get("sha256"), f.get("error")) for p, f in (data.get("files") or {}).items()
            },
            apt=dict(data.get("apt") or {}),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PinResult:
    pin: str
    outcome: Outcome
    message: str
    holds: str | None = None  # what the image really holds: version or commit


def request_for(pins: Iterable[ResolvedPin]) -> dict[str, list[str]]:
    """What the collector must look at beyond the distributions: checkouts, files, apt packages."""
    checkouts: list[str] = []
    files: list[str] = []
    apt: list[str] = []
    for pin in pins:
        if pin.install == "checkout" and pin.values.path:
            checkouts.append(pin.values.path)
        elif pin.install == "file" and pin.values.path:
            files.append(pin.values.path)
        elif pin.install == "apt":
            apt.append(pin.values.package or pin.name)
    return {"checkouts": checkouts, "files": files, "apt": apt}


def is_floating(pin: ResolvedPin) -> bool:
    return (
        pin.floating is not None
        or pin.values.range is not None
        or (pin.kind == "git" and not pin.values.commit)
    )


def check_pin(pin: ResolvedPin, found: Collected, *, where: str = "") -> PinResult:
    """One pin against the image. ``where`` is the manifest path, for ``path:line`` in messages."""
    prefix = f"{where}:{pin.line}: pin {pin.name}" if where else f"pin {pin.name}"
    if pin.install == "checkout":
        return _checkout(pin, found, prefix)
    if pin.install == "file":
        return _file(pin, found, prefix)
    if pin.install == "apt":
        return _apt(pin, found, prefix)
    return _dist(pin, found, prefix)


def _result(
    pin: ResolvedPin, prefix: str, expected: str, got: str | None, holds: str | None
) -> PinResult:
    """Pass when ``got`` is None (nothing wrong), else fail with expected and found."""
    if got is None:
        note = f" (floating: holds {holds})" if is_floating(pin) and holds else ""
        return PinResult(
            pin=pin.name, outcome="passed", message=f"{prefix}: {expected}{note}", holds=holds
        )
    return PinResult(
        pin=pin.name,
        outcome="failed",
        message=f"{prefix}: expected {expected}, found {got}",
        holds=holds,
    )


def _dist(pin: ResolvedPin, found: Collected, prefix: str) -> PinResult:
    name = (
        (pin.values.dist or pin.name).split("[", 1)[0].strip()
    )  # "httpx[http2]": extras are no name
    dist = found.dists.get(canonicalize_name(name))
    if pin.kind == "git":
        expected = (
            f"{name} at commit {pin.values.commit}"
            if pin.values.commit
            else f"{name} from {pin.values.repo}@{pin.values.ref}"
        )
    elif pin.kind == "url" and pin.values.version is None:
        expected = f"{name} from {pin.values.url} (sha256 {pin.values.sha256})"
    elif pin.values.version is not None:
        expected = f"{name}=={pin.values.version}"
    else:
        expected = (
            f"{name}{pin.values.range or ''} (floating)"
            if pin.values.range
            else f"{name} (unpinned)"
        )
    if dist is None:
        return _result(pin, prefix, expected, f"no distribution {name} installed", None)
    if pin.kind == "git":
        return _git_dist(pin, dist, prefix, expected)
    if pin.kind == "url" and pin.values.version is None:
        return _url_dist(pin, dist, prefix, expected)
    if pin.values.version is not None:
        same = _same_version(dist.version, pin.values.version)
        return _result(
            pin, prefix, expected, None if same else f"{dist.name} {dist.version}", dist.version
        )
    if pin.values.range:
        try:
            spec = SpecifierSet(pin.values.range)
        except InvalidSpecifier:
            return _result(
                pin, prefix, expected, f"{dist.version}; the range is not PEP 440", dist.version
            )
        ok = spec.contains(dist.version, prereleases=True)
        return _result(
            pin, prefix, expected, None if ok else f"{dist.name} {dist.version}", dist.version
        )
    return _result(pin, prefix, expected, None, dist.version)


def _git_dist(pin: ResolvedPin, dist: Dist, prefix: str, expected: str) -> PinResult:
    direct = dist.direct_url
    if direct is None:
        got = f"{dist.name} {dist.version} without direct_url.json (not installed from git)"
        return _result(pin, prefix, expected, got, dist.version)
    vcs = direct.get("vcs_info")
    if not isinstance(vcs, dict) or not vcs.get("commit_id"):
        got = f"{dist.name} {dist.version} installed from {direct.get('url')}, not from git"
        return _result(pin, prefix, expected, got, dist.version)
    commit = str(vcs["commit_id"])
    if pin.values.commit is None:  # a branch or tag: record what it resolved to
        return _result(pin, prefix, expected, None, commit)
    return _result(
        pin, prefix, expected, None if commit == pin.values.commit else f"commit {commit}", commit
    )


def _url_dist(pin: ResolvedPin, dist: Dist, prefix: str, expected: str) -> PinResult:
    direct = dist.direct_url or {}
    archive = direct.get("archive_info")
    hashes: dict[str, str] = {}
    if isinstance(archive, dict):
        hashes.update({str(k): str(v) for k, v in (archive.get("hashes") or {}).items()})
        algo, _, value = str(archive.get("hash") or "").partition("=")
        if value:
            hashes.setdefault(algo, value)
    sha = hashes.get("sha256")
    if sha is None:
        got = f"{dist.name} {dist.version} with no recorded archive sha256 (direct_url.json)"
        return _result(pin, prefix, expected, got, dist.version)
    return _result(
        pin, prefix, expected, None if sha == pin.values.sha256 else f"sha256 {sha}", dist.version
    )


def _same_version(found: str, pinned: str) -> bool:
    # The build's verify_pins.py applies the very same rule (local labels: see exact_pin).
    return exact_pin.matches(pinned, found)


def _checkout(pin: ResolvedPin, found: Collected, prefix: str) -> PinResult:
    path = pin.values.path or ""
    expected = (
        f"commit {pin.values.commit} at {path}"
        if pin.values.commit
        else f"{pin.values.repo}@{pin.values.ref} at {path}"
    )
    seen = found.checkouts.get(path)
    if seen is None or seen.commit is None:
        why = seen.error if seen is not None and seen.error else f"{path}: not collected"
        return _result(pin, prefix, expected, f"no checkout ({why})", None)
    via = f" (HEAD -> {seen.ref})" if seen.ref else ""
    if pin.values.commit is None:
        return _result(pin, prefix, expected, None, seen.commit)
    wrong = None if seen.commit == pin.values.commit else f"commit {seen.commit}{via}"
    return _result(pin, prefix, expected, wrong, seen.commit)


def _file(pin: ResolvedPin, found: Collected, prefix: str) -> PinResult:
    path = pin.values.path or ""
    expected = f"sha256 {pin.values.sha256} at {path}"
    sha, error = found.files.get(path, (None, f"{path}: not collected"))
    if sha is None:
        return _result(pin, prefix, expected, f"no file ({error})", None)
    return _result(
        pin, prefix, expected, None if sha == pin.values.sha256 else f"sha256 {sha}", sha
    )


def _apt(pin: ResolvedPin, found: Collected, prefix: str) -> PinResult:
    package = pin.values.package or pin.name
    version = found.apt.get(package)
    expected = f"{package}={pin.values.version}" if pin.values.version else f"{package} (floating)"
    if version is None:
        return _result(pin, prefix, expected, f"{package} not installed", None)
    wrong = (
        None
        if pin.values.version is None or version == pin.values.version
        else f"{package} {version}"
    )
    return _result(pin, prefix, expected, wrong, version)


def check_base(
    *, expected: str, labels: Mapping[str, str], layers: list[str], base_layers: list[str] | None
) -> tuple[bool, str]:
    """Does the image descend from the pinned base? (ok, message naming expected and found).

    With the base in the engine, its layers must open the image's layers; without it, the label
    ``org.twinbuild.base-digest`` must name it.
    """
    if base_layers:
        if layers[: len(base_layers)] == base_layers:
            return True, f"image layers start with the {len(base_layers)} layers of {expected}"
        first = layers[0] if layers else "(none)"
        return False, (
            f"base: expected the image's layers to start with the {len(base_layers)} layers of "
            f"{expected}, found first layer {first}"
        )
    label = labels.get("org.twinbuild.base-digest")
    if label is None:
        return False, f"base: expected label org.twinbuild.base-digest={expected}, found no label"
    if label != expected:
        return False, f"base: expected label org.twinbuild.base-digest={expected}, found {label}"
    return True, f"label org.twinbuild.base-digest={label}"
