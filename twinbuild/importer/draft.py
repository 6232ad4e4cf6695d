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
from typing import Literal

import tomlkit
from packaging.utils import canonicalize_name

from twinbuild.errors import ConfigError
from twinbuild.recipe import scan
from twinbuild.recipe.pin_rules import HEX, SHA40
from twinbuild.recipe.scan import RecipePin, Unrecognised
from twinbuild.util.atomic import write_atomic

Platform = Literal["cuda", "rocm"]
PLATFORMS: tuple[Platform, ...] = ("cuda", "rocm")
Verdict = Literal["same", "differs", "only CUDA", "only ROCm", "floating"]
TODO = "TODO"
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
    python: str = ""  # from a PYTHON_VERSION ARG or ENV; "" when the recipe does not say


@dataclass(frozen=True, slots=True, kw_only=True)
class Adoption:
    paths: Mapping[Platform, Path]
    bases: Mapping[Platform, Base]
    deps: list[Dependency]
    notes: list[str]
    unrecognised: list[Unrecognised]
    adopted: bool = False  # both recipes already take every pin from a manifest


# ---------------------------------------------------------------- reading one recipe


@dataclass(slots=True)
class _Entry:
    """A dependency while one recipe is read: grows in place, so n installs cost O(n)."""

    name: str
    values: dict[str, str]
    floating: bool
    where: list[str]
    aliases: set[str]
    notes: list[str]

    def side(self) -> Side:
        return Side(values=self.values, where=tuple(self.where), floating=self.floating,
                    aliases=frozenset(self.aliases), notes=tuple(self.notes))  # fmt: skip


@dataclass(slots=True)
class _Collect:
    platform: Platform
    rel: str
    entries: list[_Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unrecognised: list[Unrecognised] = field(default_factory=list)
    by_alias: dict[str, int] = field(default_factory=dict)  # alias -> index in entries
    final_chain: frozenset[str] = frozenset()  # the last stage and the stages it is built on

    @property
    def sides(self) -> list[tuple[str, Side]]:
        """(preferred name, side) per dependency, in the order first installed."""
        return [(e.name, e.side()) for e in self.entries]

    def at(self, pin: RecipePin) -> str:
        return f"{self.rel}:{pin.line}"

    def unfaithful(self, pin: RecipePin, why: str) -> None:
        self.unrecognised.append(Unrecognised(path=pin.path, line=pin.line,
                                              text=f"{pin.text} ({why})"))  # fmt: skip

    def add(
        self,
        name: str,
        pin_or_where: RecipePin | str,
        values: dict[str, str],
        *,
        floating: bool,
        aliases: set[str],
        notes: tuple[str, ...] = (),
        stage: str | None = None,
    ) -> None:
        where = pin_or_where if isinstance(pin_or_where, str) else self.at(pin_or_where)
        if not isinstance(pin_or_where, str):
            stage = pin_or_where.stage
        if stage is not None and self.final_chain and stage not in self.final_chain:
            notes += (f"{where} is in stage {stage}, which the final image is not built FROM: "
                      "what it installs reaches the image only if copied, so a check of it in "
                      "the image may fail; keep it as a build input or drop it",)  # fmt: skip
        # One dict look-up per alias keeps a recipe of n installs at O(n), not O(n^2).
        k = next((self.by_alias[a] for a in aliases if a in self.by_alias), None)
        if k is not None:  # installed twice: the later install wins
            entry = self.entries[k]
            if entry.values != values:
                before = _summary(entry.values)
                notes += (f"{where} installs it again ({_summary(values)}) after {entry.where[-1]}"
                          f" ({before}); the draft keeps the later one: if they are alternatives "
                          "(if/else), choose by hand",)  # fmt: skip
            entry.values, entry.floating = values, floating
            entry.where.append(where)
            entry.aliases |= aliases
            entry.notes.extend(notes)
        else:
            k = len(self.entries)
            entry = _Entry(name=name, values=values, floating=floating, where=[where],
                           aliases=set(aliases), notes=list(notes))  # fmt: skip
            self.entries.append(entry)
        for a in aliases:
            self.by_alias.setdefault(a, k)


def _summary(values: Mapping[str, str]) -> str:
    """A value as a person reads it: the version, range, commit, ref or URL."""
    for key in ("version", "commit", "ref", "url", "range"):
        if values.get(key):
            return f"{key} {values[key]}"
    return "unpinned"


def _loose(name: str) -> str:
    return re.sub(r"[-_.]+", "", name.lower())


def _repo_base(repo: str) -> str:
    return posixpath.basename(repo.rstrip("/"))


def _repo_name(repo: str) -> str:
    """A pin named after its repository: ``https://github.com/iseekyan/mbridge`` -> ``mbridge``."""
    return canonicalize_name(_repo_base(repo)) or "repo"


def _git_values(ref: str) -> tuple[dict[str, str], bool]:
    if HEX.fullmatch(ref):
        return {"commit": ref}, False
    return {"ref": ref or "HEAD"}, True


def _scan(platform: Platform, path: Path) -> tuple[_Collect, Base, scan.Recipe]:
    parsed = scan.parse(path)
    if not parsed.pins:
        raise ConfigError(
            f"{path}: no pins found (no FROM image, pip/git/curl/apt install or pinned ARG); "
            "is this the production recipe?"
        )
    chain = frozenset(parsed.stage_chain(parsed.stages[-1])) if parsed.stages else frozenset()
    c = _Collect(platform=platform, rel=str(path), final_chain=chain)
    consumed = {v for p in parsed.pins if p.source not in ("arg", "env") for v in p.vars}
    consumed.add("PYTHON_VERSION")  # the platform's python, below
    final = parsed.final_base
    base = _base(platform, c, final, parsed)
    for extra in parsed.pins:
        if extra.source in ("from", "image") and extra is not final:
            how = f"COPY --from={extra.text}" if extra.source == "image" else f"FROM {extra.text}"
            c.unrecognised.append(Unrecognised(
                path=extra.path, line=extra.line,
                text=f"{how} (an image other than the final stage's base; the manifest pins "
                "one base per platform: pin this one by digest in the recipe by hand)",
            ))  # fmt: skip
    for note in parsed.notes:
        c.notes.append(f"{c.rel}:{note.line}: {note.text} runs only in images and stages built "
                       "FROM this stage, not here; its pins are not drafted")  # fmt: skip
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
            if p.source != "git-clone" and p.value and p.resolved == "":
                c.notes.append(f"{c.at(p)}: git {p.source[4:]} {p.text} moves nothing by "
                               "default (the build arg's default is empty)")  # fmt: skip
            elif (varying := _varying(p.resolved, p.repo)) is not None:
                c.unfaithful(p, _depends(varying))
            elif p.repo is None:
                c.unrecognised.append(Unrecognised(
                    path=p.path, line=p.line, text=f"git {p.source[4:]} {p.text} in {p.dest} "
                    "(no git clone of that directory: the repository is unknown)"))  # fmt: skip
            else:
                git.setdefault(p.repo, []).append(p)
        elif p.source == "pip":
            _pip(c, p, clone_dirs)
        elif p.source == "curl":
            _url(c, p)
        elif p.source == "apt":
            if "$" in p.resolved:
                c.unfaithful(p, _depends(p.resolved))
                continue
            key = re.sub(r"[^a-z0-9_-]", "-", p.name.lower())
            values = {"kind": "apt", "package": p.name, "version": p.resolved}
            c.add(key, p, values, floating=p.floating, aliases={f"apt:{p.name}"})
    for repo, pins in git.items():
        _git(c, repo, pins, pip_dirs)
    for u in parsed.unrecognised:
        c.unrecognised.append(u)
    c.unrecognised.sort(key=lambda u: u.line)
    return c, base, parsed


def _varying(*values: str | None) -> str | None:
    """The first of ``values`` that uses a variable (``$NAME``), which only the build resolves."""
    return next((v for v in values if v and "$" in v), None)


def _depends(value: str) -> str:
    names = ", ".join(dict.fromkeys("$" + n for n in re.findall(r"\$\{?(\w+|@|\*)", value)))
    return (f"its value depends on {names or value}, which only the build knows (a build arg "
            "without default, or a variable the shell computes); add the pin by hand")  # fmt: skip


def _url(c: _Collect, p: RecipePin) -> None:
    if p.stdout:
        c.unfaithful(p, "downloaded to stdout and piped on, so no file of it is in the image; "
                        "pin what it installs by hand")  # fmt: skip
        return
    if (varying := _varying(p.resolved, p.dest)) is not None:
        c.unfaithful(p, _depends(varying))
        return
    name = _url_key(p.resolved)
    # A url pin is exact by its sha256; it never floats (the lint refuses floating on it).
    values = {"kind": "url", "url": p.resolved, "sha256": p.sha256 or TODO, "install": "file",
              "path": p.dest or TODO}  # fmt: skip
    c.add(name, p, values, floating=False, aliases={p.name})


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
    if (varying := _varying(p.resolved, p.repo)) is not None:
        c.unfaithful(p, _depends(varying))
        return
    if p.repo is not None:
        name = _repo_name(p.repo)
        values, floating = _git_values(p.resolved)
        values = {"kind": "git", **({"dist": p.dist} if p.dist else {}), "repo": p.repo,
                  **values}  # fmt: skip
        if p.subdirectory:
            values["subdirectory"] = p.subdirectory
        aliases = {p.repo, _loose(_repo_base(p.repo)), *([_loose(p.dist)] if p.dist else [])}
        c.add(name, p, values, floating=floating, aliases=aliases)
        return
    dist = p.dist or p.name
    if "://" in p.resolved:
        values = {"kind": "url", "dist": dist, "url": p.resolved, "sha256": p.sha256 or TODO}
        c.add(dist, p, values, floating=False, aliases={_loose(dist)})
        return
    if p.floating:
        values = {"kind": "pypi", "range": p.resolved}
    else:
        values = {"kind": "pypi", "version": p.resolved}
    c.add(dist, p, values, floating=p.floating, aliases={_loose(dist)})


def _git(
    c: _Collect, repo: str, pins: list[RecipePin], pip_dirs: Mapping[str | None, RecipePin]
) -> None:
    pinned = [p for p in pins if p.source != "git-clone" and p.resolved] or pins
    last = pinned[-1]
    values, floating = _git_values(last.resolved)
    dest = next((p.dest for p in pins if p.source == "git-clone" and p.dest), last.dest)
    name = _repo_name(repo)
    notes: tuple[str, ...] = ()
    if "commit" in values and not SHA40.fullmatch(values["commit"]):
        notes += (f"TODO: commit {values['commit']} is short; the manifest needs all 40 hex: "
                  f"git rev-parse {values['commit']}",)  # fmt: skip
    pip = pip_dirs.get(dest)
    if pip is not None:
        notes += (f"installed with pip from {dest} at {c.at(pip)}",)
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
        stage=pins[0].stage,
    )


def _url_key(url: str) -> str:
    base = posixpath.basename(url.split("?", maxsplit=1)[0])
    base = re.sub(r"(\.tar\.gz|\.tgz|\.zip|\.whl|\.deb)$", "", base)
    base = re.sub(r"[-_]?v?\d+(\.\d+)+.*$", "", base) or base
    key = re.sub(r"[^a-z0-9_-]+", "-", base.lower()).strip("-") or "download"
    if re.search(r"\b(arm64|aarch64)\b", url):
        key += "-arm64"
    return key


def _base(platform: Platform, c: _Collect, f: RecipePin | None, parsed: scan.Recipe) -> Base:
    envs = {k: v for stage in parsed.envs.values() for k, v, _ in stage}
    archs_env = "TORCH_CUDA_ARCH_LIST" if platform == "cuda" else "PYTORCH_ROCM_ARCH"
    archs = tuple(a.removesuffix("+PTX") for a in re.split(r"[;,\s]+", envs.get(archs_env, ""))
                  if a and "$" not in a)  # fmt: skip
    declared = {a.name: a.default or "" for a in parsed.args}
    py = envs.get("PYTHON_VERSION") or declared.get("PYTHON_VERSION", "")
    m = re.fullmatch(r"(\d+\.\d+)(\.\d+)?", py)
    python = m.group(1) if m else ""
    if f is None:
        return Base(repository=TODO, tag=TODO, digest="", where=c.rel, toolkit=TODO,
                    gpu_archs=archs, python=python)  # fmt: skip
    resolved = "$" not in f.resolved
    tag = (f.tag or "latest") if resolved else TODO
    return Base(
        repository=f.name if resolved else TODO,
        tag=tag,
        digest=f.digest or "",
        where=c.at(f),
        toolkit=_toolkit(platform, f.name, tag, envs),
        gpu_archs=archs,
        python=python,
    )


def _toolkit(platform: Platform, repository: str, tag: str, envs: Mapping[str, str]) -> str:
    env = envs.get("CUDA_VERSION" if platform == "cuda" else "ROCM_VERSION")
    if env and "$" not in env:
        return ".".join(env.split(".")[:2])
    if platform == "cuda":
        m = re.search(r"cu(\d{2})(\d)", tag) or re.search(r"cuda(\d+)\.(\d+)", tag)
    else:
        m = re.search(r"rocm(\d)(\d)\d?", tag) or re.search(r"rocm(\d+)\.(\d+)", tag)
    if m is None and posixpath.basename(repository) in (
        "cuda",
        "dev-ubuntu-22.04",
        "dev-ubuntu-24.04",
    ):
        m = re.match(r"(\d+)\.(\d+)", tag)  # nvidia/cuda:12.4.1-..., rocm/dev-ubuntu-22.04:6.3.1
    return f"{m.group(1)}.{m.group(2)}" if m else TODO


def adopted(parsed: scan.Recipe) -> bool:
    """The recipe already takes every pin from a manifest: nothing literal to import."""
    return bool(parsed.pins) and not any(p.literal for p in parsed.pins) and not parsed.unrecognised


# ---------------------------------------------------------------- both recipes


def adopt(cuda: Path, rocm: Path) -> Adoption:
    """Scan both recipes and match their dependencies."""
    collected: dict[Platform, _Collect] = {}
    bases: dict[Platform, Base] = {}
    parsed: dict[Platform, scan.Recipe] = {}
    for platform, path in zip(PLATFORMS, (cuda, rocm), strict=True):
        collected[platform], bases[platform], parsed[platform] = _scan(platform, path)
    cuda_sides, rocm_sides = collected["cuda"].sides, collected["rocm"].sides
    rocm_index: dict[str, int] = {}
    for k, (_, r) in enumerate(rocm_sides):
        for a in r.aliases:
            rocm_index.setdefault(a, k)
    taken: set[int] = set()
    deps: list[tuple[str, Side | None, Side | None]] = []
    for name, side in cuda_sides:
        match = next((rocm_index[a] for a in sorted(side.aliases)
                      if a in rocm_index and rocm_index[a] not in taken), None)  # fmt: skip
        other = None
        if match is not None:
            taken.add(match)
            other = rocm_sides[match][1]
        deps.append((name, side, other))
    deps += [(name, None, side) for k, (name, side) in enumerate(rocm_sides) if k not in taken]
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
        adopted=all(adopted(parsed[p]) for p in PLATFORMS),
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
    doc.add("schema", 2)
    variants = tomlkit.table(is_super_table=True)
    for platform in PLATFORMS:
        b = adoption.bases[platform]
        t = tomlkit.table()
        t.add(tomlkit.comment(f"from {b.where}; a variant per recipe: one image per architecture"))
        t.add("vendor", "nvidia" if platform == "cuda" else "amd")
        t.add("toolkit", b.toolkit)
        t.add("archs", ["linux/amd64"])
        t.add("recipe", platform)
        t["recipe"].comment(f"images/{platform}/Dockerfile: move the recipe there")
        base = tomlkit.inline_table()
        base.update({"repository": b.repository, "tag": b.tag, "digest": b.digest or TODO})
        t.add("base", base)
        if not b.digest:
            t["base"].comment("TODO: pin by digest: docker buildx imagetools inspect IMAGE:TAG")
        t.add("python", b.python or TODO)
        if not b.python:
            t["python"].comment('the image\'s Python, e.g. "3.12"')
        t.add("gpu_archs", list(b.gpu_archs))
        runners = tomlkit.inline_table()
        runners.update({
            "build": ["self-hosted", "builder", platform], "gpu": ["self-hosted", "gpu", platform]
        })  # fmt: skip
        t.add("runners", runners)
        t["runners"].comment("the labels of your CI runners for its production build and GPU jobs")
        variants.add(platform, t)
    doc.add("variants", variants)
    local = tomlkit.table()
    local.add(tomlkit.comment("the local profile's defaults; adjust to your project"))
    local.add("suite", "bookworm")
    local.add("packages", ["python3", "python3-venv", "python3-pip", "git", "ca-certificates"])
    doc.add("local", local)
    head = tomlkit.dumps(doc)
    # The pins are written directly: tomlkit's cost per item made a 20,000-pin draft take 13.5 s
    # (the head above is a few constant items). The text is what tomlkit writes for the same
    # tables, byte for byte (tests/fixtures/recipes/expected/draft.toml).
    return head + "".join(_pin_text(dep) for dep in adoption.deps)


def _pin_text(dep: Dependency) -> str:
    """``[pins.NAME]`` and its platform tables, each after a blank line."""
    lines = [f"\n[pins.{_key(dep.name)}]"]
    sides = [s for s in (dep.cuda, dep.rocm) if s is not None]
    lines.append(_comment("from " + ", ".join(w for s in sides for w in s.where)))
    lines += [_comment(note) for note in dict.fromkeys(n for s in sides for n in s.notes)]
    if dep.cuda is not None and dep.rocm is not None:
        c, r = dict(dep.cuda.values), dict(dep.rocm.values)
        common = {k: v for k, v in c.items() if r.get(k) == v}
    else:
        common = dict(sides[0].values)
        c = r = {}
    for k in _ordered(common):
        if not (k == "dist" and common[k] == dep.name and common.get("kind") == "pypi"):
            lines.append(f"{_key(k)} = {_string(common[k])}")
    if dep.cuda is None or dep.rocm is None:
        lines.append(f"variants = [{_string('cuda' if dep.cuda is not None else 'rocm')}]")
        lines.append(f"asymmetry = {_string(TODO)}")
    elif common != c or common != r:
        lines.append(f"divergence = {{rocm = {_string(TODO)}}}")
    if dep.floating:
        lines.append(f"floating = {_string(TODO)}")
    lines.append(f"why = {_string(TODO)}")
    if dep.cuda is not None and dep.rocm is not None and (common != c or common != r):
        for platform, values in (("cuda", c), ("rocm", r)):
            lines.append(f"\n[pins.{_key(dep.name)}.{platform}]")
            lines += [f"{_key(k)} = {_string(values[k])}" for k in _ordered(values)
                      if k not in common]  # fmt: skip
    return "\n".join(lines) + "\n"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
#: TOML's short escapes in a basic string; every other control character is \uXXXX (ESC too:
#: ``\e`` is TOML 1.1 only), as tomlkit writes them.
_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"',
            "\\": "\\\\"}  # fmt: skip
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')


def _string(value: str) -> str:
    """``value`` as a TOML basic string."""
    return '"' + _NEEDS_ESCAPE.sub(_escape, value) + '"'


def _escape(match: re.Match[str]) -> str:
    c = match[0]
    return _ESCAPES.get(c) or f"\\u{ord(c):04x}"


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else _string(name)


def _comment(text: str) -> str:
    """One ``#`` line per line of ``text`` (a note may span lines)."""
    return "\n".join(f"# {line}" if line else "#" for line in text.split("\n"))


def _ordered(values: Mapping[str, str]) -> list[str]:
    return sorted(values, key=lambda k: _VALUE_ORDER.index(k) if k in _VALUE_ORDER else 99)


def write_draft(text: str, out: Path, *, force: bool = False, parents: bool = True) -> None:
    """Write atomically (temp file + rename); never overwrite an existing file without force.

    ``parents`` makes a missing folder (pins/ for the default path); an ``--out`` a person gave
    must name a file in a folder that exists."""
    if out.exists() and not force:
        raise ConfigError(f"{out}: already exists; pass --force to overwrite it, "
                          "or --out another path")  # fmt: skip
    write_atomic(out, text, parents=parents)
