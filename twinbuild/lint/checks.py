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
from packaging.version import InvalidVersion, Version

from twinbuild.lint import renovate_layout
from twinbuild.lint.findings import Finding
from twinbuild.manifest import url_version
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    PLATFORMS,
    SYMMETRIC_KEYS,
    Manifest,
    Pin,
    Platform,
    Profile,
    ResolvedPin,
)
from twinbuild.manifest.render import GENERATED, RECIPES, pin_args, render
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
    "TB001": "pin differs between cuda and rocm without a declared divergence",
    "TB002": "divergence declared but the pin is identical on both platforms",
    "TB003": "pin on one platform only without an asymmetry reason",
    "TB004": "git commit is not a full 40-hex SHA",
    "TB005": "floating ref (branch, tag, range, unpinned) not declared floating",
    "TB006": "version or range does not parse (PEP 440)",
    "TB007": "reason is missing, empty or a placeholder (TODO, n/a, none, -, the pin's name)",
    "TB008": "base image not pinned by sha256 digest",
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
    def __init__(self, manifest: Manifest) -> None:
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


def lint_manifest(manifest: Manifest, *, strict: bool = False) -> LintReport:
    """Policy checks on the manifest alone."""
    out = _Collector(manifest)
    for name, spec in manifest.platforms.items():
        if not DIGEST.match(spec.base.digest):
            out.add(
                "TB008",
                f"platforms.{name}.base.digest: '{spec.base.digest}' is not 'sha256:<64 hex>'; "
                f"pin {spec.base.repository}:{spec.base.tag} by digest",
                "platforms", name, "base", "digest",
            )  # fmt: skip
    # Resolve each platform once: per-pin resolution would make the lint quadratic in pins.
    per_platform = {p: {r.name: r for r in manifest.resolve(p)} for p in PLATFORMS}
    for pin in manifest.pins.values():
        resolved = {p: per_platform[p][pin.name] for p in pin.platforms}
        _lint_pin(out, manifest, pin, resolved, strict=strict)
    return LintReport(findings=out.findings, floating=out.floating)


def _lint_pin(
    out: _Collector,
    manifest: Manifest,
    pin: Pin,
    resolved: dict[Platform, ResolvedPin],
    *,
    strict: bool,
) -> None:
    key = ("pins", pin.name)
    if is_placeholder(pin.why, name=pin.name):
        out.add("TB007", f"pins.{pin.name}.why: give the pin's provenance, not '{pin.why}'",
                *key, "why")  # fmt: skip
    values = {r.value_key() for r in resolved.values()}
    if len(pin.platforms) == len(PLATFORMS):
        if len(values) > 1 and pin.divergence is None:
            diffs = _differences(resolved)
            override = next(iter(pin.overrides))
            out.add(
                "TB001",
                f"pins.{pin.name}: {diffs}; move both platforms together "
                f"(twinbuild pins bump), or declare divergence = \"reason\"",
                *key, override,
            )  # fmt: skip
        if len(values) == 1 and pin.divergence is not None:
            out.add("TB002", f"pins.{pin.name}: identical on cuda and rocm; drop 'divergence'",
                    *key, "divergence")  # fmt: skip
    elif pin.asymmetry is None:
        out.add(
            "TB003",
            f"pins.{pin.name}: only on {', '.join(pin.platforms)}; "
            f"add asymmetry = \"why the other platform does without it\"",
            *key, "platforms",
        )  # fmt: skip
    _url_versions(out, pin, resolved)
    for field_name in ("divergence", "asymmetry", "floating", "installs"):
        reason = getattr(pin, field_name)
        if reason is not None and is_placeholder(reason, name=pin.name):
            out.add("TB007", f"pins.{pin.name}.{field_name}: '{reason}' is a placeholder; "
                    "write the real reason", *key, field_name)  # fmt: skip
    floats: list[str] = []
    float_key: tuple[str, ...] = key
    for platform, r in resolved.items():
        where = (*key, platform) if platform in pin.overrides else key
        found = _lint_values(out, r, where)
        if found and not floats:  # the line of the first key that floats: its ref or range
            float_key = (*where, "ref" if r.values.ref is not None else "range")
        floats += found
    if floats and pin.floating is None:
        out.add("TB005",
                f"pins.{pin.name}: {_joined(floats)}; pin it, or declare floating = \"why\"",
                *float_key)  # fmt: skip
    elif floats and pin.floating is not None:
        finding = Finding(
            path=str(manifest.path), line=manifest.line_of(*key, "floating"), code="TB010",
            message=f"pins.{pin.name}: floating ({_joined(floats)}): {pin.floating}",
        )  # fmt: skip
        out.floating.append(finding)
        if strict:
            out.findings.append(finding)
    elif not floats and pin.floating is not None:
        out.add("TB011", f"pins.{pin.name}: declared floating but pinned on every platform; "
                "drop 'floating'", *key, "floating")  # fmt: skip


def _url_versions(out: _Collector, pin: Pin, resolved: dict[Platform, ResolvedPin]) -> None:
    """A url pin's version is the one its url carries, so a version bump that forgets the url (and
    its sha256) fails here; a pin whose version is what the download installs says ``installs``."""
    key = ("pins", pin.name)
    if pin.installs is not None:
        if not any(r.kind == "url" and r.values.version for r in resolved.values()):
            out.add("TB012", f"pins.{pin.name}.installs: only a url pin with a version installs "
                    "a version other than its download's; drop 'installs'",
                    *key, "installs")  # fmt: skip
        return
    for platform, r in resolved.items():
        version, url = r.values.version, r.values.url
        if r.kind != "url" or version is None or url is None or url_version.carries(url, version):
            continue
        try:
            Version(version)
        except InvalidVersion:
            continue  # TB006 says what is wrong with it
        where = (*key, platform) if platform in pin.overrides else key
        found = url_version.versions_in(url)
        carried = f"carries {', '.join(found)}" if found else "carries no version"
        out.add(
            "TB012",
            f"pins.{pin.name}.version: '{version}' but its url {carried}; move both with "
            f"twinbuild pins bump {pin.name} --version {version} (it moves the url and takes a "
            "new sha256), or, where the download installs that version, say so: installs = "
            '"what it installs"',
            *where, "version",
        )  # fmt: skip


def _joined(floats: list[str]) -> str:
    """``git ref 'main' on cuda and rocm``: one description, every platform it floats on."""
    order: dict[str, list[str]] = {}
    for text in floats:
        what, sep, platform = text.rpartition(" on ")
        if sep and platform in PLATFORMS:
            order.setdefault(what, []).append(platform)
        else:
            order.setdefault(text, [])
    return "; ".join(
        f"{what} on {' and '.join(platforms)}" if platforms else what
        for what, platforms in order.items()
    )


def _differences(resolved: dict[Platform, ResolvedPin]) -> str:
    cuda, rocm = resolved["cuda"], resolved["rocm"]
    parts = [
        f"{n} cuda={getattr(cuda.values, n)!r} rocm={getattr(rocm.values, n)!r}"
        for n in SYMMETRIC_KEYS
        if getattr(cuda.values, n) != getattr(rocm.values, n)
    ]
    return "differs: " + ", ".join(parts)


def _lint_values(out: _Collector, r: ResolvedPin, key: tuple[str, ...]) -> list[str]:
    """Check one platform's values; return descriptions of what floats."""
    floats: list[str] = []
    label = f"pins.{r.name}" + (f".{r.platform}" if key[-1] in PLATFORMS else "")
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
            floats.append(f"git ref '{r.values.ref}' on {r.platform}")
    if r.values.version is not None and r.kind in ("pypi", "url"):
        try:
            Version(r.values.version)
        except InvalidVersion:
            out.add("TB006", f"{label}.version: '{r.values.version}' is not a PEP 440 version",
                    *key, "version")  # fmt: skip
    if r.values.range is not None:
        if r.kind == "pypi":
            try:
                SpecifierSet(r.values.range)
            except InvalidSpecifier:
                out.add("TB006", f"{label}.range: '{r.values.range}' is not a PEP 440 specifier",
                        *key, "range")  # fmt: skip
        floats.append(
            f"range '{r.values.range}' on {r.platform}"
            if r.values.range
            else f"unpinned on {r.platform}"
        )
    if r.kind == "apt" and r.values.version is None and r.values.range is None:
        floats.append(f"apt package unpinned on {r.platform}")
    if r.kind == "url" and r.values.sha256 is not None and not SHA256.match(r.values.sha256):
        out.add("TB009", f"{label}.sha256: '{r.values.sha256}' is not 64 lower-case hex",
                *key, "sha256")  # fmt: skip
    return floats


# -- recipes -------------------------------------------------------------------------------------


def lint_recipes(manifest: Manifest, root: Path) -> list[Finding]:
    """Every recipe takes its pins from the manifest, needs nothing else, and installs every pin
    its profile installs on its platform."""
    out = _Collector(manifest)
    parsed: dict[Path, scan.Recipe] = {}
    production_args = {a for p in PLATFORMS for a in render(manifest, p, "production").args}
    for profile, per_platform in RECIPES.items():
        for platform, rel in per_platform.items():
            path = root / rel
            if path not in parsed:
                parsed[path] = scan.parse(path)
                _literal_pins(out, parsed[path], rel)
                _frontend(out, path, rel)
            _inputs(out, manifest, parsed[path], rel, platform, profile, production_args)
    return out.findings


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
                       "which the manifest's platforms.<p>.base feeds")  # fmt: skip
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
    manifest: Manifest,
    parsed: scan.Recipe,
    rel: Path,
    platform: Platform,
    profile: Profile,
    production_args: set[str],
) -> None:
    rendered = render(manifest, platform, profile)
    given = set(rendered.args)
    for arg in parsed.args:
        if (
            arg.default is None
            and arg.inherited is None
            and arg.name not in given
            and arg.name not in BUILTIN_ARGS
        ):
            if arg.name in production_args:  # the other platform's pin, in a shared recipe
                continue
            out.add_at(rel, arg.line, "TB103",
                       f"ARG {arg.name} has no default and the manifest gives no such build arg "
                       f"for {platform}; add the pin to pins/ or remove the ARG")  # fmt: skip
    copied = {src for _, src in parsed.copies}
    for line, src in parsed.copies:
        if src.startswith(GENERATED + "/pip/") and src not in rendered.files:
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
                f"pins.{pin.name}: {rel} does not install it for {platform} ({profile}); "
                f"{how}, or remove the pin",
                "pins", pin.name,
            )  # fmt: skip


def lint(manifest: Manifest, root: Path, *, strict: bool = False) -> LintReport:
    """The whole lint: manifest policy plus recipe drift."""
    report = lint_manifest(manifest, strict=strict)
    findings = [*report.findings, *lint_recipes(manifest, root)]
    if (root / renovate_layout.CONFIG).is_file():  # a repository Renovate reads: TB013 too
        laid_out = _Collector(manifest)
        renovate_layout.check(
            manifest, lambda n, text: laid_out.add_at(manifest.path, n, renovate_layout.CODE, text)
        )
        findings += laid_out.findings
    findings.sort(key=lambda f: (f.path, f.line, f.code))
    return LintReport(findings=findings, floating=report.floating)


@dataclass(frozen=True, slots=True, kw_only=True)
class LintOptions:
    """What ``twinbuild lint`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    strict: bool = False  # declared floating refs fail too
    format: Literal["text", "json"] = "text"


def lint_project(options: LintOptions) -> tuple[Manifest, LintReport]:
    """Load the manifest ``options`` names and lint it against the recipes under its root."""
    manifest = load(options.manifest)
    return manifest, lint(manifest, options.root, strict=options.strict)


def format_findings(findings: Sequence[Finding], *, github: bool) -> Iterable[str]:
    for finding in findings:
        yield str(finding)
        if github:
            yield finding.github()
