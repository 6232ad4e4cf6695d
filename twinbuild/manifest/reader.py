"""Reading the checked TOML of ``pins/manifest.toml`` top-down: the typed getters, then the
document in file order (``schema``, ``source``, ``[variants.NAME]``, ``[groups.NAME]``,
``[build_args]``, ``[local]``) into the model; ``read_pins.py`` reads ``[pins.NAME]`` through the
same getters.

Every value is checked for its type where it is read. One :class:`Reader` reads one manifest text
and collects every problem instead of stopping at the first, each as one line ``file:line:
key.path: what is wrong; what to do`` (the lines are ``messages.py``'s), in the style of
packaging's pylock. ``loader.py`` hands it the parsed file once and builds the model from what
comes back.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from twinbuild.manifest.messages import bad_name, example, one_of, type_name, unknown_name
from twinbuild.manifest.model import (
    ARCH_NAMES,
    ARCHS,
    ARG_RE,
    LABEL_RE,
    MODULE_RE,
    NAME_RE,
    PIN_KEYS,
    REPOSITORY_RE,
    SCHEMA,
    SIZE_RE,
    SOURCE_RE,
    TAG_RE,
    VALIDATIONS,
    VENDORS,
    Arch,
    BandwidthFloor,
    BaseImage,
    Group,
    LocalProfile,
    Runners,
    Validation,
    Variant,
    Vendor,
)
from twinbuild.manifest.tomlpos import KeyLines
from twinbuild.util import values

Key = tuple[str, ...]


class Reader:
    """Collects every error of one manifest; the getters return None for a value of a wrong type
    (after saying so), so one bad key never hides the next."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.keylines = KeyLines.index(text)
        self.errors: list[str] = []
        self.bad_keys: set[Key] = set()

    def error(self, key: Key, message: str) -> None:
        dotted = ".".join(key).replace(".[", "[")  # an array entry: floors[1].gpus
        line = self.keylines.line_of(key)
        # A key missing from a table that is not in the file has no line: name the file alone.
        where = f"{self.path}:{line}" if line else str(self.path)
        text = f"{where}: {dotted}: {message}"
        if text not in self.errors:  # one key missing on two images is one problem
            self.errors.append(text)

    def line_of(self, key: Key) -> int:
        return self.keylines.line_of(key)

    def get(self, table: Mapping[str, Any], key: Key, typ: type) -> Any:
        value = table.get(key[-1])
        if value is None:
            return None
        self.bad_keys.add(key)  # until it passes the type check below
        if typ is str and not isinstance(value, str):
            self.error(key, f"expected a string, got {type_name(value)}{example(key[-1])}")
            return None
        if typ is list and (
            not isinstance(value, list) or not all(isinstance(x, str) for x in value)
        ):
            self.error(key, f"expected a list of strings, got {_list_type(value)}")
            return None
        if typ is dict and not isinstance(value, dict):
            self.error(key, f"expected a table, got {type_name(value)}")
            return None
        if typ is int and (not isinstance(value, int) or isinstance(value, bool)):
            self.error(key, f"expected an integer, got {type_name(value)}")
            return None
        self.bad_keys.discard(key)
        return value

    def get_str(self, table: Mapping[str, Any], key: Key) -> str | None:
        return cast(str | None, self.get(table, key, str))

    def need_str(self, table: Mapping[str, Any], key: Key, hint: str) -> str:
        value = self.get_str(table, key)
        if value is None and key[-1] not in table:
            self.error(key, f"missing; {hint}")
        return value or ""

    def get_list(self, table: Mapping[str, Any], key: Key) -> tuple[str, ...]:
        return tuple(self.get(table, key, list) or ())

    def get_table(self, table: Mapping[str, Any], key: Key) -> dict[str, Any] | None:
        return cast(dict[str, Any] | None, self.get(table, key, dict))

    def need_table(self, table: Mapping[str, Any], key: Key, hint: str) -> dict[str, Any] | None:
        """A table that must be there: None (and one error) when it is missing or not a table."""
        value = self.get_table(table, key)
        if value is None and key[-1] not in table:
            self.error(key, f"missing; {hint}")
        return value

    def choice(
        self, table: Mapping[str, Any], key: Key, choices: tuple[str, ...], hint: str
    ) -> str | None:
        """A string that must be one of ``choices``; None (after one error) otherwise."""
        value = self.get_str(table, key)
        if value is None:
            if key[-1] not in table and hint:
                self.error(key, f"missing; {hint}")
            return None
        if value not in choices:
            self.error(key, f"unknown {key[-1]} '{value}'{one_of(value, choices)}")
            return None
        return value

    def name(self, key: Key, name: str, what: str) -> bool:
        """Whether ``name`` (the last part of ``key``) may name a ``what``: it becomes a file
        name, a tag or a build arg."""
        if NAME_RE.fullmatch(name):
            return True
        self.error(key, bad_name(name, what))
        return False

    def unknown_keys(
        self,
        table: Mapping[str, Any],
        prefix: Key,
        known: tuple[str, ...],
        *,
        also: str = "",
    ) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = (
                    f"; did you mean '{close[0]}'?"
                    if close
                    else f"; known keys: {', '.join(known)}{also}"
                )
                self.error((*prefix, key), f"unknown key{hint}")


def _list_type(value: object) -> str:
    if isinstance(value, list):
        odd = next((x for x in value if not isinstance(x, str)), None)
        return f"an array holding {type_name(odd)} {odd!r}"[:120]
    return type_name(value)


VARIANT_KEYS = (
    "vendor", "toolkit", "archs", "recipe", "base", "python", "gpu_archs", "validate", "runners",
    "build_args", "upstream", "imports", "binaries", "kernel_modules", "all_reduce_floors",
    "shm_size", "glibc",
)  # fmt: skip
#: Names a variant or group may not take: a pin's own keys (its override tables are named after
#: variants and groups), the architectures' short names (override tables of their own), the
#: profiles, and ``base`` (the registry repository of the local base beside the variants').
RESERVED = frozenset((*PIN_KEYS, *ARCH_NAMES.values(), "local", "production", "base"))
#: Build args that come from elsewhere: the base (BASE_IMAGE), the engine and BuildKit.
OWN_ARGS = frozenset(
    {
        "BASE_IMAGE", "TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT",
        "BUILDPLATFORM", "BUILDOS", "BUILDARCH", "BUILDVARIANT", "BUILDKIT_INLINE_CACHE",
        "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY",
    }
)  # fmt: skip
MAX_ARG_VALUE = 256


def read_variants(r: Reader, raw: Mapping[str, Any]) -> dict[str, Variant]:
    table = r.need_table(
        raw, ("variants",), "declare each image as [variants.NAME] (docs/manifest.md)"
    )
    out: dict[str, Variant] = {}
    if table is None:
        return out
    if not table:
        r.error(("variants",), "empty; declare at least one [variants.NAME]")
    for name, spec in table.items():
        key = ("variants", name)
        if not r.name(key, name, "variant"):
            continue
        if not name[0].isalpha():
            r.error(key, "a variant name starts with a letter (it names workflow outputs)")
            continue
        if name in RESERVED:
            r.error(key, f"'{name}' is reserved (a pin key or an architecture); rename the variant")
            continue
        if not isinstance(spec, dict):
            r.error(key, f"expected a table, got {type_name(spec)}")
            continue
        out[name] = _variant(r, name, spec, key)
    return out


def _variant(r: Reader, name: str, spec: Mapping[str, Any], key: Key) -> Variant:
    r.unknown_keys(spec, key, VARIANT_KEYS)
    vendor = r.choice(spec, (*key, "vendor"), VENDORS, "set 'nvidia' or 'amd'")
    archs = _archs(r, spec, (*key, "archs"))
    recipe = r.need_str(
        spec, (*key, "recipe"), "name the recipe folder it builds from, e.g. 'cuda' for "
        "images/cuda/Dockerfile"
    )  # fmt: skip
    if recipe and not r.name((*key, "recipe"), recipe, "recipe"):
        recipe = ""
    validate = cast(Validation, r.choice(spec, (*key, "validate"), VALIDATIONS, "") or "pr")
    base = read_base(r, spec, (*key, "base"))
    runners = _runners(r, spec, (*key, "runners"))
    if validate == "pr":
        _gateable(r, key, runners, base)
    return Variant(
        name=name,
        vendor=cast(Vendor, vendor or "nvidia"),
        toolkit=r.need_str(spec, (*key, "toolkit"), "set the CUDA or ROCm version, e.g. '12.9'"),
        archs=archs,
        recipe=recipe,
        base=base,
        python=r.need_str(spec, (*key, "python"), "set the image's Python, e.g. '3.12'"),
        gpu_archs=r.get_list(spec, (*key, "gpu_archs")),
        validate=validate,
        runners=runners,
        build_args=read_build_args(r, spec, (*key, "build_args")),
        upstream=r.get_list(spec, (*key, "upstream")),
        imports=r.get_list(spec, (*key, "imports")),
        binaries=r.get_list(spec, (*key, "binaries")),
        kernel_modules=_modules(r, spec, (*key, "kernel_modules")),
        all_reduce_floors=_floors(r, spec, (*key, "all_reduce_floors")),
        shm_size=_shm_size(r, spec, (*key, "shm_size")),
        glibc=_glibc(r, spec, (*key, "glibc")),
        line=r.line_of(key),
    )


#: A variant's glibc where the manifest does not say: manylinux_2_28 wheels run on every base here.
DEFAULT_GLIBC = "2.28"


def _glibc(r: Reader, spec: Mapping[str, Any], key: Key) -> str:
    """The base's C library version (``2.39``): the manylinux wheels ``twinbuild lock`` takes."""
    value = r.get_str(spec, key)
    if value is None:
        return DEFAULT_GLIBC
    if not re.fullmatch(r"2\.[0-9]{1,3}", value):
        r.error(key, f"{value!r} is not a glibc version like '2.39' (`ldd --version` in the base)")
        return DEFAULT_GLIBC
    return value


def _archs(r: Reader, spec: Mapping[str, Any], key: Key) -> tuple[Arch, ...]:
    if key[-1] not in spec:
        r.error(key, f'missing; list the architectures it builds, e.g. archs = ["{ARCHS[0]}"]')
        return ()
    listed = r.get_list(spec, key)
    if not listed:
        if key not in r.bad_keys:
            r.error(key, "empty; a variant builds at least one architecture")
        return ()
    out: list[Arch] = []
    for item in listed:
        if item not in ARCHS:
            r.error(
                key,
                f"unknown architecture '{item}': Docker names the ones twinbuild builds "
                f"{', '.join(ARCHS)}",
            )
            return ()
        if item in out:
            r.error(key, f"'{item}' is listed twice; list each architecture once")
            return ()
        out.append(item)
    return tuple(out)


def _runners(r: Reader, spec: Mapping[str, Any], key: Key) -> Runners:
    table = r.get_table(spec, key)
    if table is None:
        return Runners()
    r.unknown_keys(table, key, ("build", "gpu"))
    labels: dict[str, tuple[str, ...]] = {}
    for job in ("build", "gpu"):
        found = r.get_list(table, (*key, job))
        for label in found:
            if not LABEL_RE.fullmatch(label):
                r.error(
                    (*key, job),
                    f"{label!r} is not a runner label (letters, digits, '_', '.', '-'; no spaces, "
                    "commas or ${{ }} expressions)",
                )
                found = ()
                break
        labels[job] = found
    return Runners(build=labels["build"], gpu=labels["gpu"])


def _gateable(r: Reader, key: Key, runners: Runners, base: BaseImage) -> None:
    """A variant the gate requires evidence for must be buildable and GPU-testable in CI."""
    name = key[-1]
    if not runners.gpu:
        r.error(
            (*key, "runners", "gpu"),
            f'missing; the gate requires {name}\'s GPU evidence (validate = "pr"), so its GPU '
            'job needs runner labels, e.g. runners = { gpu = ["self-hosted", "gpu", '
            '"cuda"], build = [...] }; or validate it nightly (validate = "nightly")',
        )
    if not runners.build:
        r.error(
            (*key, "runners", "build"),
            f'missing; the gate requires {name}\'s evidence (validate = "pr"), so its '
            'production build needs runner labels, e.g. build = ["self-hosted", "builder"]',
        )
    if base.floating is not None:
        r.error(
            (*key, "base", "digest"),
            f"not pinned ({base.floating}); the gate cannot require evidence for an image whose "
            'base moves: pin the digest, or validate it nightly (validate = "nightly")',
        )


def read_base(r: Reader, spec: Mapping[str, Any], key: Key) -> BaseImage:
    table = r.get_table(spec, key)
    if table is None:
        if key[-1] not in spec:
            r.error(key, "missing; set base = { repository = ..., tag = ..., digest = ... }")
        # one message for the missing (or mistyped) table, not one more per key inside it
        return BaseImage(repository="", tag="", digest="", line=r.line_of(key))
    r.unknown_keys(table, key, ("repository", "tag", "digest", "floating"))
    repository = r.need_str(table, (*key, "repository"), "name the base image repository")
    tag = r.need_str(table, (*key, "tag"), "give the readable tag")
    if repository and not REPOSITORY_RE.fullmatch(repository):
        r.error(
            (*key, "repository"),
            f"{repository!r} is not an image repository (lower case, no spaces); "
            "e.g. 'lmsysorg/sglang'",
        )
    if tag and not TAG_RE.fullmatch(tag):
        r.error(
            (*key, "tag"),
            f"{tag!r} is not a Docker tag (letters, digits, '_', '.', '-'; no spaces or '|'); "
            "e.g. 'v0.5.6-cu129'",
        )
    digest = r.need_str(table, (*key, "digest"), "pin the base by 'sha256:<64 hex>'")
    floating = r.get_str(table, (*key, "floating"))
    if floating is not None and not floating.strip():
        r.error((*key, "floating"), "empty; say why the base has no digest yet")
    if "digest" in table and not digest and floating is None and (*key, "digest") not in r.bad_keys:
        r.error(
            (*key, "digest"),
            "empty; pin the base by 'sha256:<64 hex>' (docker buildx imagetools inspect "
            f'{repository}:{tag} shows it), or declare floating = "why no digest is pinned"',
        )
    if digest and floating is not None:
        r.error((*key, "floating"), "the base is pinned by digest; drop 'floating'")
    return BaseImage(
        repository=repository, tag=tag, digest=digest, floating=floating or None,
        line=r.line_of(key),
    )  # fmt: skip


def read_build_args(r: Reader, spec: Mapping[str, Any], key: Key) -> dict[str, str]:
    """Recipe settings a build receives as build args: NAME = "value" (or an integer).

    Names say what a value may be: ``*_FORCE_BUILD`` is TRUE or FALSE; ``*_GB_PER_JOB``,
    ``*_THREADS`` and ``*_JOBS`` are whole numbers from 1 to 4096.
    """
    table = r.get_table(spec, key)
    out: dict[str, str] = {}
    for name, value in (table or {}).items():
        at = (*key, name)
        if not ARG_RE.fullmatch(name):
            r.error(at, "a build arg is upper-case letters, digits and '_', at most 64, e.g. "
                    "KERNELS_GB_PER_JOB")  # fmt: skip
            continue
        if name in OWN_ARGS or name.startswith("TWINBUILD_"):
            r.error(at, f"{name} is given by twinbuild or the engine, not by build_args")
            continue
        text = _arg_value(r, at, value)
        if text is not None:
            out[name] = text
    return out


def _arg_value(r: Reader, at: Key, value: object) -> str | None:
    name = at[-1]
    if isinstance(value, bool) or not isinstance(value, str | int):
        r.error(at, f"expected a string or an integer, got {type_name(value)}; quote it")
        return None
    text = str(value)
    if len(text) > MAX_ARG_VALUE or not text.isprintable():
        r.error(at, f"a build arg value is one line of at most {MAX_ARG_VALUE} printable "
                "characters")  # fmt: skip
        return None
    if name.endswith("_FORCE_BUILD") and text not in ("TRUE", "FALSE"):
        r.error(at, f'{text!r}: a *_FORCE_BUILD switch is "TRUE" or "FALSE"')
        return None
    if name.endswith(("_GB_PER_JOB", "_THREADS", "_JOBS")) and values.whole_reason(
        text, low=1, high=4096
    ):
        r.error(at, f"{text!r}: a count (GB per job, threads, jobs) is a whole number 1-4096 in "
                "ASCII digits")  # fmt: skip
        return None
    return text


def _modules(r: Reader, spec: Mapping[str, Any], key: Key) -> tuple[str, ...]:
    modules = r.get_list(spec, key)
    for name in modules:
        if not MODULE_RE.fullmatch(name):
            r.error(key, f"{name!r} is not a module name (dotted Python identifiers)")
    return modules


def _shm_size(r: Reader, spec: Mapping[str, Any], key: Key) -> str | None:
    value = r.get_str(spec, key)
    if value is not None and not SIZE_RE.fullmatch(value):
        r.error(
            key,
            f"{value!r} is not a size: digits and a unit b, k, m or g, e.g. '32g'; or leave "
            "shm_size out so GPU containers share the host's IPC namespace (--ipc=host)",
        )
        return None
    return value


def _floors(r: Reader, spec: Mapping[str, Any], key: Key) -> tuple[BandwidthFloor, ...]:
    raw = spec.get(key[-1])
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        r.error(key, f"expected an array of tables ([[{'.'.join(key)}]]), got {type_name(raw)}")
        return ()
    floors: list[BandwidthFloor] = []
    seen: set[tuple[str, int]] = set()
    for index, entry in enumerate(raw):
        at = (*key, f"[{index}]")
        r.unknown_keys(entry, at, ("gpu", "gpus", "busbw_gbs", "source"))
        gpu = r.need_str(entry, (*at, "gpu"), "the device name torch reports, e.g. 'NVIDIA H200'")
        gpus = r.get(entry, (*at, "gpus"), int)
        if "gpus" not in entry:
            r.error((*at, "gpus"), "missing; how many GPUs the floor is for, e.g. 8")
        elif gpus is not None and gpus < 2:
            r.error(
                (*at, "gpus"),
                f"{gpus}: one GPU moves no data between GPUs; a floor is for 2 or more",
            )
            gpus = None
        bw = entry.get("busbw_gbs")
        if bw is None:
            r.error((*at, "busbw_gbs"), "missing; the least bus bandwidth in GB/s")
        elif isinstance(bw, bool) or not isinstance(bw, int | float) or not 0 < bw < 1e5:
            r.error((*at, "busbw_gbs"), f"expected a number of GB/s above 0, got {bw!r}")
            bw = None
        source = r.need_str(
            entry, (*at, "source"), "say where the number comes from (datasheet, a run)"
        )
        if "source" in entry and not source.strip():
            r.error((*at, "source"), "empty; say where the number comes from")
        if not gpu or gpus is None or bw is None or not source.strip():
            continue
        if (gpu, gpus) in seen:
            r.error(at, f"a second floor for {gpus}x {gpu}; keep one")
            continue
        seen.add((gpu, gpus))
        floors.append(
            BandwidthFloor(
                gpu=gpu, gpus=gpus, busbw_gbs=float(bw), source=source, line=r.line_of(at)
            )
        )
    return tuple(floors)


def read_groups(
    r: Reader, raw: Mapping[str, Any], variants: Mapping[str, Variant]
) -> dict[str, Group]:
    """``[groups.NAME]``: the variants of a vendor and/or toolkit, or a list of them."""
    table = r.get_table(raw, ("groups",))
    out: dict[str, Group] = {}
    for name, spec in (table or {}).items():
        key = ("groups", name)
        if not r.name(key, name, "group"):
            continue
        if name in RESERVED or name in variants:
            what = "a variant's name" if name in variants else "reserved"
            r.error(key, f"'{name}' is {what}; a group needs a name of its own")
            continue
        if not isinstance(spec, dict):
            r.error(key, f"expected a table (vendor, toolkit or variants), got {type_name(spec)}")
            continue
        r.unknown_keys(spec, key, ("vendor", "toolkit", "variants"))
        if not spec:
            r.error(key, "empty; select variants by vendor, toolkit or a list of variants")
            continue
        vendor = r.choice(spec, (*key, "vendor"), VENDORS, "")
        toolkit = r.get_str(spec, (*key, "toolkit"))
        listed = r.get_list(spec, (*key, "variants"))
        for item in listed:
            if item not in variants:
                r.error((*key, "variants"), unknown_name("variant", item, tuple(variants)))
        if any(k in r.bad_keys for k in ((*key, "vendor"), (*key, "toolkit"), (*key, "variants"))):
            continue
        members = tuple(
            v.name
            for v in variants.values()
            if (vendor is None or v.vendor == vendor)
            and (toolkit is None or v.toolkit == toolkit)
            and ("variants" not in spec or v.name in listed)
        )
        if not members:
            r.error(key, "selects no variant; fix its vendor, toolkit or variants")
            continue
        out[name] = Group(name=name, members=members, line=r.line_of(key))
    return out


def read_local(r: Reader, raw: Mapping[str, Any], variants: Mapping[str, Variant]) -> LocalProfile:
    key = ("local",)
    table = r.need_table(raw, key, "declare [local] (suite, packages)")
    if table is None:
        return LocalProfile(suite="", mirror="", packages=())
    r.unknown_keys(table, key, ("suite", "mirror", "packages", "imports", "variants"))
    listed = r.get_list(table, (*key, "variants"))
    for item in listed:
        if item not in variants:
            r.error((*key, "variants"), unknown_name("variant", item, tuple(variants)))
    if "variants" in table and not listed and (*key, "variants") not in r.bad_keys:
        r.error((*key, "variants"), "empty; list the variants a local build makes, or drop it")
    return LocalProfile(
        suite=r.need_str(table, (*key, "suite"), "e.g. suite = 'bookworm'"),
        mirror=r.get_str(table, (*key, "mirror")) or "",  # "": mmdebstrap's own default
        packages=r.get_list(table, (*key, "packages")),
        imports=r.get_list(table, (*key, "imports")),
        variants=tuple(v for v in listed if v in variants),
        line=r.line_of(key),
    )


TOP_KEYS = ("schema", "source", "groups", "build_args", "variants", "local", "pins")


@dataclass(frozen=True, slots=True, kw_only=True)
class Images:
    """Everything of the manifest but its pins: what ``[pins.NAME]`` is read against."""

    source: str | None
    variants: dict[str, Variant]
    groups: dict[str, Group]
    build_args: dict[str, str]
    local: LocalProfile


def read_images(r: Reader, raw: dict[str, Any]) -> Images:
    """The top keys, ``schema`` and ``source``, then every table but ``[pins]``, in that order;
    each problem one line on ``r``."""
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
    _recipes_gated(r, variants)
    return Images(
        source=source,
        variants=variants,
        groups=read_groups(r, raw, variants),
        build_args=read_build_args(r, raw, ("build_args",)),
        local=read_local(r, raw, variants),
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
