"""The local profile's offline inputs: wheels downloaded on the host, git mirrors cloned locally.

Containers here do not trust the machine's TLS egress, so nothing is downloaded inside one: the
host's pip (with the host's configuration) fills a wheelhouse per layer in the build context, and
git pins come from local mirrors copied into the context, installed as ``git+file://...@COMMIT`` so
pip records the commit (PEP 610) exactly as a production install from GitHub would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from twinbuild.errors import BuildFailed, ConfigError, DiskFull
from twinbuild.manifest.render import GENERATED, Rendered, requirement
from twinbuild.util.git import run_git


def download_wheels(rendered: Rendered, context: Path, cache: Path) -> dict[str, int]:
    """Fill ``<context>/.twinbuild/wheels/<layer>/`` for every pip pin; return files per layer.

    Downloads go to a shared cache first, so a second build (or the other platform) re-uses them.
    """
    counts: dict[str, int] = {}
    for pin in rendered.installed:
        if pin.install != "pip" or pin.kind == "git":
            continue
        req = requirement(pin)
        store = cache / "wheels" / _safe(req)
        if not (store.exists() and any(store.iterdir())):
            _pip_download(req, store, pin.name, pin.index)
        target = context / GENERATED / "wheels" / pin.layer
        target.mkdir(parents=True, exist_ok=True)
        for wheel in store.iterdir():
            _link(wheel, target / wheel.name)
        counts[pin.layer] = counts.get(pin.layer, 0) + 1
    for layer_file in rendered.files:
        layer = Path(layer_file).stem
        (context / GENERATED / "wheels" / layer).mkdir(parents=True, exist_ok=True)
    return counts


def _pip_download(req: str, store: Path, name: str, index: str | None) -> None:
    partial = store.with_name(store.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
            "--quiet", "-d", str(partial), req]  # fmt: skip
    if index:
        argv[4:4] = ["--extra-index-url", index]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        if "No space left" in proc.stderr:
            raise DiskFull(f"pip download {req}: no space left on device under {store.parent}")
        raise BuildFailed(
            f"pins.{name}: pip could not download '{req}' for the local profile: {tail}; "
            f'fix the pin, or set local = "skip: why" on it'
        )
    shutil.rmtree(store, ignore_errors=True)
    partial.rename(store)


def copy_mirrors(rendered: Rendered, context: Path, mirrors: Mapping[str, str]) -> None:
    """Bare-clone each git pin's local mirror into the context; check the pinned commit is there."""
    for pin in rendered.installed:
        if pin.kind != "git" or pin.install != "pip":
            continue
        source = mirrors.get(pin.name)
        if source is None:  # render() skips git pins without a mirror; this is a safety net
            raise ConfigError(f"pins.{pin.name}: no mirror given; pass --mirror {pin.name}=PATH")
        dest = context / GENERATED / "mirrors" / f"{pin.name}.git"
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        cloned = run_git(dest.parent, "clone", "--quiet", "--bare", "--no-local", source, dest.name)
        if cloned.returncode != 0:
            tail = cloned.stderr.strip()[-300:]
            raise BuildFailed(f"pins.{pin.name}: git clone {source}: {tail}")
        found = run_git(dest, "cat-file", "-e", f"{pin.commit or pin.ref}^{{commit}}")
        if found.returncode != 0:
            raise ConfigError(
                f"pins.{pin.name}: commit {pin.commit or pin.ref} is not in the mirror {source}; "
                "fetch it into the mirror or fix the pin"
            )


def _link(src: Path, dst: Path) -> None:
    if dst.exists():
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-=" else "_" for c in text)[:120]
