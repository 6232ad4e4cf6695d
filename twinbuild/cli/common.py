"""What several commands share: the manifest and root options, and turning them into paths."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import DEFAULT_PATH

Handler = Callable[[argparse.Namespace], int]


def add_format(
    parser: argparse.ArgumentParser,
    *extra: str,
    default: str = "text",
    what: str = "the report",
) -> None:
    """``--format text|json`` (and ``extra``, e.g. ``markdown`` for a CI summary): the one way a
    command chooses how its data on stdout looks (``twinbuild.util.output``)."""
    choices = ("text", "json", *extra)
    parser.add_argument(
        "--format", choices=choices, default=default,
        help=f"{what} on stdout as {', '.join(choices)} (default: %(default)s)",
    )  # fmt: skip


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``-q``/``-v`` on every command (``main`` adds them to each parser that lacks them): how
    much goes to stderr. Data on stdout is the same either way."""
    flags = {flag for action in parser._actions for flag in action.option_strings}
    if "-q" not in flags:
        parser.add_argument(
            "-q", "--quiet", action="store_true", help="say nothing on stderr but errors"
        )
    if "-v" not in flags:
        parser.add_argument(
            "-v", "--verbose", action="store_true", help="say more on stderr (details, commands)"
        )


def add_common(parser: argparse.ArgumentParser, *, root: bool = True) -> None:
    """``--manifest``, and ``--root`` for the commands that read images/ (``root=False``: not).

    Neither has a fixed default: :func:`locate` finds them from the current folder.
    """
    parser.add_argument("--manifest", help=f"pin manifest (default: <root>/{DEFAULT_PATH})")
    if root:
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
    has_root, has_manifest = hasattr(args, "root"), hasattr(args, "manifest")
    if has_root and args.root is not None:
        if has_manifest and args.manifest is None:
            args.manifest = str(Path(args.root) / DEFAULT_PATH)
        return
    if not has_root and not (has_manifest and args.manifest is None):
        return
    found = find_root(Path.cwd())
    if found is None:
        if has_root:
            args.root = "."
        if has_manifest and args.manifest is None:
            raise ConfigError(
                f"no {DEFAULT_PATH} in {Path.cwd()} or any folder above it; run twinbuild inside "
                "a checkout of your images repository, or pass --root DIR (or --manifest PATH)"
            )
        return
    here = found == Path.cwd().resolve()
    if has_root:
        args.root = "." if here else str(found)
    if has_manifest and args.manifest is None:
        args.manifest = str(DEFAULT_PATH) if here else str(found / DEFAULT_PATH)


def manifest_path(args: argparse.Namespace) -> Path:
    return Path(args.manifest)


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
