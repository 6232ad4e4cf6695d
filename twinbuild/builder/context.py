"""The build context: a fresh folder with the recipe, the files it copies, the generated pins and
(local profile) the wheels and git mirrors, whose modes and times depend on nothing but git's
one mode bit, so buildx sends the engine the same files from any checkout."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.inputs import input_files
from twinbuild.builder.wheelhouse import copy_mirrors, download_wheels
from twinbuild.manifest.model import DEFAULT_PATH
from twinbuild.manifest.rendered import CONTEXT_IN_IMAGE, GENERATED, Rendered, requirement
from twinbuild.util.activity import Say
from twinbuild.util.paths import cache_root

if TYPE_CHECKING:
    from twinbuild.builder.locked import LockedReq


@contextmanager
def workspace(folder: Path) -> Iterator[Path]:
    """A fresh folder under ``folder`` for one context, removed afterwards whatever happens."""
    work = Path(tempfile.mkdtemp(prefix="context-", dir=folder))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def assemble(
    options: BuildOptions,
    rendered: Rendered,
    context: Path,
    say: Say,
    locked: Mapping[str, LockedReq] | None = None,
) -> None:
    """Fill ``context`` with everything the build of ``rendered`` reads. ``locked``: its pins
    as the local lock holds them (``builder/locked.py``; None: read here)."""
    if locked is None and rendered.profile == "local":
        from twinbuild.builder.locked import locked_pins
        from twinbuild.manifest.loader import load

        manifest = load(options.root / DEFAULT_PATH)
        locked = locked_pins(manifest, options.root, rendered)
    for entry in input_files(options.root, rendered.recipe, rendered.profile):
        dest = context / entry.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(options.root / entry.path, dest)
    files = locked_files(rendered, locked) if locked else rendered.files
    for name, body in files.items():
        path = context / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    (context / GENERATED / "mirrors").mkdir(parents=True, exist_ok=True)
    if rendered.profile == "local":
        cache = options.cache or cache_root()
        counts = download_wheels(rendered, context, cache, say, locked)
        if counts:
            say(f"wheelhouse: {sum(counts.values())} pins in {len(counts)} layers")
        copy_mirrors(rendered, context, options.mirrors)
    settle(context)


def locked_files(rendered: Rendered, locked: Mapping[str, LockedReq]) -> dict[str, str]:
    """The layer files of a locked local build: each PyPI pin's line with its hashes (the recipe
    installs them ``--require-hashes``); a git pin, which has no file hash, goes into
    ``.twinbuild/mirrors/<layer>.txt`` beside its mirror, installed after its layer's wheels."""
    out: dict[str, str] = dict.fromkeys(rendered.files, "")
    for pin in rendered.installed:
        if pin.install != "pip":
            continue
        if pin.kind == "git":
            name = f"{GENERATED}/mirrors/{pin.layer}.txt"
            line = requirement(pin, mirror=f"file://{CONTEXT_IN_IMAGE}/mirrors/{pin.name}.git")
        else:
            name = f"{GENERATED}/pip/{pin.layer}.txt"
            line = locked[pin.name].line
        out[name] = out.get(name, "") + line + "\n"
    return out


def settle(context: Path) -> None:
    """Give every entry of ``context`` git's mode (0755 for a folder or an executable, else
    0644) and time zero: the umask of a checkout and the hour it was copied must not change the
    image's bytes."""
    for path in sorted(context.rglob("*"), reverse=True):  # children before their folder
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(0o755 if path.is_dir() or mode & 0o100 else 0o644)
        os.utime(path, (0, 0))
    context.chmod(0o755)  # mkdtemp makes it 0700
    os.utime(context, (0, 0))
