"""Shared test helpers: a copy of the mini project that a test can edit, a pin with a change, the
key of one of its images."""

from __future__ import annotations

import contextlib
import dataclasses
import http.server
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from twinbuild.manifest.model import Arch, ImageKey, ResolvedPin

FIXTURES = Path(__file__).parent / "fixtures"
MINI = FIXTURES / "mini"
#: The mini project's variants, ``cuda`` and ``rocm``: one amd64 image each.
MINI_VARIANTS = ("cuda", "rocm")


def image(variant: str, arch: Arch = "linux/amd64") -> ImageKey:
    """One image of a test variant (the mini project's build amd64 alone)."""
    return ImageKey(variant=variant, arch=arch)


def mini_project(tmp_path: Path) -> Path:
    """A writable copy of tests/fixtures/mini (pins/ and images/)."""
    root = tmp_path / "proj"
    shutil.copytree(MINI, root, ignore=shutil.ignore_patterns("build", ".twinbuild"))
    return root


def with_pins(root: Path, pins: str) -> Path:
    """The project at ``root`` with its manifest's pins replaced by ``pins`` (TOML ``[pins.*]``
    tables), its variants and ``[local]`` table kept."""
    manifest = root / "pins/manifest.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text[: text.index("[pins.")] + pins, encoding="utf-8")
    return root


def lock_argv(root: Path, index_url: str, *more: str) -> list[str]:
    """``twinbuild lock`` of the project at ``root`` against the index at ``index_url``."""
    return ["lock", "--root", str(root), "--manifest", str(root / "pins/manifest.toml"),
            "--index-url", index_url, *more]  # fmt: skip


def with_arm64(root: Path) -> Path:
    """The mini project at ``root`` with its cuda variant on linux/arm64 too (two images)."""
    edit(
        root / "pins/manifest.toml",
        '[variants.cuda]\narchs = ["linux/amd64"]',
        '[variants.cuda]\narchs = ["linux/amd64", "linux/arm64"]',
    )
    return root


def run_twinbuild(
    root: Path, env: Mapping[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m twinbuild ARGS`` in ``root`` with exactly ``env``, as a person runs it."""
    return subprocess.run(
        [sys.executable, "-m", "twinbuild", *args], cwd=root, capture_output=True, text=True,
        env=dict(env), timeout=timeout, check=False,
    )  # fmt: skip


def unscrubbed(argv: Sequence[str]) -> tuple[dict[str, str] | None, list[str]]:
    """The environment and the command of ``env -i NAME=VALUE... COMMAND...`` (what
    ``twinbuild.util.process.scrubbed`` makes); (None, argv) for any other command."""
    argv = list(argv)
    if argv[:2] != ["env", "-i"]:
        return None, argv
    rest = argv[2:]
    env: dict[str, str] = {}
    while rest and "=" in rest[0] and not rest[0].startswith("-"):
        name, _, value = rest.pop(0).partition("=")
        env[name] = value
    return env, rest


def edit(path: Path, old: str, new: str) -> None:
    """Replace one exact occurrence of ``old`` (fails loudly when it is not there exactly once)."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    path.write_text(text.replace(old, new))


def repin(pin: ResolvedPin, **changes: Any) -> ResolvedPin:
    """``pin`` with some of its fields changed, a value (``version``) or its own (``name``)."""
    own = {k: changes.pop(k) for k in list(changes) if k in ResolvedPin.__dataclass_fields__}
    return dataclasses.replace(pin, values=dataclasses.replace(pin.values, **changes), **own)


#: The repository manifest's release variant of each recipe (cu13 builds images/cuda).
RECIPE_VARIANTS = {"cuda": "cu13", "rocm": "rocm720-mi35x"}


def repo_image(recipe: str, arch: Arch = "linux/amd64") -> ImageKey:
    """The repository manifest's image of ``recipe``'s release variant on ``arch``."""
    return ImageKey(variant=RECIPE_VARIANTS[recipe], arch=arch)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 just now (for a server a test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    """``handler`` served on 127.0.0.1 (never another address) in a thread; yields the port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
