"""Loading ``pins/``: the manifest file, read once, checked into the typed model of ``model.py``.

In one pass, top-down: this module reads the file (bounded, UTF-8, TOML, its shape), hands the
parsed document to ``reader.py``, which reads every table but the pins, then to ``read_pins.py``
for the pins, and builds the model. Loading checks structure (types, known keys, known variants,
groups, architectures and kinds) and reports every problem at once, each on one line naming
``file:line: key.path``; the lines are ``messages.py``'s. Policy (full SHAs, exact versions,
symmetry, reasons) is the lint's job, on the model built here.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError
from twinbuild.manifest.messages import MAX_DEPTH, toml_error, too_deep
from twinbuild.manifest.model import DEFAULT_PATH, PinManifest
from twinbuild.manifest.read_pins import check_build_args, read_pins
from twinbuild.manifest.reader import Reader, read_images
from twinbuild.util import bounded

MAX_BYTES = 4 * 1024 * 1024


class ManifestError(ConfigError):
    """Every structural problem of one manifest file, one line each."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


def load(path: Path = DEFAULT_PATH) -> PinManifest:
    """Read and check ``path``; raise :class:`ManifestError` with every problem found."""
    data = bounded.read_bytes(
        path,
        limit=MAX_BYTES,
        what="manifest",
        missing="manifest not found; create it or pass --manifest PATH",
    )
    return load_bytes(data, path)


def load_bytes(data: bytes, path: Path = DEFAULT_PATH) -> PinManifest:
    """The manifest in ``data`` (a file's bytes, or a blob from a commit); ``path`` names it."""
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: manifest is {len(data)} bytes, over the {MAX_BYTES} limit")
    return loads(bounded.decode(data, source=str(path), what="manifest"), path)


def loads(text: str, path: Path = DEFAULT_PATH) -> PinManifest:
    """Check the manifest ``text`` (named ``path`` in messages), e.g. one read from git.

    The model is immutable and a pure function of ``text`` and ``path``, so a text read again in
    this process (the gate reads the base's and the head's, a test hundreds) is checked once;
    a text that fails is checked, and refused, every time."""
    return _checked(text, path)


@functools.lru_cache(maxsize=16)
def _checked(text: str, path: Path) -> PinManifest:
    if text.startswith("\ufeff"):
        bounded.decode(b"\xef\xbb\xbf", source=str(path), what="manifest")  # raises, naming it
    if len(text) > MAX_BYTES:
        raise ConfigError(
            f"{path}: over the {MAX_BYTES}-byte limit for a manifest; is this the right file?"
        )
    if not text.strip():
        raise ConfigError(f"{path}: manifest is empty; it must declare [variants] and [pins]")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(toml_error(path, str(exc), text)) from None
    except RecursionError:
        raise ConfigError(too_deep(path)) from None
    except ValueError:  # tomllib lets int() refuse a number of thousands of digits
        raise bounded.huge_number(str(path), "manifest", text) from None
    # tables and arrays nested at most MAX_DEPTH deep, integers within 64 bits
    bounded.check_shape(
        raw, source=str(path), what="manifest", max_depth=MAX_DEPTH, too_deep=too_deep(path)
    )
    return _read(Reader(path, text), raw)


def _read(r: Reader, raw: dict[str, Any]) -> PinManifest:
    images = read_images(r, raw)
    pins = read_pins(r, raw, images.variants, images.groups)
    check_build_args(r, pins, images.build_args, images.variants)
    if r.errors:
        raise ManifestError(r.errors)
    return PinManifest(
        path=r.path,
        text=r.text,
        variants=images.variants,
        groups=images.groups,
        local=images.local,
        pins=pins,
        build_args=images.build_args,
        keylines=r.keylines,
        source=images.source,
    )
