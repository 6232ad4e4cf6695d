"""The base image's own installed set, captured by digest into ``pins/lock/base/<image>.toml``.

A production base (lmsysorg/sglang, rocm/sgl-dev) brings hundreds of distributions the layers
build on; the lock takes them as constraints and marks them as the base's. Where the base can be
pulled, what ``importlib.metadata`` and ``dpkg-query`` list in it (run by digest, without
network) goes into that file (``twinbuild base capture``, ``engine/base_capture.py``); a base
digest bump makes the capture stale (its ``image`` names the digest). The embedded base's
capture is per machine and lives in the cache, never here. Where a production base cannot be
pulled, no capture exists: the lock says so and names the command to run where it can.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from twinbuild.closure.lockfile import LOCK_DIR
from twinbuild.errors import ConfigError, LockInvalid
from twinbuild.util import bounded

CAPTURE_DIR = LOCK_DIR / "base"


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseCapture:
    image: str  # the reference captured, with its digest
    digest: str  # sha256 of the capture file
    dists: dict[str, str]  # normalised name -> version
    apt: dict[str, str]  # package -> version
    #: normalised name -> the PEP 610 commit of a distribution installed from git
    commits: dict[str, str] = field(default_factory=dict)


def capture_path(root: Path, image: str) -> Path:
    return root / CAPTURE_DIR / f"{image}.toml"


def capture_command(image: str, base_ref: str) -> str:
    """What to do where ``base_ref`` can be pulled, for a note or a finding."""
    variant, _, arch = image.rpartition("-")
    return (
        f"where {base_ref} can be pulled run `twinbuild base capture --variant {variant} --arch "
        f"linux/{arch}` (it writes {CAPTURE_DIR}/{image}.toml), then `twinbuild lock`"
    )


def read_capture(path: Path) -> BaseCapture | None:
    """The capture at ``path``; None where there is none."""
    if not (path.is_file() or path.is_symlink()):
        return None
    try:
        data = bounded.read_bytes(path, limit=8 << 20, what="base capture")
        text = bounded.decode(data, source=str(path), what="base capture")
        raw: dict[str, Any] = bounded.parse(
            lambda: tomllib.loads(text), source=str(path), what="base capture"
        )
    except tomllib.TOMLDecodeError as exc:
        raise LockInvalid(
            f"{path}: not valid TOML ({exc}); capture the base again (docs/pins.md, 'The base's "
            "closure')"
        ) from None
    except ConfigError as exc:
        raise LockInvalid(str(exc)) from None
    head = raw.get("capture")
    if not isinstance(head, dict) or not isinstance(head.get("image"), str):
        raise LockInvalid(f"{path}: capture.image: missing; capture the base again "
                          "(docs/pins.md, 'The base's closure')")  # fmt: skip
    return BaseCapture(
        image=head["image"],
        digest="sha256:" + hashlib.sha256(data).hexdigest(),
        dists=_pairs(raw, "dist", "name", path, normalise=True),
        apt=_pairs(raw, "apt", "package", path, normalise=False),
        commits=_commits(raw, path),
    )


def _commits(raw: dict[str, Any], path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in raw.get("dist", []):
        commit = entry.get("commit") if isinstance(entry, dict) else None
        if commit is None:
            continue
        if not isinstance(commit, str):
            raise LockInvalid(f"{path}: dist {entry.get('name')!r}: commit is not a string")
        out[canonicalize_name(str(entry.get("name")))] = commit
    return out


def _pairs(
    raw: dict[str, Any], key: str, name_key: str, path: Path, *, normalise: bool
) -> dict[str, str]:
    out: dict[str, str] = {}
    entries = raw.get(key, [])
    if not isinstance(entries, list):
        raise LockInvalid(f"{path}: {key}: not an array of tables")
    for entry in entries:
        name, version = entry.get(name_key), entry.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            raise LockInvalid(f"{path}: {key} {name!r}: needs {name_key} and version strings")
        out[canonicalize_name(name) if normalise else name] = version
    return out


def render_capture(
    image: str, dists: dict[str, str], apt: dict[str, str], *, commits: dict[str, str] | None = None
) -> str:
    import json

    out = [
        "# A capture of what the base image itself has installed (docs/pins.md).",
        "[capture]",
        f"image = {json.dumps(image)}",
    ]
    for name in sorted(dists):
        out += [
            "",
            "[[dist]]",
            f"name = {json.dumps(name)}",
            f"version = {json.dumps(dists[name])}",
        ]
        if (commits or {}).get(name):
            out.append(f"commit = {json.dumps((commits or {})[name])}")
    for package in sorted(apt):
        out += ["", "[[apt]]", f"package = {json.dumps(package)}",
                f"version = {json.dumps(apt[package])}"]  # fmt: skip
    return "\n".join(out) + "\n"
