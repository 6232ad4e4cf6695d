"""The in-container metadata collector: one command prints everything conformance compares.

This file runs twice over: on the host it builds the command (:func:`command`), and inside the image
its own source is handed to the image's Python with ``-c``. So it imports only the standard library
and stays valid on Python 3.8+ (production bases ship 3.10 and 3.12; the local profile 3.11).

Output: one line ``TWINBUILD-COLLECT {json}`` with every installed distribution (name, version,
``direct_url.json``), the HEAD of each checkout asked for, the sha256 of each file asked for, and
the version of each Debian package asked for.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

MARKER = "TWINBUILD-COLLECT "


def argv(python: str, request: dict[str, list[str]]) -> list[str]:
    """The command that runs this collector's own source with ``python`` for ``request``."""
    source = Path(__file__).read_text(encoding="utf-8")
    return [python, "-c", source, json.dumps(request, sort_keys=True)]


def parse(output: str) -> dict[str, Any]:
    """The collector's JSON from its output (anything a sitecustomize printed is ignored)."""
    for line in reversed(output.splitlines()):
        if line.startswith(MARKER):
            data = json.loads(line[len(MARKER) :])
            if isinstance(data, dict):
                return data
    raise ValueError(f"no {MARKER.strip()} line in the collector's output: {output[-300:]!r}")


# -- what runs in the image ------------------------------------------------------------------------


def _distributions() -> list[dict[str, Any]]:
    from importlib import metadata  # (email, zipfile, csv) only when listing distributions

    out: list[dict[str, Any]] = []
    for dist in metadata.distributions():  # sys.path order: the first of a name is the one imported
        name = dist.metadata["Name"]
        if not name:
            continue
        direct: Any = None
        text = dist.read_text("direct_url.json")
        if text:
            try:
                direct = json.loads(text)
            except ValueError as exc:
                direct = {"error": f"direct_url.json is not JSON: {exc}"}
        out.append(
            {
                "name": name,
                "version": dist.version,
                "direct_url": direct,
                "location": str(dist.locate_file("")),
            }
        )
    return out


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _git_dir(path: Path) -> Path:
    dot_git = path / ".git"
    if dot_git.is_file():  # worktree or submodule: ".git" names the real directory
        text = _read(dot_git) or ""
        if text.startswith("gitdir:"):
            return path / text[len("gitdir:") :].strip()
    return dot_git


def _checkout(where: str) -> dict[str, Any]:
    path = Path(where)
    git_dir = _git_dir(path)
    head = _read(git_dir / "HEAD")
    if head is None:
        what = "no such directory" if not path.is_dir() else "not a git checkout"
        return {"head": None, "ref": None, "commit": None, "error": f"{path}: {what}"}
    if not head.startswith("ref:"):
        return {"head": head, "ref": None, "commit": head, "error": None}
    ref = head[len("ref:") :].strip()
    commit = _read(git_dir / ref)
    if commit is None:
        for line in (_read(git_dir / "packed-refs") or "").splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                commit = sha
    error = None if commit else f"{path}: HEAD names {ref}, which does not exist"
    return {"head": head, "ref": ref, "commit": commit, "error": error}


def _file(where: str) -> dict[str, Any]:
    path = Path(where)
    if path.is_dir():
        return {"sha256": None, "error": f"{path}: is a directory"}
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        return {"sha256": None, "error": f"{path}: {exc.strerror or exc}"}
    return {"sha256": digest.hexdigest(), "error": None}


def _apt(packages: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = dict.fromkeys(packages)
    status = _read(Path("/var/lib/dpkg/status")) or ""
    for stanza in status.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith(" "):
                fields[key] = value.strip()
        name = fields.get("Package")
        if name in found and "installed" in fields.get("Status", "").split():
            found[name] = fields.get("Version")
    return found


def collect(request: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "python": sys.executable,
        "python_version": ".".join(str(n) for n in sys.version_info[:3]),
        "distributions": _distributions(),
        "checkouts": {p: _checkout(p) for p in request.get("checkouts", [])},
        "files": {p: _file(p) for p in request.get("files", [])},
        "apt": _apt(request.get("apt", [])),
    }


def main(argv: list[str]) -> int:
    request = json.loads(argv[0]) if argv else {}
    sys.stdout.write(MARKER + json.dumps(collect(request), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
