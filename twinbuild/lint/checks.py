"""The pin-symmetry lint: the manifest's policy, and recipes that take every pin from it.

Each finding is one line, ``path:line: CODE message``; the codes are stable (docs/manifest.md
lists them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from twinbuild.closure.constraints import CONSTRAINTS
from twinbuild.lint import locks, renovate_layout
from twinbuild.lint.findings import Finding
from twinbuild.manifest import url_version
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    PROFILES,
    SYMMETRIC_KEYS,
    ImageKey,
    Pin,
    PinManifest,
    ResolvedPin,
)
from twinbuild.manifest.rendered import GENERATED, Rendered, pin_args, render
from twinbuild.recipe import scan
from twinbuild.util import bounded

FULL_SHA = re.compile(r"^[0-9a-f]{40}\Z")
HEX_PREFIX = re.compile(r"^[0-9a-f]{4,39}\Z")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
ANY_HEX40 = re.compile(r"^[0-9a-fA-F]{40}\Z")
#: Reasons that say nothing: empty, punctuation alone ("-", "..."), "n/a", "none", or a to-do
#: marker with anything after it ("TODO later"). The pin's own name is caught in is_placeholder.
PLACEHOLDER = re.compile(
    r"^\s*(?:(?:todo|tbd|tba|fixme|xxx)\b.*|n/?a|none|null|nil|unknown|same|[-_.?!:*~/]*)\s*$",
    re.IGNORECASE | re.DOTALL,
)

#: Build args the engine or BuildKit provides; a recipe may declare them without the manifest.
BUILTIN_ARGS = frozenset(
    {
        "TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT", "BUILDPLATFORM", "BUILDOS",
        "BUILDARCH", "BUILDVARIANT", "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY",
        "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "BUILDKIT_INLINE_CACHE",
    }
)  # fmt: skip

CODES: dict[str, str] = {
    "TB001": "pin differs between variants without a declared divergence naming them",
    "TB002": "divergence names a variant whose pin is the same as the other variants'",
    "TB003": "pin not on every variant without an asymmetry reason",
    "TB004": "git commit is not a full 40-hex SHA",
    "TB005": "floating ref (branch, tag, range, unpinned) not declared floating",
    "TB006": "version or range does not parse (PEP 440)",
    "TB007": "reason is missing, empty or a placeholder (TODO, n/a, none, -, the pin's name)",
    "TB008": "base image not pinned by sha256 digest (nor declared floating)",
    "TB009": "url pin's sha256 is not 64 hex",
    "TB010": "declared floating ref (fails only with --strict)",
    "TB011": "declared floating but actually pinned",
    "TB012": "url pin's version is not the version its url carries (or `installs` says nothing)",
    "TB013": "pin not laid out the way Renovate's managers read it (.github/renovate.json)",
    "TB101": "literal pin written in a recipe",
    "TB102": "FROM not fed by the manifest",
    "TB103": "recipe needs a build input the manifest does not give",
    "TB104": "manifest pin that no recipe uses",
    "TB105": "recipe line looks like a pin but cannot be classified",
    "TB106": "recipe's # syntax= frontend not pinned by digest",
    "TB107": "recipe setting (build_args) that no recipe of its variants declares",
    **locks.CODES,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LintReport:
    findings: list[Finding]
    floating: list[Finding]

    def to_json(self) -> str:
        return json.dumps(
            {"findings": [asdict(f) for f in self.findings], "codes": CODES}, indent=2
        )


def is_placeholder(reason: str | None, *, name: str | None = None) -> bool:
    """A reason that explains nothing (``name``: the pin's own name is no reason either)."""
    if reason is None or PLACEHOLDER.match(reason):
        return True
    return name is not None and _norm(reason.strip()) == _norm(name)


def _norm(name: str) -> str:
    return re.sub(r"[-_.\s]+", "-", name).lower()


class _Collector:
    def __init__(self, manifest: PinManifest) -> None:
        self.manifest = manifest
        self.findings: list[Finding] = []
        self.floating: list[Finding] = []
        self._seen: set[Finding] = set()

    def add(self, code: str, message: str, *key: str) -> None:
        line = self.manifest.line_of(*key)
        self.add_at(self.manifest.path, line, code, message)

    def add_at(self, path: Path | str, line: int, code: str, message: str) -> None:
        finding = Finding(path=str(path), line=line, code=code, message=message)
        if finding not in self._seen:  # a common value is checked once per platform
            self._seen.add(finding)
            self.findings.append(finding)


def lint_manifest(manifest: PinManifest, *, strict: bool = False) -> LintReport:
    """Policy checks on the manifest alone."""
    out = _Collector(manifest)
    for name, variant in manifest.variants.items():
        base, key = variant.base, ("variants", name, "base", "digest")
        if base.floating is not None and not base.digest:
            _floating(out, manifest, f"variants.{name}.base: no digest yet ({base.floating})",
                      ("variants", name, "base", "floating"), strict=strict)  # fmt: skip
        elif not DIGEST.match(base.digest):
            out.add(
                "TB008",
                f"variants.{name}.base.digest: '{base.digest}' is not 'sha256:<64 hex>'; "
                f"pin {base.repository}:{base.tag} by digest",
                *key,
            )
    # Resolve each image once: per-pin resolution would make the lint quadratic in pins.
    per_image = {i: {r.name: r for r in manifest.resolve(i)} for i in manifest.images()}
    for pin in manifest.pins.values():
        resolved = {i: found[pin.name] for i, found in per_image.items() if pin.name in found}
        _lint_pin(out, manifest, pin, resolved, strict=strict)
    return LintReport(findings=out.findings, floating=out.floating)


def _floating(
    out: _Collector, manifest: PinManifest, message: str, key: tuple[str, ...], *, strict: bool
) -> None:
    finding = Finding(
        path=str(manifest.path), line=manifest.line_of(*key), code="TB010", message=message
    )
    out.floating.append(finding)
    if strict:
        out.findings.append(finding)


def _symmetry(
    out: _Collector, manifest: PinManifest, pin: Pin, resolved: dict[ImageKey, ResolvedPin]
) -> None:
    """A pin is the same on every variant but those its divergence names (TB001); each variant
    it names differs from the rest (TB002). Compared architecture by architecture: an arm64
    image's own values (``[pins.NAME.arm64]``) are no divergence."""
    key = ("pins", pin.name)
    named: dict[str, str] = {}  # variant -> the divergence key naming it
    for selector in pin.divergence or {}:
        for variant in manifest.members(selector):
            named.setdefault(variant, selector)
    archs = dict.fromkeys(i.arch for i in resolved)
    unnamed_differ: list[str] = []
    same_as_rest: dict[str, set[str]] = {s: set() for s in pin.divergence or {}}
    differs_somewhere: set[str] = set()
    for arch in archs:
        images = {i.variant: r for i, r in resolved.items() if i.arch == arch}
        rest = {v: r.value_key() for v, r in images.items() if v not in named}
        if len(set(rest.values())) > 1:
            unnamed_differ.append(_differences(manifest, pin, images, rest))
        reference = next(iter(rest.values()), None)
        for variant, r in images.items():
            naming = named.get(variant)
            if naming is None:
                continue
            if reference is not None and r.value_key() == reference:
                same_as_rest[naming].add(variant)
            else:
                differs_somewhere.add(variant)
    if unnamed_differ:
        first = next((s for s in pin.overrides if s not in ("amd64", "arm64")), None)
        where = (*key, first) if first else key
        out.add(
            "TB001",
            f"pins.{pin.name}: {unnamed_differ[0]}; move them together (twinbuild pins bump), "
            f'or declare divergence = {{ VARIANT = "reason" }} naming those that differ',
            *where,
        )
    everywhere_same = all(
        len({r.value_key() for i, r in resolved.items() if i.arch == a}) == 1 for a in archs
    )
    for selector in pin.divergence or {}:
        members = [v for v in manifest.members(selector) if v in pin.variants]
        if everywhere_same or (members and all(
            v in same_as_rest[selector] and v not in differs_somewhere for v in members
        )):  # fmt: skip
            others = "every variant" if everywhere_same else "the variants it does not name"
            out.add(
                "TB002",
                f"pins.{pin.name}.divergence.{selector}: {selector} has the same values as "
                f"{others}; drop it from 'divergence'",
                *key, "divergence", selector,
            )  # fmt: skip


def _lint_pin(
    out: _Collector,
    manifest: PinManifest,
    pin: Pin,
    resolved: dict[ImageKey, ResolvedPin],
    *,
    strict: bool,
) -> None:
    key = ("pins", pin.name)
    if is_placeholder(pin.why, name=pin.name):
        out.add("TB007", f"pins.{pin.name}.why: give the pin's provenance, not '{pin.why}'",
                *key, "why")  # fmt: skip
    if len(pin.variants) > 1 or pin.divergence:
        _symmetry(out, manifest, pin, resolved)
    if len(pin.variants) < len(manifest.variants) and pin.asymmetry is None:
        out.add(
            "TB003",
            f"pins.{pin.name}: only on {', '.join(pin.listed or pin.variants)}; "
            f"add asymmetry = \"why the other variants do without it\"",
            *key, "variants",
        )  # fmt: skip
    _url_versions(out, manifest, pin, resolved)
    reasons = [(f, getattr(pin, f)) for f in ("asymmetry", "floating", "installs")]
    reasons += [(f"divergence.{k}", v) for k, v in (pin.divergence or {}).items()]
    for field_name, reason in reasons:
        if reason is not None and is_placeholder(reason, name=pin.name):
            out.add("TB007", f"pins.{pin.name}.{field_name}: '{reason}' is a placeholder; "
                    "write the real reason", *key, *field_name.split("."))  # fmt: skip
    floats: list[tuple[str, ImageKey]] = []
    float_key: tuple[str, ...] = key
    for image, r in resolved.items():
        where = next((
            (*key, s) for s in reversed(manifest.selectors(image)) if s in pin.overrides
        ), key)  # fmt: skip
        found = _lint_values(out, r, where)
        if found and not floats:  # the line of the first key that floats: its ref or range
            float_key = (*where, "ref" if r.values.ref is not None else "range")
        floats += [(what, image) for what in found]
    if floats and pin.floating is None:
        out.add("TB005",
                f"pins.{pin.name}: {_joined(manifest, floats)}; pin it, or declare "
                'floating = "why"',
                *float_key)  # fmt: skip
    elif floats and pin.floating is not None:
        _floating(out, manifest, f"pins.{pin.name}: floating ({_joined(manifest, floats)}): "
                  f"{pin.floating}", (*key, "floating"), strict=strict)  # fmt: skip
    elif not floats and pin.floating is not None:
        out.add("TB011", f"pins.{pin.name}: declared floating but pinned on every variant; "
                "drop 'floating'", *key, "floating")  # fmt: skip


def _url_versions(
    out: _Collector, manifest: PinManifest, pin: Pin, resolved: dict[ImageKey, ResolvedPin]
) -> None:
    """A url pin's version is the one its url carries, so a version bump that forgets the url (and
    its sha256) fails here; a pin whose version is what the download installs says ``installs``.
    A version the url's (or the path's) file name says is the file's, whatever ``installs`` says:
    a note may explain a release tag, never the file."""
    key = ("pins", pin.name)
    if pin.installs is not None and not any(
        r.kind == "url" and r.values.version for r in resolved.values()
    ):
        out.add("TB012", f"pins.{pin.name}.installs: only a url pin with a version installs "
                "a version other than its download's; drop 'installs'",
                *key, "installs")  # fmt: skip
        return
    said: set[str] = set()  # each architecture's url may miss the same version: one finding
    for image, r in resolved.items():
        version, url = r.values.version, r.values.url
        if r.kind != "url" or version is None or url is None:
            continue
        try:
            Version(version)
        except ValueError:  # InvalidVersion, or a number over Python's 4,300 digits
            continue  # TB006 says what is wrong with it
        where = next((
            (*key, s) for s in reversed(manifest.selectors(image)) if s in pin.overrides
        ), key)  # fmt: skip
        for message, field in _file_names(pin.name, version, url, r.values.path):
            if message not in said:
                said.add(message)
                out.add("TB012", message, *where, field)
        if pin.installs is not None or url_version.carries(url, version):
            continue
        found = url_version.versions_in(url)
        carried = f"carries {', '.join(found)}" if found else "carries no version"
        message = (
            f"pins.{pin.name}.version: '{version}' but its url {carried}; move both with "
            f"twinbuild pins bump {pin.name} --version {version} (it moves the url and takes a "
            "new sha256), or, where the download installs that version, say so: installs = "
            '"what it installs"'
        )
        if message not in said:
            said.add(message)
            out.add("TB012", message, *where, "version")


def _file_names(name: str, version: str, url: str, path: str | None) -> list[tuple[str, str]]:
    """(message, field) for the url and the path whose file name says another version."""
    found: list[tuple[str, str]] = []
    for field, value in (("url", url), ("path", path or "")):
        named = url_version.file_versions(value)
        if not named or version in named:
            continue
        file = url_version.file_name(value)
        fix = (
            f"bump the pin with its download: twinbuild pins bump {name} --version {version} "
            "--url URL_OF_THAT_VERSION"
            if field == "url"
            else "name the file after the version it holds (a bump moves both)"
        )
        found.append((
            f"pins.{name}.{field}: its file name '{file}' says {', '.join(named)} but the "
            f"version is '{version}'; installs may explain a release tag, never the file: {fix}",
            field,
        ))  # fmt: skip
    return found


def _joined(manifest: PinManifest, floats: list[tuple[str, ImageKey]]) -> str:
    """``git ref 'main' on every variant``: one description, the images it floats on."""
    order: dict[str, list[ImageKey]] = {}
    for what, image in floats:
        order.setdefault(what, []).append(image)
    every = set(manifest.images())
    return "; ".join(
        f"{what} on {'every variant' if set(images) == every else manifest.label(images)}"
        for what, images in order.items()
    )


def _differences(
    manifest: PinManifest,
    pin: Pin,
    images: dict[str, ResolvedPin],
    rest: dict[str, tuple[str | None, ...]],
) -> str:
    """``version cu13='1' cu12-x86='2'``: what differs among the variants no divergence names."""
    parts = []
    for n in SYMMETRIC_KEYS:
        seen = {v: getattr(images[v].values, n) for v in rest}
        if len(set(seen.values())) > 1:
            parts.append(f"{n} " + " ".join(f"{v}={x!r}" for v, x in seen.items()))
    return "differs: " + ", ".join(parts)


def _lint_values(out: _Collector, r: ResolvedPin, key: tuple[str, ...]) -> list[str]:
    """Check one image's values; return descriptions of what floats."""
    floats: list[str] = []
    label = ".".join(key)
    if r.kind == "git":
        if (
            r.values.commit is not None
            and ANY_HEX40.match(r.values.commit)
            and not FULL_SHA.match(r.values.commit)
        ):
            out.add(
                "TB004",
                f"{label}.commit: '{r.values.commit}' has upper-case hex; git names commits in "
                f"lower case: write '{r.values.commit.lower()}'",
                *key, "commit",
            )  # fmt: skip
        elif r.values.commit is not None and not FULL_SHA.match(r.values.commit):
            hint = (
                "a short SHA is ambiguous and may not exist upstream"
                if HEX_PREFIX.match(r.values.commit)
                else "a branch or tag moves"
            )
            out.add(
                "TB004",
                f"{label}.commit: '{r.values.commit}' is not a full 40-hex commit ({hint}); "
                f"pin the merge commit, e.g. twinbuild pins bump {r.name} --commit <40 hex>",
                *key, "commit",
            )  # fmt: skip
        if r.values.ref is not None:
            floats.append(f"git ref '{r.values.ref}'")
    if r.values.version is not None and r.kind in ("pypi", "url"):
        try:
            Version(r.values.version)
        except ValueError:  # InvalidVersion, or a number over Python's 4,300 digits
            out.add("TB006", f"{label}.version: '{r.values.version}' is not a PEP 440 version",
                    *key, "version")  # fmt: skip
    if r.values.range is not None:
        if r.kind == "pypi":
            try:
                SpecifierSet(r.values.range)
            except InvalidSpecifier:
                out.add("TB006", f"{label}.range: '{r.values.range}' is not a PEP 440 specifier",
                        *key, "range")  # fmt: skip
        floats.append(f"range '{r.values.range}'" if r.values.range else "unpinned")
    if r.kind == "apt" and r.values.version is None and r.values.range is None:
        floats.append("apt package unpinned")
    if r.kind == "url" and r.values.sha256 == "":
        floats.append("sha256 not pinned")
    elif r.kind == "url" and r.values.sha256 is not None and not SHA256.match(r.values.sha256):
        out.add("TB009", f"{label}.sha256: '{r.values.sha256}' is not 64 lower-case hex",
                *key, "sha256")  # fmt: skip
    return floats


# -- recipes -------------------------------------------------------------------------------------


def lint_recipes(manifest: PinManifest, root: Path) -> list[Finding]:
    """Every recipe takes its pins from the manifest, needs nothing else, and installs every pin
    its profile installs on each image built from it."""
    out = _Collector(manifest)
    parsed: dict[Path, scan.Recipe] = {}
    renders = [render(manifest, i, p) for i in manifest.images() for p in PROFILES[::-1]]
    production_args = {a for r in renders if r.profile == "production" for a in r.args}
    for rendered in renders:
        path = root / rendered.recipe
        if path not in parsed:
            parsed[path] = scan.parse(path)
            _literal_pins(out, parsed[path], rendered.recipe)
            _frontend(out, path, rendered.recipe)
        _inputs(out, parsed[path], rendered, production_args)
    _settings_used(out, manifest, parsed, root)
    return out.findings


def _settings_used(
    out: _Collector, manifest: PinManifest, parsed: dict[Path, scan.Recipe], root: Path
) -> None:
    """Each recipe setting reaches a recipe: a shared one some variant's, a variant's own its."""
    declared = {
        name: {
            a.name for a in parsed[root / render(manifest, v.images()[0], "production").recipe].args
        }
        for name, v in manifest.variants.items()
        if v.archs
    }
    for arg in manifest.build_args:
        if not any(arg in found for found in declared.values()):
            out.add("TB107", f"build_args.{arg}: no variant's recipe declares ARG {arg}; use it "
                    "in a recipe or drop it", "build_args", arg)  # fmt: skip
    for name, variant in manifest.variants.items():
        for arg in variant.build_args:
            if arg not in declared.get(name, set()):
                recipe = f"images/{variant.recipe}/Dockerfile"
                out.add("TB107", f"variants.{name}.build_args.{arg}: {recipe} declares no ARG "
                        f"{arg}; use it there or drop it",
                        "variants", name, "build_args", arg)  # fmt: skip


_DIRECTIVE = re.compile(r"#\s*([A-Za-z]+)\s*=\s*(\S*)\s*$")
_PINNED_FRONTEND = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")


def _frontend(out: _Collector, path: Path, rel: Path) -> None:
    """The ``# syntax=`` frontend is an image BuildKit pulls and runs: a tag alone can move."""
    text = bounded.read_text(path, limit=scan.MAX_BYTES, what="recipe")
    for number, line in enumerate(text.splitlines(), start=1):
        directive = _DIRECTIVE.match(line)
        if directive is None:
            return  # parser directives come first; the first other line ends them
        name, value = directive.group(1).lower(), directive.group(2)
        if name == "syntax" and not _PINNED_FRONTEND.fullmatch(value):
            out.add_at(
                rel, number, "TB106",
                f"# syntax={value}: the frontend BuildKit pulls and runs is not pinned by digest; "
                "write # syntax=IMAGE:TAG@sha256:<64 hex> (Renovate moves it)",
            )  # fmt: skip


def _literal_pins(out: _Collector, parsed: scan.Recipe, rel: Path) -> None:
    for item in parsed.pins:
        if not item.literal:
            continue
        if item.source == "from":
            out.add_at(rel, item.line, "TB102",
                       f"FROM {item.text} is written in the recipe; use FROM ${{BASE_IMAGE}}, "
                       "which the manifest's variants.<v>.base feeds")  # fmt: skip
        elif item.source != "env":
            out.add_at(rel, item.line, "TB101",
                       f"literal pin '{item.text}' ({item.source}); move it into pins/ and read it "
                       "from a build arg or .twinbuild/pip/<layer>.txt")  # fmt: skip
    for odd in parsed.unrecognised:
        out.add_at(
            rel,
            odd.line,
            "TB105",
            f"cannot classify '{odd.text}'; rewrite it to take its pin from the manifest",
        )
    for note in parsed.notes:  # ONBUILD: its triggers run in stages built FROM this one, unread
        out.add_at(
            rel,
            note.line,
            "TB105",
            f"cannot classify '{note.text}' (an ONBUILD trigger runs in whatever is built "
            "FROM this stage); write the step as a plain instruction where it runs",
        )


def _inputs(
    out: _Collector,
    parsed: scan.Recipe,
    rendered: Rendered,
    production_args: set[str],
) -> None:
    rel, image, profile = rendered.recipe, rendered.image, rendered.profile
    given = set(rendered.args)
    for arg in parsed.args:
        if (
            arg.default is None
            and arg.inherited is None
            and arg.name not in given
            and arg.name not in BUILTIN_ARGS
        ):
            if arg.name in production_args:  # another variant's pin or setting, a shared recipe
                continue
            out.add_at(rel, arg.line, "TB103",
                       f"ARG {arg.name} has no default and the manifest gives no such build arg "
                       f"for {image.name}; add the pin to pins/ or remove the ARG")  # fmt: skip
    copied = {src for _, src in parsed.copies}
    for line, src in parsed.copies:
        if src.startswith(GENERATED + "/pip/") and src not in (*rendered.files, CONSTRAINTS):
            out.add_at(rel, line, "TB103",
                       f"copies {src}, which the manifest does not generate (no pin has that "
                       "layer); fix the layer name")  # fmt: skip
    declared = {arg.name for arg in parsed.args}
    for pin in rendered.installed:
        if pin.install == "pip":
            layer = f"{GENERATED}/pip/{pin.layer}.txt"
            hit = any(c in copied for c in (layer, f"{GENERATED}/pip", GENERATED))
        else:
            hit = any(n in declared and n in parsed.used_vars for n in pin_args(pin))
        if not hit:
            how = (
                f"copy {GENERATED}/pip/{pin.layer}.txt and pip install it"
                if pin.install == "pip"
                else f"declare and use ARG {pin.arg_prefix()}_*"
            )
            out.add(
                "TB104",
                f"pins.{pin.name}: {rel} does not install it for {image.name} ({profile}); "
                f"{how}, or remove the pin",
                "pins", pin.name,
            )  # fmt: skip


def lint(manifest: PinManifest, root: Path, *, strict: bool = False) -> LintReport:
    """The whole lint: manifest policy plus recipe drift."""
    report = lint_manifest(manifest, strict=strict)
    findings = [*report.findings, *lint_recipes(manifest, root)]
    floating = list(report.floating)
    if locks.applies(root):  # a repository that keeps locks: TB201-TB206 too
        # a floating pin every image's lock resolves floats no more: the lock decides it
        done = locks.resolved_pins(manifest, root)
        floating = [f for f in floating if not _resolved(f, done)]
        findings = [f for f in findings if not _resolved(f, done)]
        for finding in locks.lint_locks(manifest, root):
            if finding.code in locks.STRICT_ONLY:
                floating.append(finding)
                if not strict:
                    continue
            findings.append(finding)
    if (root / renovate_layout.CONFIG).is_file():  # a repository Renovate reads: TB013 too
        laid_out = _Collector(manifest)
        renovate_layout.check(
            manifest, lambda n, text: laid_out.add_at(manifest.path, n, renovate_layout.CODE, text)
        )
        findings += laid_out.findings
    findings.sort(key=lambda f: (f.path, f.line, f.code))
    return LintReport(findings=findings, floating=floating)


def _resolved(finding: Finding, pins: frozenset[str]) -> bool:
    """A TB010 about one of ``pins`` (as :func:`_lint_pin` words it)."""
    if finding.code != "TB010" or not finding.message.startswith("pins."):
        return False
    name = finding.message.removeprefix("pins.").split(":", 1)[0]
    return name in pins


@dataclass(frozen=True, slots=True, kw_only=True)
class LintOptions:
    """What ``twinbuild lint`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    strict: bool = False  # declared floating refs fail too
    format: Literal["text", "json"] = "text"


def lint_project(options: LintOptions) -> tuple[PinManifest, LintReport]:
    """Load the manifest ``options`` names and lint it against the recipes under its root."""
    manifest = load(options.manifest)
    return manifest, lint(manifest, options.root, strict=options.strict)


def format_findings(findings: Sequence[Finding], *, github: bool) -> Iterable[str]:
    for finding in findings:
        yield str(finding)
        if github:
            yield finding.github()
