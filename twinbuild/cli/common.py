"""What several commands share: the manifest and root options, and turning them into paths."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import DEFAULT_PATH

Handler = Callable[[argparse.Namespace], int]


def add_common(parser: argparse.ArgumentParser, *, root: bool = True) -> None:
    """``--manifest``, and ``--root`` for the commands that read images/ (``root=False``: not)."""
    parser.add_argument(
        "--manifest", default=str(DEFAULT_PATH), help="pin manifest (default: %(default)s)"
    )
    if root:
        parser.add_argument(
            "--root", default=".", help="repository root holding images/ (default: .)"
        )


def manifest_path(args: argparse.Namespace) -> Path:
    return Path(args.manifest)


def root(args: argparse.Namespace) -> Path:
    return Path(args.root)


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
