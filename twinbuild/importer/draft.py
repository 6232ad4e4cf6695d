"""``twinbuild import``: draft pins/manifest.toml from two recipes that still hard-code their pins.

Both recipes are scanned by :mod:`twinbuild.recipe.scan`; the same dependency is matched across
them by distribution name or repository URL; the draft declares every difference (divergence,
asymmetry, floating) with a ``TODO`` reason, so ``twinbuild lint`` refuses it until a person
writes them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

import tomlkit
from packaging.utils import canonicalize_name
from tomlkit.items import Table

from twinbuild.errors import ConfigError, FindingsError
from twinbuild.importer import report as drift
from twinbuild.recipe import scan as recipe
from twinbuild.recipe.scan import RecipePin, Unrecognised
from twinbuild.util.atomic import write_atomic

Platform = Literal["cuda", "rocm"]
PLATFORMS: tuple[Platform, ...] = ("cuda", "rocm")
Verdict = Literal["same", "differs", "only CUDA", "only ROCm", "floating"]
TODO = "TODO"
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_VALUE_ORDER = (
    "kind", "dist", "package", "version", "range", "repo", "commit", "ref", "url", "sha256",
    "subdirectory", "install", "path",
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One platform's view of a dependency: manifest value fields plus where the recipe says it."""

    values: Mapping[str, str]
    where: tuple[str, ...]  # "path:line", recipe order
    floating: bool
    aliases: frozenset[str]
    notes: tuple[str, ...] = ()  # extra comment lines for the draft


@dataclass(frozen=True, slots=True, kw_only=True)
class Dependency:
    name: str
    cuda: Side | None
    rocm: Side | None

    @property
    def verdict(self) -> Verdict:
        if self.rocm is None:
            return "only CUDA"
        if self.cuda is None:
            return "only ROCm"
        if dict(self.cuda.values) != dict(self.rocm.values):
            return "differs"
        return "floating" if self.cuda.floating or self.rocm.floating else "same"

    def side(self, platform: Platform) -> Side | None:
        return self.cuda if platform == "cuda" else self.rocm

    @property
    def floating(self) -> bool:
        return any(s.floating for s in (self.cuda, self.rocm) if s is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Base:
    repository: str
    tag: str
    digest: str  # "" when the recipe does not pin one
    where: str
    toolkit: str
    gpu_archs: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Adoption:
    paths: Mapping[Platform, Path]
    bases: Mapping[Platform, Base]
    deps: list[Dependency]
    notes: list[str]
    unrecognised: list[Unrecognised]


# ---------------------------------------------------------------- reading one recipe


@dataclass(slots=True)
class _Collect:
    platform: Platform
    rel: str
    sides: list[tuple[str, Side]] = field(default_factory=list)  # (preferred name, side)
    notes: list[str] = field(default_factory=list)
    unrecognised: list[Unrecognised] = field(default_factory=list)

    def at(self, pin: RecipePin) -> str:
        return f"{self.rel}:{pin.line}"

    def add(
        self,
        name: str,
        pin_or_where: RecipePin | str,
        values: dict[str, str],
        *,
        floating: bool,
        aliases: set[str],
        notes: tuple[str, ...] = (),
    ) -> None:
        where = pin_or_where if isinstance(pin_or_where, str) else self.at(pin_or_where)
        side = Side(values=values, where=(where,), floating=floating,
                    aliases=frozenset(aliases), notes=notes)  # fmt: skip
        for k, (old_name, old) in enumerate(self.sides):
            if old.aliases & side.aliases:  # installed twice: the later install wins
                merged = Side(values=side.values, where=(*old.where, where),
                              floating=side.floating, aliases=old.aliases | side.aliases,
                              notes=old.notes + notes)  # fmt: skip
                self.sides[k] = (old_name, merged)
                return
        self.sides.append((name, side))


def _loose(name: str) -> str:
    return re.sub(r"[-_.]+", "", name.lower())


def _repo_base(repo: str) -> str:
    return posixpath.basename(repo.rstrip("/"))


def _git_values(ref: str) -> tuple[dict[str, str], bool]:
    if _HEX.fullmatch(ref):
        return {"commit": ref}, False
    return {"ref": ref or "HEAD"}, True


def _scan(platform: Platform, path: Path) -> tuple[_Collect, Base]:
    parsed = recipe.parse(path)
    if not parsed.pins:
        raise ConfigError(
            f"{path}: no pins found (no FROM image, pip/git/curl/apt install or pinned ARG); "
            "is this the production recipe?"
        )
    c = _Collect(platform=platform, rel=str(path))
    consumed = {v for p in parsed.pins if p.source not in ("arg", "env") for v in p.vars}
    froms = [p for p in parsed.pins if p.source == "from"]
    base = _base(platform, c, froms, parsed)
    for extra in froms[1:]:
        c.notes.append(f"{c.at(extra)}: FROM {extra.resolved} is another external image; "
                       "pin it by hand")  # fmt: skip
    pip_dirs = {p.dest: p for p in parsed.pins if p.source == "pip" and p.name.startswith("path:")}
    clone_dirs = {p.dest for p in parsed.pins if p.source == "git-clone"}
    git: dict[str, list[RecipePin]] = {}
    for p in parsed.pins:
        if p.source in ("arg", "env"):
            if p.name not in consumed:
                c.unrecognised.append(Unrecognised(
                    path=p.path, line=p.line,
                    text=f"{p.source.upper()} {p.text} (no install twinbuild understands uses it)",
                ))  # fmt: skip
        elif p.source in ("git-clone", "git-checkout", "git-fetch"):
            if p.repo is None:
                c.unrecognised.append(Unrecognised(
                    path=p.path, line=p.line, text=f"git checkout {p.text} in {p.dest} "
                    "(no git clone of that directory)"))  # fmt: skip
            else:
                git.setdefault(p.repo, []).append(p)
        elif p.source == "pip":
            _pip(c, p, clone_dirs)
        elif p.source == "curl":
            name = _url_key(p.resolved)
            values = {"kind": "url", "url": p.resolved, "sha256": TODO, "install": "file",
                      "path": p.dest or TODO}  # fmt: skip
            c.add(name, p, values, floating=p.floating, aliases={p.name})
        elif p.source == "apt":
            key = re.sub(r"[^a-z0-9_-]", "-", p.name.lower())
            values = {"kind": "apt", "package": p.name, "version": p.resolved}
            c.add(key, p, values, floating=p.floating, aliases={f"apt:{p.name}"})
    for repo, pins in git.items():
        _git(c, repo, pins, pip_dirs)
    for u in parsed.unrecognised:
        c.unrecognised.append(u)
    return c, base


def _pip(c: _Collect, p: RecipePin, clone_dirs: set[str | None]) -> None:
    kind, _, rest = p.name.partition(":")
    if kind == "index":
        c.notes.append(f"{c.at(p)}: package index {rest}; set 'index' on the pins that need it")
        return
    if kind in ("requirements", "constraints", "overrides"):
        c.notes.append(f"{c.at(p)}: {p.text}: the pins in that file are not imported; "
                       "add them to the manifest by hand")  # fmt: skip
        return
    if kind == "path":
        if p.dest not in clone_dirs:  # a clone's install is noted on its git pin
            c.notes.append(f"{c.at(p)}: pip install {p.text} installs a local path, not a pin")
        return
    dist = p.dist or p.name
    if p.repo is not None:
        values, floating = _git_values(p.resolved)
        values = {"kind": "git", "dist": dist, "repo": p.repo, **values}
        if p.subdirectory:
            values["subdirectory"] = p.subdirectory
        aliases = {p.repo, _loose(dist), _loose(_repo_base(p.repo))}
        c.add(dist, p, values, floating=floating, aliases=aliases)
        return
    if "://" in p.resolved:
        values = {"kind": "url", "dist": dist, "url": p.resolved, "sha256": TODO}
        c.add(dist, p, values, floating=p.floating, aliases={_loose(dist)})
        return
    if p.floating:
        values = {"kind": "pypi", "range": p.resolved}
    else:
        values = {"kind": "pypi", "version": p.resolved}
    c.add(dist, p, values, floating=p.floating, aliases={_loose(dist)})


def _git(
    c: _Collect, repo: str, pins: list[RecipePin], pip_dirs: Mapping[str | None, RecipePin]
) -> None:
    pinned = [p for p in pins if p.source != "git-clone"] or pins
    last = pinned[-1]
    values, floating = _git_values(last.resolved)
    dest = next((p.dest for p in pins if p.source == "git-clone" and p.dest), last.dest)
    name = canonicalize_name(_repo_base(repo))
    notes: tuple[str, ...] = ()
    pip = pip_dirs.get(dest)
    if pip is not None:
        notes = (f"installed with pip from {dest} at {c.at(pip)}",)
    all_values = {"kind": "git", "dist": "", "repo": repo, **values, "install": "checkout",
                  "path": dest or TODO}  # fmt: skip
    where = ", ".join(dict.fromkeys(c.at(p) for p in pins))
    c.add(
        name,
        where,
        all_values,
        floating=floating,
        aliases={repo, _loose(_repo_base(repo))},
        notes=notes,
    )


def _url_key(url: str) -> str:
    base = posixpath.basename(url.split("?", maxsplit=1)[0])
    base = re.sub(r"(\.tar\.gz|\.tgz|\.zip|\.whl|\.deb)$", "", base)
    base = re.sub(r"[-_]?v?\d+(\.\d+)+.*$", "", base) or base
    key = re.sub(r"[^a-z0-9_-]+", "-", base.lower()).strip("-") or "download"
    if re.search(r"\b(arm64|aarch64)\b", url):
        key += "-arm64"
    return key


def _base(platform: Platform, c: _Collect, froms: list[RecipePin], parsed: recipe.Recipe) -> Base:
    envs = {k: v for stage in parsed.envs.values() for k, v, _ in stage}
    archs_env = "TORCH_CUDA_ARCH_LIST" if platform == "cuda" else "PYTORCH_ROCM_ARCH"
    archs = tuple(a.removesuffix("+PTX") for a in re.split(r"[;\s]+", envs.get(archs_env, "")) if a)
    if not froms:
        return Base(repository=TODO, tag=TODO, digest="", where=c.rel, toolkit=TODO,
                    gpu_archs=archs)  # fmt: skip
    f = froms[0]
    resolved = "$" not in f.resolved
    tag = (f.tag or "latest") if resolved else TODO
    return Base(
        repository=f.name if resolved else TODO,
        tag=tag,
        digest=f.digest or "",
        where=c.at(f),
        toolkit=_toolkit(platform, tag, envs),
        gpu_archs=archs,
    )


def _toolkit(platform: Platform, tag: str, envs: Mapping[str, str]) -> str:
    env = envs.get("CUDA_VERSION" if platform == "cuda" else "ROCM_VERSION")
    if env:
        return ".".join(env.split(".")[:2])
    if platform == "cuda":
        m = re.search(r"cu(\d{2})(\d)", tag) or re.search(r"cuda(\d+)\.(\d+)", tag)
    else:
        m = re.search(r"rocm(\d)(\d)\d?", tag) or re.search(r"rocm(\d+)\.(\d+)", tag)
    return f"{m.group(1)}.{m.group(2)}" if m else TODO


# ---------------------------------------------------------------- both recipes


def adopt(cuda: Path, rocm: Path) -> Adoption:
    """Scan both recipes and match their dependencies."""
    collected: dict[Platform, _Collect] = {}
    bases: dict[Platform, Base] = {}
    for platform, path in zip(PLATFORMS, (cuda, rocm), strict=True):
        collected[platform], bases[platform] = _scan(platform, path)
    cuda_sides, rocm_sides = collected["cuda"].sides, list(collected["rocm"].sides)
    deps: list[tuple[str, Side | None, Side | None]] = []
    for name, side in cuda_sides:
        match = next((k for k, (_, r) in enumerate(rocm_sides) if r.aliases & side.aliases), None)
        other = rocm_sides.pop(match)[1] if match is not None else None
        deps.append((name, side, other))
    deps += [(name, None, side) for name, side in rocm_sides]
    used: set[str] = set()
    out: list[Dependency] = []
    for name, c_side, r_side in deps:
        key = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_") or "pin"
        unique, n = key, 2
        while _loose(unique) in used:
            unique, n = f"{key}-{n}", n + 1
        used.add(_loose(unique))
        out.append(Dependency(name=unique, cuda=c_side, rocm=r_side))
    return Adoption(
        paths={"cuda": cuda, "rocm": rocm},
        bases=bases,
        deps=out,
        notes=collected["cuda"].notes + collected["rocm"].notes,
        unrecognised=collected["cuda"].unrecognised + collected["rocm"].unrecognised,
    )


# ---------------------------------------------------------------- the draft


def draft(adoption: Adoption) -> str:
    """The manifest draft (TOML text): every reason is TODO, so the lint refuses it until filled."""
    doc = tomlkit.document()
    doc.add(tomlkit.comment("Drafted by `twinbuild import "
                            f"{adoption.paths['cuda']} {adoption.paths['rocm']}`."))  # fmt: skip
    doc.add(
        tomlkit.comment("Replace every TODO (reasons, digests, python), then run twinbuild lint.")
    )
    doc.add("schema", 1)
    platforms = tomlkit.table(is_super_table=True)
    for platform in PLATFORMS:
        b = adoption.bases[platform]
        t = tomlkit.table()
        t.add(tomlkit.comment(f"from {b.where}"))
        base = tomlkit.inline_table()
        base.update({"repository": b.repository, "tag": b.tag, "digest": b.digest or TODO})
        t.add("base", base)
        if not b.digest:
            t["base"].comment("TODO: pin by digest: docker buildx imagetools inspect IMAGE:TAG")
        t.add("python", TODO)
        t["python"].comment('the image\'s Python, e.g. "3.12"')
        t.add("toolkit", b.toolkit)
        t.add("vendor", "nvidia" if platform == "cuda" else "amd")
        t.add("gpu_archs", list(b.gpu_archs))
        platforms.add(platform, t)
    doc.add("platforms", platforms)
    local = tomlkit.table()
    local.add(tomlkit.comment("the local profile's defaults; adjust to your project"))
    local.add("suite", "bookworm")
    local.add("mirror", "http://deb.debian.org/debian")
    local.add("packages", ["python3", "python3-venv", "python3-pip", "git", "ca-certificates"])
    doc.add("local", local)
    pins = tomlkit.table(is_super_table=True)
    for dep in adoption.deps:
        pins.add(dep.name, _pin_table(dep))
    doc.add("pins", pins)
    return tomlkit.dumps(doc)


def _pin_table(dep: Dependency) -> Table:
    t = tomlkit.table()
    sides = [s for s in (dep.cuda, dep.rocm) if s is not None]
    t.add(tomlkit.comment("from " + ", ".join(w for s in sides for w in s.where)))
    for note in dict.fromkeys(n for s in sides for n in s.notes):
        t.add(tomlkit.comment(note))
    if dep.cuda is not None and dep.rocm is not None:
        c, r = dict(dep.cuda.values), dict(dep.rocm.values)
        common = {k: v for k, v in c.items() if r.get(k) == v}
    else:
        common = dict(sides[0].values)
        c = r = {}
    for k in _ordered(common):
        if not (k == "dist" and common[k] == dep.name and common.get("kind") == "pypi"):
            t.add(k, common[k])
    if dep.cuda is None or dep.rocm is None:
        t.add("platforms", ["cuda" if dep.cuda is not None else "rocm"])
        t.add("asymmetry", TODO)
    elif common != c or common != r:
        t.add("divergence", TODO)
    if dep.floating:
        t.add("floating", TODO)
    t.add("why", TODO)
    if dep.cuda is not None and dep.rocm is not None and (common != c or common != r):
        for platform, values in (("cuda", c), ("rocm", r)):
            sub = tomlkit.table()
            for k in _ordered(values):
                if k not in common:
                    sub.add(k, values[k])
            t.add(platform, sub)
    return t


def _ordered(values: Mapping[str, str]) -> list[str]:
    return sorted(values, key=lambda k: _VALUE_ORDER.index(k) if k in _VALUE_ORDER else 99)


def write_draft(text: str, out: Path, *, force: bool = False) -> None:
    """Write atomically (temp file + rename); never overwrite an existing file without force."""
    if out.exists() and not force:
        raise ConfigError(f"{out}: already exists; pass --force to overwrite it, "
                          "or --out another path")  # fmt: skip
    write_atomic(out, text)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOptions:
    """What ``twinbuild import`` was asked for."""

    cuda_dockerfile: Path
    rocm_dockerfile: Path
    out: Path = Path("pins/manifest.toml")
    format: Literal["text", "json", "markdown"] = "text"
    force: bool = False  # overwrite ``out``
    allow_unrecognised: bool = False  # exit 0 with pin-like text left unclassified


def run_import(options: ImportOptions, stream: TextIO) -> int:
    """:func:`run` with the options of ``twinbuild import``."""
    return run(
        options.cuda_dockerfile, options.rocm_dockerfile, out=options.out, fmt=options.format,
        force=options.force, allow_unrecognised=options.allow_unrecognised, stream=stream,
    )  # fmt: skip


def run(
    cuda: Path,
    rocm: Path,
    *,
    out: Path = Path("pins/manifest.toml"),
    fmt: Literal["text", "json", "markdown"] = "text",
    force: bool = False,
    allow_unrecognised: bool = False,
    stream: TextIO,
) -> int:
    """The whole `twinbuild import`: draft, write, report; exit 1 when a pin was not classified."""
    if out.exists() and not force:  # refuse before any work, so nothing is half-done
        raise ConfigError(f"{out}: already exists; pass --force to overwrite it, "
                          "or --out another path")  # fmt: skip
    adoption = adopt(cuda, rocm)
    write_draft(draft(adoption), out, force=force)
    stream.write(drift.report(adoption, fmt))
    if adoption.unrecognised and not allow_unrecognised:
        raise FindingsError(
            f"{len(adoption.unrecognised)} unrecognised pin(s) (listed above); the draft at {out} "
            "lacks them: add them by hand, then rerun with --allow-unrecognised"
        )
    return 0
