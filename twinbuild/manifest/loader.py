"""Reading ``pins/``: the manifest's TOML checked into the typed model of ``model.py``.

Loading checks structure (types, known keys, known platforms and kinds) and reports every problem at
once, each on one line naming ``file:line: key.path``; the lines are ``messages.py``'s. Policy
(full SHAs, exact versions, symmetry, reasons) is the lint's job, on the model built here.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from twinbuild.errors import ConfigError
from twinbuild.manifest.messages import (
    MAX_DEPTH,
    bad_name,
    example,
    one_of,
    toml_error,
    too_deep,
    type_name,
    unknown_platform,
)
from twinbuild.manifest.model import (
    BRANCH_RE,
    DEFAULT_PATH,
    INSTALLS,
    KINDS,
    MODULE_RE,
    NAME_RE,
    PIN_KEYS,
    PLATFORMS,
    REPOSITORY_RE,
    SCHEMA,
    SIZE_RE,
    SOURCE_RE,
    TAG_RE,
    VALUE_KEYS,
    BandwidthFloor,
    BaseImage,
    LocalProfile,
    Manifest,
    Pin,
    Platform,
    PlatformSpec,
    Values,
    norm,
)
from twinbuild.manifest.tomlpos import KeyLines
from twinbuild.util import bounded

MAX_BYTES = 4 * 1024 * 1024


class ManifestError(ConfigError):
    """Every structural problem of one manifest file, one line each."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


def load(path: Path = DEFAULT_PATH) -> Manifest:
    """Read and check ``path``; raise :class:`ManifestError` with every problem found."""
    data = bounded.read_bytes(
        path,
        limit=MAX_BYTES,
        what="manifest",
        missing="manifest not found; create it or pass --manifest PATH",
    )
    return load_bytes(data, path)


def load_bytes(data: bytes, path: Path = DEFAULT_PATH) -> Manifest:
    """The manifest in ``data`` (a file's bytes, or a blob from a commit); ``path`` names it."""
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: manifest is {len(data)} bytes, over the {MAX_BYTES} limit")
    return loads(bounded.decode(data, source=str(path), what="manifest"), path)


def loads(text: str, path: Path = DEFAULT_PATH) -> Manifest:
    """Check the manifest ``text`` (named ``path`` in messages), e.g. one read from git."""
    if text.startswith("\ufeff"):
        bounded.decode(b"\xef\xbb\xbf", source=str(path), what="manifest")  # raises, naming it
    if len(text) > MAX_BYTES:
        raise ConfigError(
            f"{path}: over the {MAX_BYTES}-byte limit for a manifest; is this the right file?"
        )
    if not text.strip():
        raise ConfigError(f"{path}: manifest is empty; it must declare [platforms] and [pins]")
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
    return _Reader(path, text).read(raw)


class _Reader:
    """Builds the model; collects every error instead of stopping at the first."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.keylines = KeyLines.index(text)
        self.errors: list[str] = []
        self.bad_keys: set[tuple[str, ...]] = set()

    def error(self, key: tuple[str, ...], message: str) -> None:
        dotted = ".".join(key).replace(".[", "[")  # an array entry: floors[1].gpus
        line = self.keylines.line_of(key)
        # A key missing from a table that is not in the file has no line: name the file alone.
        where = f"{self.path}:{line}" if line else str(self.path)
        text = f"{where}: {dotted}: {message}"
        if text not in self.errors:  # one key missing on both platforms is one problem
            self.errors.append(text)

    # typed getters, in the style of packaging's pylock ----------------------------------------

    def _get(self, table: Mapping[str, Any], key: tuple[str, ...], typ: type, name: str) -> Any:
        value = table.get(key[-1])
        if value is None:
            return None
        self.bad_keys.add(key)  # until it passes the type check below
        if typ is str and not isinstance(value, str):
            self.error(key, f"expected a string, got {type_name(value)}{example(name)}")
            return None
        if typ is list and (
            not isinstance(value, list) or not all(isinstance(x, str) for x in value)
        ):
            self.error(key, f"expected a list of strings, got {type_name(value)}")
            return None
        if typ is dict and not isinstance(value, dict):
            self.error(key, f"expected a table, got {type_name(value)}")
            return None
        if typ is int and (not isinstance(value, int) or isinstance(value, bool)):
            self.error(key, f"expected an integer, got {type_name(value)}")
            return None
        self.bad_keys.discard(key)
        return value

    def get_str(self, table: Mapping[str, Any], key: tuple[str, ...]) -> str | None:
        return cast(str | None, self._get(table, key, str, key[-1]))

    def need_str(self, table: Mapping[str, Any], key: tuple[str, ...], hint: str) -> str:
        value = self.get_str(table, key)
        if value is None and key[-1] not in table:
            self.error(key, f"missing; {hint}")
        return value or ""

    def get_list(self, table: Mapping[str, Any], key: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(self._get(table, key, list, key[-1]) or ())

    def get_table(self, table: Mapping[str, Any], key: tuple[str, ...]) -> dict[str, Any] | None:
        return cast(dict[str, Any] | None, self._get(table, key, dict, key[-1]))

    def need_table(
        self, table: Mapping[str, Any], key: tuple[str, ...], hint: str
    ) -> dict[str, Any] | None:
        """A table that must be there: None (and one error) when it is missing or not a table."""
        value = self.get_table(table, key)
        if value is None and key[-1] not in table:
            self.error(key, f"missing; {hint}")
        return value

    def unknown_keys(
        self, table: Mapping[str, Any], prefix: tuple[str, ...], known: tuple[str, ...]
    ) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = (
                    f"; did you mean '{close[0]}'?"
                    if close
                    else f"; known keys: {', '.join(known)}"
                )
                self.error((*prefix, key), f"unknown key{hint}")

    # the manifest ------------------------------------------------------------------------------

    def read(self, raw: dict[str, Any]) -> Manifest:
        self.unknown_keys(raw, (), ("schema", "source", "platforms", "local", "pins"))
        schema = self._get(raw, ("schema",), int, "schema")
        if "schema" not in raw:
            self.error(("schema",), f"missing; add 'schema = {SCHEMA}' at the top")
        elif schema is not None and schema != SCHEMA:
            self.error(("schema",), f"unsupported schema {schema}; this twinbuild reads {SCHEMA}")
        source = self.read_source(raw)
        platforms = self.read_platforms(raw)
        local = self.read_local(raw)
        pins = self.read_pins(raw)
        if self.errors:
            raise ManifestError(self.errors)
        return Manifest(
            path=self.path,
            text=self.text,
            platforms=platforms,
            local=local,
            pins=pins,
            keylines=self.keylines,
            source=source,
        )

    def read_source(self, raw: dict[str, Any]) -> str | None:
        """The repository's web address for the images' ``org.opencontainers.image.source``."""
        value = self.get_str(raw, ("source",))
        if value is not None and not SOURCE_RE.fullmatch(value):
            self.error(
                ("source",),
                f"{value!r} is not a repository's web address; write it as "
                "'https://github.com/OWNER/NAME' (https, no credentials), or leave source out "
                "to take it from the git remote",
            )
            return None
        return value

    def read_platforms(self, raw: dict[str, Any]) -> dict[Platform, PlatformSpec]:
        table = self.need_table(
            raw, ("platforms",), "declare [platforms.cuda] and [platforms.rocm]"
        )
        out: dict[Platform, PlatformSpec] = {}
        if table is None:
            return out
        for name in table:
            if name not in PLATFORMS:
                self.error(("platforms", name), unknown_platform(name))
        for name in PLATFORMS:
            key = ("platforms", name)
            spec = table.get(name)
            if spec is None:
                self.error(key, f"missing; declare [platforms.{name}]")
                continue
            if not isinstance(spec, dict):
                self.error(key, f"expected a table, got {type_name(spec)}")
                continue
            known = (
                "base", "python", "toolkit", "vendor", "gpu_archs", "imports", "binaries",
                "kernel_modules", "all_reduce_floors", "shm_size",
            )  # fmt: skip
            self.unknown_keys(spec, key, known)
            base = self.read_base(spec, (*key, "base"))
            out[name] = PlatformSpec(
                name=name,
                base=base,
                python=self.need_str(spec, (*key, "python"), "set the image's Python, e.g. '3.12'"),
                toolkit=self.need_str(
                    spec, (*key, "toolkit"), "set the CUDA or ROCm version, e.g. '12.9'"
                ),
                vendor=self.need_str(spec, (*key, "vendor"), "set 'nvidia' or 'amd'"),
                gpu_archs=self.get_list(spec, (*key, "gpu_archs")),
                imports=self.get_list(spec, (*key, "imports")),
                binaries=self.get_list(spec, (*key, "binaries")),
                kernel_modules=self.read_modules(spec, (*key, "kernel_modules")),
                all_reduce_floors=self.read_floors(spec, (*key, "all_reduce_floors")),
                shm_size=self.read_shm_size(spec, (*key, "shm_size")),
                line=self.keylines.line_of(key),
            )
        return out

    def read_modules(self, spec: Mapping[str, Any], key: tuple[str, ...]) -> tuple[str, ...]:
        modules = self.get_list(spec, key)
        for name in modules:
            if not MODULE_RE.fullmatch(name):
                self.error(key, f"{name!r} is not a module name (dotted Python identifiers)")
        return modules

    def read_shm_size(self, spec: Mapping[str, Any], key: tuple[str, ...]) -> str | None:
        value = self.get_str(spec, key)
        if value is not None and not SIZE_RE.fullmatch(value):
            self.error(
                key,
                f"{value!r} is not a size: digits and a unit b, k, m or g, e.g. '32g'; or leave "
                "shm_size out so GPU containers share the host's IPC namespace (--ipc=host)",
            )
            return None
        return value

    def read_floors(
        self, spec: Mapping[str, Any], key: tuple[str, ...]
    ) -> tuple[BandwidthFloor, ...]:
        raw = spec.get(key[-1])
        if raw is None:
            return ()
        if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
            self.error(
                key,
                f"expected an array of tables ([[{'.'.join(key)}]]), got {type_name(raw)}",
            )
            return ()
        floors: list[BandwidthFloor] = []
        seen: set[tuple[str, int]] = set()
        for index, entry in enumerate(raw):
            at = (*key, f"[{index}]")
            self.unknown_keys(entry, at, ("gpu", "gpus", "busbw_gbs", "source"))
            gpu = self.need_str(
                entry, (*at, "gpu"), "the device name torch reports, e.g. 'NVIDIA H200'"
            )
            gpus = self._get(entry, (*at, "gpus"), int, "gpus")
            if "gpus" not in entry:
                self.error((*at, "gpus"), "missing; how many GPUs the floor is for, e.g. 8")
            elif gpus is not None and gpus < 2:
                self.error(
                    (*at, "gpus"),
                    f"{gpus}: one GPU moves no data between GPUs; a floor is for 2 or more",
                )
                gpus = None
            bw = entry.get("busbw_gbs")
            if bw is None:
                self.error((*at, "busbw_gbs"), "missing; the least bus bandwidth in GB/s")
            elif isinstance(bw, bool) or not isinstance(bw, int | float) or not 0 < bw < 1e5:
                self.error((*at, "busbw_gbs"), f"expected a number of GB/s above 0, got {bw!r}")
                bw = None
            source = self.need_str(
                entry, (*at, "source"), "say where the number comes from (datasheet, a run)"
            )
            if "source" in entry and not source.strip():
                self.error((*at, "source"), "empty; say where the number comes from")
            if not gpu or gpus is None or bw is None or not source.strip():
                continue
            if (gpu, gpus) in seen:
                self.error(at, f"a second floor for {gpus}x {gpu}; keep one")
                continue
            seen.add((gpu, gpus))
            floors.append(
                BandwidthFloor(
                    gpu=gpu,
                    gpus=gpus,
                    busbw_gbs=float(bw),
                    source=source,
                    line=self.keylines.line_of(at),
                )
            )
        return tuple(floors)

    def read_base(self, spec: Mapping[str, Any], key: tuple[str, ...]) -> BaseImage:
        table = self.get_table(spec, key)
        if table is None:
            if key[-1] not in spec:
                self.error(key, "missing; set base = { repository = ..., tag = ..., digest = ... }")
            # one message for the missing (or mistyped) table, not one more per key inside it
            return BaseImage(repository="", tag="", digest="", line=self.keylines.line_of(key))
        self.unknown_keys(table, key, ("repository", "tag", "digest"))
        repository = self.need_str(table, (*key, "repository"), "name the base image repository")
        tag = self.need_str(table, (*key, "tag"), "give the readable tag")
        if repository and not REPOSITORY_RE.fullmatch(repository):
            self.error(
                (*key, "repository"),
                f"{repository!r} is not an image repository (lower case, no spaces); "
                "e.g. 'lmsysorg/sglang'",
            )
        if tag and not TAG_RE.fullmatch(tag):
            self.error(
                (*key, "tag"),
                f"{tag!r} is not a Docker tag (letters, digits, '_', '.', '-'; no spaces or '|'); "
                "e.g. 'v0.5.6-cu129'",
            )
        return BaseImage(
            repository=repository,
            tag=tag,
            digest=self.need_str(table, (*key, "digest"), "pin the base by 'sha256:<64 hex>'"),
            line=self.keylines.line_of(key),
        )

    def read_local(self, raw: dict[str, Any]) -> LocalProfile:
        key = ("local",)
        table = self.need_table(raw, key, "declare [local] (suite, mirror, packages)")
        if table is None:
            return LocalProfile(suite="", mirror="", packages=())
        self.unknown_keys(table, key, ("suite", "mirror", "packages", "imports"))
        return LocalProfile(
            suite=self.need_str(table, (*key, "suite"), "e.g. suite = 'bookworm'"),
            mirror=self.need_str(table, (*key, "mirror"), "a Debian mirror URL"),
            packages=self.get_list(table, (*key, "packages")),
            imports=self.get_list(table, (*key, "imports")),
            line=self.keylines.line_of(key),
        )

    def read_pins(self, raw: dict[str, Any]) -> dict[str, Pin]:
        table = self.need_table(raw, ("pins",), "declare at least one [pins.NAME] table")
        pins: dict[str, Pin] = {}
        if table is None:
            return pins
        normalised: dict[str, str] = {}
        for name, body in table.items():
            key = ("pins", name)
            if not NAME_RE.fullmatch(name):
                self.error(key, bad_name(name))
            same = normalised.get(norm(name))
            if same is not None:
                self.error(
                    key,
                    f"duplicate pin: '{name}' and '{same}' name the same dependency; keep one",
                )
                continue
            normalised[norm(name)] = name
            if not isinstance(body, dict):
                self.error(key, f"expected a table, got {type_name(body)}")
                continue
            pin = self.read_pin(name, body)
            if pin is not None:
                pins[name] = pin
        return pins

    def read_values(self, body: Mapping[str, Any], key: tuple[str, ...]) -> Values:
        strings = {k: self.get_str(body, (*key, k)) for k in VALUE_KEYS}
        kind = strings.pop("kind")
        install = strings.pop("install")
        if kind is not None and kind not in KINDS:
            self.error((*key, "kind"), f"unknown kind '{kind}'{one_of(kind, KINDS)}")
            kind = None
        if install is not None and install not in INSTALLS:
            self.error((*key, "install"), f"unknown install '{install}'{one_of(install, INSTALLS)}")
            install = None
        layer = strings["layer"]
        if layer is not None and not NAME_RE.fullmatch(layer):
            # the layer names a generated file, .twinbuild/pip/<layer>.txt: never a path
            self.error(
                (*key, "layer"),
                f"{layer!r} is not a layer name (lower-case letters, digits, '-' and '_'; "
                "no '/' or '..'); e.g. layer = \"late\"",
            )
            strings["layer"] = None
        return Values(kind=kind, install=install, **strings)

    def read_pin(self, name: str, body: Mapping[str, Any]) -> Pin | None:
        key = ("pins", name)
        self.unknown_keys(body, key, PIN_KEYS)
        common = self.read_values(body, key)
        overrides: dict[Platform, Values] = {}
        for platform in PLATFORMS:
            sub = self.get_table(body, (*key, platform))
            if sub is not None:
                self.unknown_keys(sub, (*key, platform), VALUE_KEYS)
                overrides[platform] = self.read_values(sub, (*key, platform))
        listed = self.get_list(body, (*key, "platforms"))
        platforms: list[Platform] = []
        for item in listed:
            if item in PLATFORMS:
                platforms.append(item)
            else:
                self.error((*key, "platforms"), unknown_platform(item))
        if "platforms" in body and not listed:
            self.error((*key, "platforms"), "empty; list at least one platform or drop the key")
        pin = Pin(
            name=name,
            common=common,
            overrides=overrides,
            platforms=tuple(platforms) if listed else PLATFORMS,
            explicit_platforms=bool(listed),
            why=self.need_str(body, (*key, "why"), "say where the pin comes from and why"),
            floating=self.get_str(body, (*key, "floating")),
            divergence=self.get_str(body, (*key, "divergence")),
            asymmetry=self.get_str(body, (*key, "asymmetry")),
            installs=self.get_str(body, (*key, "installs")),
            line=self.keylines.line_of(key),
        )
        for platform in pin.platforms:
            values = pin.values_on(platform)
            where = (*key, platform) if platform in overrides else key
            if values.kind is None:
                if "kind" not in body and "kind" not in (body.get(platform) or {}):
                    self.error((*where, "kind"), f"missing; set kind to one of {', '.join(KINDS)}")
                continue
            self.require_fields(values, where, name)
        for platform in overrides:
            if platform not in pin.platforms:
                self.error(
                    (*key, platform),
                    f"overrides a platform the pin does not apply to (platforms = {list(listed)})",
                )
        return pin

    def check_track(self, v: Values, key: tuple[str, ...]) -> None:
        """``track``: the branch a pinned commit is taken from, a plain branch name."""
        branch = v.track or ""
        if v.commit is None:
            self.error(
                (*key, "track"),
                "tracks a branch but pins no commit; a ref already follows its branch, drop track "
                "or pin the branch's commit",
            )
        elif not BRANCH_RE.fullmatch(branch) or ".." in branch or branch.endswith((".", "/")):
            self.error(
                (*key, "track"),
                f"{branch!r} is not a branch name (letters, digits, '.', '_', '-' and '/'; "
                "not starting with '-' or '/'), e.g. track = \"main\"",
            )

    def require_fields(self, v: Values, key: tuple[str, ...], name: str) -> None:
        if v.kind == "git":
            if v.repo is None:
                self.error((*key, "repo"), "missing; a git pin names its repository URL")
            if v.commit is None and v.ref is None:
                self.error((*key, "commit"), "missing; a git pin needs a full 40-hex commit")
            if v.commit is not None and v.ref is not None:
                self.error((*key, "ref"), "set either commit or ref, not both")
            if v.track is not None:
                self.check_track(v, key)
        elif v.kind == "url":
            if v.url is None:
                self.error((*key, "url"), "missing; a url pin names what it downloads")
            if v.sha256 is None:
                self.error((*key, "sha256"), "missing; a url pin carries the artifact's sha256")
        elif v.kind in ("pypi", "apt") and v.version is not None and v.range is not None:
            self.error((*key, "range"), "set either version (exact) or range (floating), not both")
        if v.kind != "git" and v.track is not None:
            self.error(
                (*key, "track"),
                f"a {v.kind} pin tracks no branch; track names the branch a git pin's commit "
                "is taken from, drop it",
            )
        typed_wrong = {(*key, "version"), (*key, "range")} & self.bad_keys
        if v.kind == "pypi" and v.version is None and v.range is None and not typed_wrong:
            self.error(
                (*key, "version"),
                f'missing; pin an exact version, or declare range = "" and floating = "why" '
                f"for an unpinned {name}",
            )
        if (v.install or "") in ("checkout", "file") and v.path is None:
            self.error(
                (*key, "path"), f"missing; install = '{v.install}' needs a path in the image"
            )
