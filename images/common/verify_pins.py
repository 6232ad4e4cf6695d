"""Fail the build when an installed distribution is not the version its requirement file pins.

Usage: python3 verify_pins.py REQUIREMENTS [--deps-of DIST ...]

Every ``name==version`` line of REQUIREMENTS must be satisfied by the installed version under
PEP 440's exact-match rule (``==V`` without a local label accepts ``V+anything``, e.g. flashinfer's
``0.6.15.post1+cu130``; a pin naming a local label requires it); lines without an exact version are
skipped. The rule is twinbuild/util/exact_pin.py, which the recipes mount beside this script, the
same module the smoke conformance uses. ``--deps-of DIST`` also requires every dependency DIST
declares to be installed (a --no-deps install drops them silently and the image fails only at
import time).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from pathlib import Path

try:  # the recipes mount exact_pin.py beside this script
    from exact_pin import matches
except ImportError:  # run from a checkout of the repository (tests, a bare host)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from twinbuild.util.exact_pin import matches

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for raw in fh:
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("-") or "==" not in line or " @ " in line:
                continue
            name, _, version = line.partition("==")
            out[_norm(name.split("[", 1)[0])] = version.split(";", 1)[0].strip()
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("requirements")
    parser.add_argument("--deps-of", action="append", default=[])
    args = parser.parse_args(argv)
    wrong: dict[str, str] = {}
    for name, version in pinned(args.requirements).items():
        try:
            got = md.version(name)
        except md.PackageNotFoundError:
            got = "(not installed)"
        if not matches(version, got):
            wrong[name] = f"{got}, pinned {version}"
    missing: list[str] = []
    for dist in args.deps_of:
        for req in md.requires(dist) or []:
            if "extra ==" in req:
                continue
            m = _NAME.match(req)
            if m is None:
                continue
            try:
                md.version(m.group(1))
            except md.PackageNotFoundError:
                missing.append(f"{m.group(1)} (needed by {dist})")
    if wrong:
        print(f"{args.requirements}: installed versions differ: {wrong}", file=sys.stderr)
    if missing:
        print(f"{args.requirements}: dependencies not installed: {missing}", file=sys.stderr)
    return 1 if wrong or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
