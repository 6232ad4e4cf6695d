"""Reading ``[pins.NAME]``: common values, override tables per selector (a group, a variant or
an architecture), the variants a pin applies to and the divergences it declares.

Every key is type-checked where it is read: an override table that is an integer, a divergence
that names no variant, a selector no variant of the pin answers to are each one line naming
file:line and the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twinbuild.manifest.messages import one_of, type_name, unknown_name
from twinbuild.manifest.model import (
    ARCH_NAMES,
    BRANCH_RE,
    INSTALLS,
    KINDS,
    NAME_RE,
    PIN_KEYS,
    VALUE_KEYS,
    Group,
    Pin,
    Values,
    Variant,
    arg_prefix,
    norm,
)
from twinbuild.manifest.reader import Key, Reader


def read_pins(
    r: Reader,
    raw: Mapping[str, Any],
    variants: Mapping[str, Variant],
    groups: Mapping[str, Group],
) -> dict[str, Pin]:
    table = r.need_table(raw, ("pins",), "declare at least one [pins.NAME] table")
    pins: dict[str, Pin] = {}
    if table is None:
        return pins
    normalised: dict[str, str] = {}
    reading = _PinReader(r, variants, groups)
    for name, body in table.items():
        key = ("pins", name)
        if not NAME_RE.fullmatch(name):
            r.name(key, name, "pin")
        same = normalised.get(norm(name))
        if same is not None:
            r.error(key, f"duplicate pin: '{name}' and '{same}' name the same dependency; keep one")
            continue
        normalised[norm(name)] = name
        if not isinstance(body, dict):
            r.error(key, f"expected a table, got {type_name(body)}")
            continue
        pins[name] = reading.pin(name, body)
    return pins


#: The fields a pin hands a recipe as ``<PIN>_<FIELD>`` build args (``manifest.rendered``).
PIN_ARG_FIELDS = ("REPO", "COMMIT", "REF", "URL", "SHA256", "VERSION", "PACKAGE")


def check_build_args(
    r: Reader, pins: Mapping[str, Pin], shared: Mapping[str, str], variants: Mapping[str, Variant]
) -> None:
    """A recipe setting must not take the name of a pin's build arg (``<PIN>_<FIELD>``)."""
    owners = {f"{arg_prefix(name)}_{f}": name for name in pins for f in PIN_ARG_FIELDS}
    places: list[tuple[Key, Mapping[str, str]]] = [(("build_args",), shared)]
    places += [(("variants", v.name, "build_args"), v.build_args) for v in variants.values()]
    for key, args in places:
        for arg in args:
            owner = owners.get(arg)
            if owner is not None:
                r.error((*key, arg), f"{arg} is pins.{owner}'s build arg; name the setting "
                        "otherwise")  # fmt: skip


class _PinReader:
    def __init__(
        self, r: Reader, variants: Mapping[str, Variant], groups: Mapping[str, Group]
    ) -> None:
        self.r = r
        self.variants = variants
        self.groups = groups
        self.arches = {short: arch for arch, short in ARCH_NAMES.items()}
        self.names = (*variants, *groups)
        # Each variant's groups, in manifest order, made once: asking every group whether it
        # holds each variant of each pin made n variants cost n^2 (3,000 variants: 12 s).
        found: dict[str, list[str]] = {name: [] for name in variants}
        for group in groups.values():
            for member in dict.fromkeys(group.members):
                found.setdefault(member, []).append(group.name)
        self.groups_of = {name: tuple(names) for name, names in found.items()}

    def members(self, selector: str) -> tuple[str, ...]:
        if selector in self.variants:
            return (selector,)
        group = self.groups.get(selector)
        return group.members if group is not None else ()

    def pin(self, name: str, body: Mapping[str, Any]) -> Pin:
        r, key = self.r, ("pins", name)
        selectors = {k: v for k, v in body.items() if k not in PIN_KEYS}
        overrides: dict[str, Values] = {}
        for selector, sub in selectors.items():
            at = (*key, selector)
            if selector not in self.names and selector not in self.arches:
                known = (*PIN_KEYS, *self.names, *self.arches)
                r.unknown_keys({selector: sub}, key, known, also=" (or a variant, group or "
                               "architecture to override)")  # fmt: skip
                continue
            if not isinstance(sub, dict):
                r.error(
                    at,
                    f"expected a table of the values {selector} sets "
                    f"([pins.{name}.{selector}]), got {type_name(sub)}",
                )
                continue
            r.unknown_keys(sub, at, VALUE_KEYS)
            overrides[selector] = self.values(sub, at)
        listed = r.get_list(body, (*key, "variants"))
        applies = self.applies(key, body, listed)
        pin = Pin(
            name=name,
            common=self.values(body, key),
            overrides=overrides,
            variants=applies,
            listed=listed,
            why=r.need_str(body, (*key, "why"), "say where the pin comes from and why"),
            floating=r.get_str(body, (*key, "floating")),
            divergence=self.divergence(key, body, applies),
            asymmetry=r.get_str(body, (*key, "asymmetry")),
            installs=r.get_str(body, (*key, "installs")),
            line=r.line_of(key),
        )
        self.check_overrides(pin)
        self.check_images(pin, body)
        return pin

    def applies(
        self, key: Key, body: Mapping[str, Any], listed: tuple[str, ...]
    ) -> tuple[str, ...]:
        """The variants ``variants = [...]`` names (groups expanded), in manifest order."""
        if "variants" not in body:
            return tuple(self.variants)
        if not listed:
            if (*key, "variants") not in self.r.bad_keys:
                self.r.error((*key, "variants"), "empty; list at least one variant or drop the key")
            return ()
        named: set[str] = set()
        for item in listed:
            found = self.members(item)
            if not found:
                self.r.error((*key, "variants"), unknown_name("variant or group", item, self.names))
            named.update(found)
        return tuple(v for v in self.variants if v in named)

    def divergence(
        self, key: Key, body: Mapping[str, Any], applies: tuple[str, ...]
    ) -> dict[str, str] | None:
        """``divergence = { SELECTOR = "why it differs" }``: one reason per variant or group."""
        raw = body.get("divergence")
        at = (*key, "divergence")
        if raw is None:
            return None
        example = 'divergence = { rocm = "why the ROCm variants differ" }'
        if not isinstance(raw, dict):
            self.r.error(at, f"expected a table naming the variants it applies to, got "
                         f"{type_name(raw)}; write {example}")  # fmt: skip
            return None
        if not raw:
            self.r.error(at, f"names no variant; write {example}")
            return None
        out: dict[str, str] = {}
        for selector, reason in raw.items():
            where = (*at, selector)
            if selector in self.arches:
                self.r.error(where, "an architecture's values are not a divergence between "
                             f"variants; set them in [pins.{key[-1]}.{selector}] and drop "
                             "this key")  # fmt: skip
                continue
            members = self.members(selector)
            if not members:
                self.r.error(where, unknown_name("variant or group", selector, self.names))
                continue
            if not set(members) & set(applies):
                self.r.error(where, f"{selector} does not carry pins.{key[-1]} (variants = "
                             f"{list(applies)}); name a variant it applies to")  # fmt: skip
                continue
            if not isinstance(reason, str):
                self.r.error(where, f"expected a string (why {selector} differs), got "
                             f"{type_name(reason)}")  # fmt: skip
                continue
            out[selector] = reason
        return out if len(out) == len(raw) else None

    def values(self, body: Mapping[str, Any], key: Key) -> Values:
        r = self.r
        strings = {k: r.get_str(body, (*key, k)) for k in VALUE_KEYS}
        kind = strings.pop("kind")
        install = strings.pop("install")
        if kind is not None and kind not in KINDS:
            r.error((*key, "kind"), f"unknown kind '{kind}'{one_of(kind, KINDS)}")
            kind = None
        if install is not None and install not in INSTALLS:
            r.error((*key, "install"), f"unknown install '{install}'{one_of(install, INSTALLS)}")
            install = None
        layer = strings["layer"]
        if layer is not None and not NAME_RE.fullmatch(layer):
            # the layer names a generated file, .twinbuild/pip/<layer>.txt: never a path
            r.error(
                (*key, "layer"),
                f"{layer!r} is not a layer name (lower-case letters, digits, '-' and '_'; "
                "no '/' or '..'); e.g. layer = \"late\"",
            )
            strings["layer"] = None
        return Values(kind=kind, install=install, **strings)

    def check_overrides(self, pin: Pin) -> None:
        """Each override table answers to a variant of the pin, and no two that apply to one
        image set the same key (which one wins would be an accident of order)."""
        r, key = self.r, ("pins", pin.name)
        for selector in pin.overrides:
            if selector in self.arches:
                arch = self.arches[selector]
                if not any(arch in self.variants[v].archs for v in pin.variants):
                    r.error((*key, selector), f"no variant of pins.{pin.name} builds {arch} "
                            f"(variants = {list(pin.variants)})")  # fmt: skip
            elif not set(self.members(selector)) & set(pin.variants):
                r.error((*key, selector), f"overrides {selector}, which the pin does not apply "
                        f"to (variants = {list(pin.listed or pin.variants)})")  # fmt: skip
        for variant in pin.variants:
            groups = self.groups_of.get(variant, ())
            tables = [s for s in pin.overrides if s in groups]
            for i, one in enumerate(tables):
                for other in tables[i + 1 :]:
                    both = set(pin.overrides[one].changes()) & set(pin.overrides[other].changes())
                    if both:
                        r.error((*key, other), f"{one} and {other} both set {_keys(both)} for "
                                f"{variant}; set it in one of them, or in [pins.{pin.name}."
                                f"{variant}]")  # fmt: skip
        for short, arch in self.arches.items():
            mine = pin.overrides.get(short)
            if mine is None:
                continue
            for selector, values in pin.overrides.items():
                if selector in self.arches or not any(
                    arch in self.variants[v].archs for v in self.members(selector)
                ):
                    continue
                both = set(mine.changes()) & set(values.changes())
                if both:
                    r.error((*key, short), f"{short} and {selector} both set {_keys(both)}; an "
                            "architecture's values and a variant's must not meet")  # fmt: skip

    def check_images(self, pin: Pin, body: Mapping[str, Any]) -> None:
        """Every image the pin applies to has a kind and the fields its kind needs."""
        key = ("pins", pin.name)
        for variant in pin.variants:
            groups = self.groups_of.get(variant, ())
            for arch in self.variants[variant].archs:
                selectors = (*groups, variant, ARCH_NAMES[arch])
                values = pin.values_on(selectors)
                where = next(((*key, s) for s in reversed(selectors) if s in pin.overrides), key)
                if values.kind is None:
                    tables = [body.get(s) for s in selectors]
                    if not any(isinstance(t, dict) and "kind" in t for t in tables) and (
                        "kind" not in body
                    ):
                        self.r.error(
                            (*where, "kind"), f"missing; set kind to one of {', '.join(KINDS)}"
                        )
                    continue
                _require_fields(self.r, values, where, pin.name)


def _keys(keys: set[str]) -> str:
    return ", ".join(f"'{k}'" for k in sorted(keys))


def _check_track(r: Reader, v: Values, key: Key) -> None:
    """``track``: the branch a pinned commit is taken from, a plain branch name."""
    branch = v.track or ""
    if v.commit is None:
        r.error(
            (*key, "track"),
            "tracks a branch but pins no commit; a ref already follows its branch, drop track "
            "or pin the branch's commit",
        )
    elif not BRANCH_RE.fullmatch(branch) or ".." in branch or branch.endswith((".", "/")):
        r.error(
            (*key, "track"),
            f"{branch!r} is not a branch name (letters, digits, '.', '_', '-' and '/'; "
            "not starting with '-' or '/'), e.g. track = \"main\"",
        )


def _require_fields(r: Reader, v: Values, key: Key, name: str) -> None:
    if v.kind == "git":
        if v.repo is None:
            r.error((*key, "repo"), "missing; a git pin names its repository URL")
        if v.commit is None and v.ref is None:
            r.error((*key, "commit"), "missing; a git pin needs a full 40-hex commit")
        if v.commit is not None and v.ref is not None:
            r.error((*key, "ref"), "set either commit or ref, not both")
        if v.track is not None:
            _check_track(r, v, key)
    elif v.kind == "url":
        if v.url is None:
            r.error((*key, "url"), "missing; a url pin names what it downloads")
        if v.sha256 is None:
            r.error((*key, "sha256"), "missing; a url pin carries the artifact's sha256")
    elif v.kind in ("pypi", "apt") and v.version is not None and v.range is not None:
        r.error((*key, "range"), "set either version (exact) or range (floating), not both")
    if v.kind != "git" and v.track is not None:
        r.error(
            (*key, "track"),
            f"a {v.kind} pin tracks no branch; track names the branch a git pin's commit "
            "is taken from, drop it",
        )
    typed_wrong = {(*key, "version"), (*key, "range")} & r.bad_keys
    if v.kind == "pypi" and v.version is None and v.range is None and not typed_wrong:
        r.error(
            (*key, "version"),
            f'missing; pin an exact version, or declare range = "" and floating = "why" '
            f"for an unpinned {name}",
        )
    if (v.install or "") in ("checkout", "file") and v.path is None:
        r.error((*key, "path"), f"missing; install = '{v.install}' needs a path in the image")
