"""What several commands share: the manifest and root options, and turning them into paths."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import DEFAULT_PATH, PLATFORMS, Manifest, Platform, load

Handler = Callable[[argparse.Namespace], int]


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", help=f"pin manifest (default: <root>/{DEFAULT_PATH})")
    parser.add_argument(
        "--root",
        help=f"repository root holding images/ (default: the nearest folder at or above the "
        f"current one that has {DEFAULT_PATH}, as git finds .git)",
    )


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding the manifest, or None."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / DEFAULT_PATH).is_file():
            return folder
    return None


def locate(args: argparse.Namespace) -> None:
    """Fill ``--root`` and ``--manifest`` where the command has them and they were not given.

    Commands work from any subdirectory of a checkout, as git's do. Where no folder above has a
    manifest, a command that reads one stops here, saying so; others use the current folder.
    """
    if not hasattr(args, "root") or args.root is not None:
        if hasattr(args, "manifest") and args.manifest is None:
            args.manifest = str(Path(args.root) / DEFAULT_PATH)
        return
    found = find_root(Path.cwd())
    if found is None:
        args.root = "."
        if getattr(args, "manifest", "") is None:
            raise ConfigError(
                f"no {DEFAULT_PATH} in {Path.cwd()} or any folder above it; run twinbuild inside "
                "a checkout of your images repository, or pass --root DIR (or --manifest PATH)"
            )
        return
    cwd = Path.cwd().resolve()
    args.root = "." if found == cwd else str(found)
    if getattr(args, "manifest", "") is None:
        args.manifest = str(DEFAULT_PATH) if found == cwd else str(found / DEFAULT_PATH)


def manifest(args: argparse.Namespace) -> Manifest:
    return load(Path(args.manifest))


def root(args: argparse.Namespace) -> Path:
    return Path(args.root)


def repo_manifest(args: argparse.Namespace) -> Path:
    """The manifest's path relative to the root, as git names it (``pins diff``, ``plan``)."""
    path, base = Path(args.manifest), Path(args.root)
    if path.is_absolute() or base != Path():
        try:
            return path.resolve().relative_to(base.resolve())
        except ValueError:
            return path
    return path


def platforms(args: argparse.Namespace) -> list[Platform]:
    return [args.platform] if args.platform else list(PLATFORMS)


def mirrors(items: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(
                f"--mirror {item!r}: expected PIN=PATH, e.g. --mirror tms=/srv/tms.git"
            )
        found[name] = path
    return found
