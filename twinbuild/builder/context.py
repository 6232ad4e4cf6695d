"""The build context: a fresh folder with the recipe, the files it copies, the generated pins and
(local profile) the wheels and git mirrors, sent to the engine as a tar that depends on nothing
but those bytes."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.inputs import input_files
from twinbuild.builder.wheelhouse import copy_mirrors, download_wheels
from twinbuild.manifest.rendered import GENERATED, Rendered
from twinbuild.util.activity import Say
from twinbuild.util.paths import cache_root


@contextmanager
def workspace(folder: Path) -> Iterator[Path]:
    """A fresh folder under ``folder`` for one context, removed afterwards whatever happens."""
    work = Path(tempfile.mkdtemp(prefix="context-", dir=folder))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def assemble(options: BuildOptions, rendered: Rendered, context: Path, say: Say) -> None:
    """Fill ``context`` with everything the build of ``rendered`` reads."""
    for entry in input_files(options.root, rendered.recipe, rendered.profile):
        dest = context / entry.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(options.root / entry.path, dest)
    for name, body in rendered.files.items():
        path = context / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    (context / GENERATED / "mirrors").mkdir(parents=True, exist_ok=True)
    if rendered.profile == "local":
        cache = options.cache or cache_root()
        counts = download_wheels(rendered, context, cache, say)
        if counts:
            say(f"wheelhouse: {sum(counts.values())} pins in {len(counts)} layers")
        copy_mirrors(rendered, context, options.mirrors)


def tar_context(context: Path) -> tempfile._TemporaryFileWrapper[bytes]:
    """``context`` as one tar, with no time, owner or umask in it (the engine's cache keys)."""
    handle = tempfile.NamedTemporaryFile(suffix=".tar")  # noqa: SIM115 (closed by the caller)
    with tarfile.open(fileobj=handle, mode="w") as tar:
        for path in sorted(context.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(context).as_posix())
            info.mtime = 0  # the engine's cache keys must not depend on when we copied
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            # Git keeps one mode bit; the umask of a checkout must not change the image's bytes.
            info.mode = 0o755 if path.is_dir() or info.mode & 0o100 else 0o644
            if path.is_file():
                with path.open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    handle.seek(0)
    return handle
