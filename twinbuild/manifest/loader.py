"""Reading ``pins/``: the manifest's TOML checked into the typed model of ``model.py``.

Loading checks structure (types, known keys, known variants, groups, architectures and kinds) and
reports every problem at once, each on one line naming ``file:line: key.path``; the lines are
``messages.py``'s. ``read_variants.py`` reads the images, ``read_pins.py`` the pins, both through
``reader.py``'s typed getters. Policy (full SHAs, exact versions, symmetry, reasons) is the lint's
job, on the model built here.
"""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError
from twinbuild.manifest.messages import MAX_DEPTH, toml_error, too_deep
from twinbuild.manifest.model import DEFAULT_PATH, SCHEMA, SOURCE_RE, PinManifest, Variant
from twinbuild.manifest.read_pins import check_build_args, read_pins
from twinbuild.manifest.read_variants import read_build_args, read_groups, read_local, read_variants
from twinbuild.manifest.reader import Reader
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


TOP_KEYS = ("schema", "source", "groups", "build_args", "variants", "local", "pins")


def _read(r: Reader, raw: dict[str, Any]) -> PinManifest:
    if "platforms" in raw:
        r.error(
            ("platforms",),
            f"schema {SCHEMA} names images as variants: rename each [platforms.NAME] to "
            "[variants.NAME] with archs and recipe (docs/manifest.md)",
        )
    r.unknown_keys({k: v for k, v in raw.items() if k != "platforms"}, (), TOP_KEYS)
    schema = r.get(raw, ("schema",), int)
    if "schema" not in raw:
        r.error(("schema",), f"missing; add 'schema = {SCHEMA}' at the top")
    elif schema is not None and schema != SCHEMA:
        r.error(("schema",), f"unsupported schema {schema}; this twinbuild reads {SCHEMA}")
    source = _source(r, raw)
    variants = read_variants(r, raw)
    groups = read_groups(r, raw, variants)
    shared = read_build_args(r, raw, ("build_args",))
    local = read_local(r, raw, variants)
    pins = read_pins(r, raw, variants, groups)
    check_build_args(r, pins, shared, variants)
    _recipes_gated(r, variants)
    if r.errors:
        raise ManifestError(r.errors)
    return PinManifest(
        path=r.path,
        text=r.text,
        variants=variants,
        groups=groups,
        local=local,
        pins=pins,
        build_args=shared,
        keylines=r.keylines,
        source=source,
    )


def _source(r: Reader, raw: dict[str, Any]) -> str | None:
    """The repository's web address for the images' ``org.opencontainers.image.source``."""
    value = r.get_str(raw, ("source",))
    if value is not None and not SOURCE_RE.fullmatch(value):
        r.error(
            ("source",),
            f"{value!r} is not a repository's web address; write it as "
            "'https://github.com/OWNER/NAME' (https, no credentials), or leave source out "
            "to take it from the git remote",
        )
        return None
    return value


def _recipes_gated(r: Reader, variants: dict[str, Variant]) -> None:
    """Each production recipe folder is built by a variant the gate requires: an image's inputs
    leave out the other recipes' folders, so a folder only nightly variants build would change
    no image the gate judges."""
    gated = {v.recipe for v in variants.values() if v.validate == "pr"}
    for variant in variants.values():
        if variant.recipe and variant.recipe not in gated and gated:
            r.error(
                ("variants", variant.name, "recipe"),
                f"images/{variant.recipe}/ is built by no variant the gate requires "
                f'(validate = "pr"), so the gate would judge none of its changes; make one '
                'of its variants validate = "pr"',
            )
