"""What several commands share: the manifest and root options, and turning them into paths."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import ARCHS, DEFAULT_PATH
from twinbuild.util import bounded, values
from twinbuild.util.paths import cache_root

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


def add_variant(parser: argparse.ArgumentParser, *, every: str, arch: bool = True) -> None:
    """``--variant NAME`` (a variant of the manifest; ``every`` says what its absence means) and
    ``--arch`` (one of its architectures)."""
    parser.add_argument(
        "--variant", metavar="NAME",
        help=f"one variant of the manifest (`twinbuild variants` lists them; default: {every})",
    )  # fmt: skip
    if arch:
        parser.add_argument(
            "--arch", choices=ARCHS, help="one architecture (default: every one it builds)"
        )


def add_all_archs(parser: argparse.ArgumentParser) -> None:
    """``--all-archs``: the architectures this host runs only under QEMU too (build, smoke and
    push take the same images)."""
    parser.add_argument(
        "--all-archs", action="store_true",
        help="without --arch, every architecture of the variants, those this host runs only "
        "under QEMU too (a build installs and registers QEMU as root; default: this host's own)",
    )  # fmt: skip


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Every text argument is UTF-8 without control characters, or one line naming its option.

    An argument that is not UTF-8 reaches Python as lone surrogates, which crash the first write
    of it (a bumped manifest, a summary); a trailing newline (from ``$(cat file)``) would split
    every message about the value over two lines.
    """
    leaf = _leaf(parser, args)
    for action in leaf._actions:
        value = getattr(args, action.dest, None)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str | Path):
                values.check_text(str(item), name=_option_name(action))


def _leaf(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command ``args`` came from (``evidence gate``, not ``twinbuild``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return _leaf(chosen, args)
    return parser


def _option_name(action: argparse.Action) -> str:
    if action.option_strings:
        return max(action.option_strings, key=len)
    metavar = action.metavar if isinstance(action.metavar, str) else None
    return metavar or action.dest.upper()


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: ASCII digits from ``low`` to ``high`` (``int`` takes ``-1``, ``²``
    is refused only by int(), and ``+5`` or `` 5`` pass it)."""

    def parse(text: str) -> int:
        reason = values.whole_reason(text, low=low, high=high)
        if reason is not None:
            raise argparse.ArgumentTypeError(reason)
        return int(text)

    return parse


def days(text: str) -> float:
    """An argparse ``type``: a number of days over 0 and up to ten years (``nan``, ``inf`` and
    ``1e300`` are floats too, and ``timedelta`` overflows far below the last)."""
    reason = values.finite_reason(text, above=0, high=3650)
    if reason is not None:
        raise argparse.ArgumentTypeError(reason)
    return float(text)


def registry_host(text: str) -> str:
    """An argparse ``type``: a registry's ``HOST[:PORT]`` (no scheme, path, space, user), by the
    rule ``--registry`` follows (``engine.registry_names.address_reason``)."""
    from twinbuild.engine.registry_names import address_reason

    reason = address_reason(text, namespace=False)
    if reason is not None:
        raise argparse.ArgumentTypeError(f"{text!r}: {reason}")
    return text


def add_max_age(p: argparse.ArgumentParser) -> None:
    """``--max-age-days``: the gate and release judge evidence age by the same rule."""
    p.add_argument(
        "--max-age-days", type=days, default=14.0,
        help="oldest evidence accepted, in days (default: %(default)s)",
    )  # fmt: skip


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding the manifest, or None.

    A ``pins`` that is there but is not a folder that can be searched (a FIFO, a file, a link
    to itself or to nothing, a folder without permission to look in), or something at
    ``pins/manifest.toml`` that is not a file (a folder), stops the search with one line
    saying so: none of them is "no manifest here", so a parent folder's manifest is never
    used in their place.
    """
    start = bounded.resolve(start, name="the current folder")
    for folder in (start, *start.parents):
        pins = folder / DEFAULT_PATH.parent
        if not (pins.is_symlink() or _exists(pins)):
            continue
        _searchable(pins)
        candidate = folder / DEFAULT_PATH
        try:
            mode = candidate.stat().st_mode
        except PermissionError:
            raise ConfigError(
                f"{candidate}: cannot be looked at (permission denied); check the permissions "
                f"of {candidate.parent}, or pass --root DIR (or --manifest PATH)"
            ) from None
        except OSError:  # a folder of pins without a manifest: not a checkout, look further up
            continue
        if stat.S_ISDIR(mode):
            raise ConfigError(
                f"{candidate}: is a directory, not the manifest; remove it or pass --manifest PATH"
            )
        return folder  # a FIFO or device is named by the manifest reader, which refuses it
    return None


def _exists(path: Path) -> bool:
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError:  # a parent that cannot be searched: said by the stat that follows
        return True
    return True


def _searchable(pins: Path) -> None:
    """``pins`` (which exists) as a folder the search may look into, or one line saying why not."""
    fix = f"make {pins} the folder holding manifest.toml, or pass --root DIR (or --manifest PATH)"
    try:
        mode = pins.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            problem = "a symlink loop (too many levels of symbolic links)"
        elif isinstance(exc, FileNotFoundError):
            problem = f"a link to {str(pins.readlink())!r}, which does not exist"
        else:
            problem = f"not searchable ({exc.strerror})"
        raise ConfigError(f"{pins}: is {problem}, not a folder; {fix}") from None
    if not stat.S_ISDIR(mode):
        through = f"a link to {os.path.realpath(pins)}, " if pins.is_symlink() else ""
        kind = "a file" if stat.S_ISREG(mode) else bounded.kind_of(mode)
        raise ConfigError(f"{pins}: is {through}{kind}, not a folder; {fix}")


def _cwd() -> Path:
    try:
        return Path.cwd()
    except OSError:
        raise ConfigError(
            "the current folder is gone (deleted while in it); cd into the repository and re-run"
        ) from None


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
    cwd = _cwd()
    found = find_root(cwd)
    if found is None:
        if has_root:
            args.root = "."
        if has_manifest and args.manifest is None:
            raise ConfigError(
                f"no {DEFAULT_PATH} in {cwd} or any folder above it; run twinbuild inside "
                "a checkout of your images repository, or pass --root DIR (or --manifest PATH)"
            )
        return
    here = found == cwd.resolve()
    if has_root:
        args.root = "." if here else str(found)
    if has_manifest and args.manifest is None:
        args.manifest = str(DEFAULT_PATH) if here else str(found / DEFAULT_PATH)


def write_roots(args: argparse.Namespace) -> tuple[Path, ...]:
    """The folders a link may lead a write into (``util.atomic.links_within``): the repository
    the command works on (``--root``, else the checkout around the current folder, else that
    folder) and twinbuild's cache."""
    roots: list[Path] = []
    if getattr(args, "root", None):
        roots.append(Path(args.root))
    with contextlib.suppress(ConfigError):  # whoever needs them has said so already
        here = _cwd()
        found = here
        with contextlib.suppress(ConfigError):  # a pins that is no folder: this folder, then
            found = find_root(here) or here
        roots.append(found)
    with contextlib.suppress(ConfigError):
        roots.append(cache_root())
    return tuple(roots)


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
