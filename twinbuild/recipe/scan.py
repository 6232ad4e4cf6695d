"""Find every pin a Dockerfile recipe writes: base images, ARG defaults, pip, git, curl, apt, ENV.

The lint uses it to prove a recipe holds no literal pin; the importer uses it to draft a manifest
from recipes that still do. Instruction boundaries come from dockerfile-parse; RUN bodies are split
by a small shell tokenizer (``shell``) that keeps the physical line of every word, so a finding
points at the line that holds the token, and each command is read by ``recipe_commands``. Whatever
looks like a pin but fits no rule lands in ``unrecognised``.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from dockerfile_parse import DockerfileParser

from twinbuild.errors import ConfigError
from twinbuild.recipe.commands import command, data_heredoc, variable_pin
from twinbuild.recipe.pin_rules import (
    Source,
    default_floating,
    is_pin_value,
    names_a_pin,
    normalize_repo,
    url_name,
)
from twinbuild.recipe.shell import Word, simple_commands, tokenize

__all__ = [
    "ArgDecl",
    "Recipe",
    "RecipePin",
    "Source",
    "Unrecognised",
    "normalize_repo",
    "parse",
    "pins_by_name",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecipePin:
    """One pinned (or deliberately unpinned) input found in a recipe."""

    path: Path
    line: int
    source: Source
    name: str  # canonical dist name / normalised repo URL / image repository / apt package / ARG
    value: str  # version, spec, commit, branch, tag, URL; "" when unpinned
    text: str  # the token as written
    literal: bool  # the value is written out, not only ${VAR} references
    floating: bool  # branch, range, unpinned, tag without digest/sha
    stage: str | None
    # Extensions (defaults keep the core constructor stable):
    resolved: str = ""  # value with ARG/ENV defaults substituted
    vars: tuple[str, ...] = ()  # variables the token references
    repo: str | None = None  # normalised git repository URL (git+ requirements, clone, checkout)
    dist: str | None = None  # canonical distribution name when known
    subdirectory: str | None = None
    tag: str | None = None  # FROM: image tag
    digest: str | None = None  # FROM: image digest
    dest: str | None = None  # git clone: directory in the image; pip path install: the path


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgDecl:
    path: Path
    line: int
    name: str
    default: str | None
    stage: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unrecognised:
    path: Path
    line: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Recipe:
    path: Path
    pins: list[RecipePin]
    args: list[ArgDecl]
    used_vars: set[str]
    copies: list[tuple[int, str]]
    stages: list[str]
    unrecognised: list[Unrecognised]
    envs: dict[str, list[tuple[str, str, int]]]


_INSTRUCTIONS = frozenset(
    [
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "MAINTAINER",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
        "COMMENT",
    ]
)
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def _var_refs(text: str) -> tuple[str, ...]:
    """The variables ``text`` references, each once, in order."""
    return tuple(dict.fromkeys(a or b for a, b in _VAR.findall(text)))


# ---------------------------------------------------------------- the scanner


@dataclass(slots=True)
class _Scan:
    """One recipe's scan: what it found so far and the build state (stage, scope, cwd) it is in.

    The RUN command recognisers write into it through ``recipe_commands.Scan``.
    """

    path: Path
    pins: list[RecipePin] = field(default_factory=list)
    args: list[ArgDecl] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    copies: list[tuple[int, str]] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    unrec: list[Unrecognised] = field(default_factory=list)
    envs: dict[str, list[tuple[str, str, int]]] = field(default_factory=dict)
    globals_: dict[str, str] = field(default_factory=dict)  # ARG defaults before the first FROM
    scope: dict[str, str] = field(default_factory=dict)  # ARG/ENV values visible in this stage
    stage: str | None = None
    workdir: str = "/"
    cwd: str = "/"
    clones: dict[str, str] = field(default_factory=dict)  # directory -> normalised repo URL

    # --- helpers
    def expand(self, s: str) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            whole = m.group(0)
            if name in self.scope and self.scope[name] != "":
                return self.scope[name]
            dm = re.match(r"\$\{\w+:?-(.*)\}$", whole)
            return dm.group(1) if dm else whole

        return _VAR.sub(sub, s)

    def pin(
        self,
        *,
        line: int,
        source: Source,
        name: str,
        value: str,
        text: str,
        floating: bool | None = None,
        **extra: str | None,
    ) -> None:
        refs = _var_refs(value or text)
        bare = _VAR.sub("", value).strip("{}:-") if value else ""
        resolved = self.expand(value)
        if floating is None:
            floating = default_floating(source, resolved)
        self.pins.append(
            RecipePin(
                path=self.path,
                line=line,
                source=source,
                name=name,
                value=value,
                text=text,
                literal=bool(bare),
                floating=floating,
                stage=self.stage,
                resolved=resolved,
                vars=refs,
                **extra,
            )
        )

    def unrecognised(self, line: int, text: str) -> None:
        self.unrec.append(Unrecognised(path=self.path, line=line, text=text))

    def resolve_dir(self, d: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, self.expand(d)))


def parse(path: Path, *, data: bytes | None = None) -> Recipe:
    """Read a recipe and return every pin, ARG, variable use, COPY source and stage it holds.

    ``data`` is the recipe's bytes when they do not come from the file (the gate reads a commit).
    """
    try:
        data = path.read_bytes() if data is None else data
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot read recipe: {reason}") from exc
    try:
        structure = DockerfileParser(fileobj=io.BytesIO(data)).structure
    except Exception as exc:  # dockerfile-parse raises bare exceptions on broken input
        raise ConfigError(f"{path}:1: does not parse: {exc}") from exc
    lines = text.splitlines()
    scan = _Scan(path=path)
    skip_until = -1
    for item in structure:
        start, end = int(item["startline"]), int(item["endline"])
        if start <= skip_until:
            continue
        ins = str(item["instruction"]).upper()
        if ins not in _INSTRUCTIONS:
            raise ConfigError(
                f"{path}:{start + 1}: does not parse: unknown instruction {ins}; "
                "a heredoc or line continuation is probably broken"
            )
        if ins == "COMMENT":
            continue
        if ins not in {"ARG", "FROM"} and scan.stage is None and not scan.stages:
            raise ConfigError(f"{path}:{start + 1}: does not parse: {ins} before the first FROM")
        body, skip_until = _body(path, lines, start, end)
        try:
            _instruction(scan, ins, body, start + 1)
        except ValueError as exc:
            raise ConfigError(f"{path}:{start + 1}: does not parse: {exc}") from exc
    if not scan.stages:
        raise ConfigError(f"{path}: does not parse: no FROM instruction; is this a Dockerfile?")
    for text_line in lines:
        if not text_line.lstrip().startswith("#"):
            scan.used.update(_var_refs(text_line))
    return Recipe(
        path=path,
        pins=_settle_clones(scan.pins),
        args=scan.args,
        used_vars=scan.used,
        copies=scan.copies,
        stages=scan.stages,
        unrecognised=scan.unrec,
        envs=scan.envs,
    )


def _body(path: Path, lines: list[str], start: int, end: int) -> tuple[list[tuple[str, int]], int]:
    """The instruction's characters (comment lines dropped) and heredoc bodies, with lines."""
    chars: list[tuple[str, int]] = []
    for n in range(start, end + 1):
        if n > start and lines[n].lstrip().startswith("#"):
            continue  # Docker drops comment lines inside a continued instruction
        chars.extend((ch, n + 1) for ch in lines[n] + "\n")
    last = end
    head = lines[start].lstrip()
    for m in _HEREDOC.finditer("\n".join(lines[start : end + 1])):
        word = m.group(3)
        k = last + 1
        while k < len(lines) and (lines[k].strip() if m.group(1) else lines[k]) != word:
            k += 1
        if k >= len(lines):
            raise ConfigError(f"{path}:{start + 1}: does not parse: heredoc {word} is never closed")
        if head.upper().startswith("RUN"):
            chars.append(("\x00", last + 1))  # marks the start of heredoc bodies
            for n in range(last + 1, k):
                chars.extend((ch, n + 1) for ch in lines[n] + "\n")
        last = k
    return chars, last


def _split_flags(words: list[Word]) -> tuple[list[Word], list[Word]]:
    flags = []
    while words and words[0].text.startswith("--"):
        flags.append(words.pop(0))
    return flags, words


def _instruction(scan: _Scan, ins: str, chars: list[tuple[str, int]], line: int) -> None:
    content = "".join(ch for ch, _ in chars)
    keyword_end = len(content) - len(content.lstrip())
    keyword_end += len(content.lstrip().split(None, 1)[0])
    rest = chars[keyword_end:]
    if ins == "RUN":
        _run(scan, rest, line)
        return
    words = [w for w in tokenize([c for c in rest if c[0] != "\x00"]) if not w.op]
    if ins == "ARG":
        _arg(scan, words)
    elif ins == "FROM":
        _from(scan, words, line)
    elif ins == "ENV":
        _env(scan, words, line)
    elif ins == "WORKDIR" and words:
        scan.workdir = scan.cwd = posixpath.normpath(
            posixpath.join(scan.workdir, scan.expand(words[0].text))
        )
    elif ins in ("COPY", "ADD"):
        _copy(scan, ins, words, "".join(ch for ch, _ in rest).strip(), line)


def _arg(scan: _Scan, words: list[Word]) -> None:
    for w in words:
        name, eq, default = w.text.partition("=")
        scan.args.append(
            ArgDecl(
                path=scan.path,
                line=w.line,
                name=name,
                default=default if eq else None,
                stage=scan.stage,
            )
        )
        if scan.stage is None and eq:
            scan.globals_[name] = default
        if eq:
            scan.scope[name] = scan.expand(default)
        elif scan.stage is not None and name in scan.globals_:
            scan.scope[name] = scan.globals_[name]  # re-declared global ARG keeps its default
        if eq and default and is_pin_value(name, default):
            variable_pin(scan, w, "arg", name, default, scan.expand(default))


def _from(scan: _Scan, words: list[Word], line: int) -> None:
    _, words = _split_flags(words)
    if not words:
        raise ValueError("FROM without an image")
    image = words[0]
    alias = words[2].text if len(words) >= 3 and words[1].text.upper() == "AS" else None
    name = alias or str(len(scan.stages))
    scan.scope = dict(scan.globals_)  # FROM sees the ARGs declared before the first FROM
    ref = scan.expand(image.text)
    scan.scope = {}  # a stage starts without ARGs; ENV comes only from a parent stage
    parent = ref if ref in scan.stages else None
    scan.stages.append(name)
    scan.stage = name
    scan.workdir = scan.cwd = "/"
    scan.envs.setdefault(name, [])
    if parent is not None:
        scan.scope.update({k: v for k, v, _ in scan.envs.get(parent, [])})
        return
    if ref == "scratch":
        return
    repo, tag, digest = _split_image(ref)
    scan.pins.append(
        RecipePin(
            path=scan.path,
            line=line,
            source="from",
            name=repo,
            value=(tag or "") + (f"@{digest}" if digest else ""),
            text=image.raw,
            literal=bool(_VAR.sub("", image.text).strip(":@/")),
            floating=not digest,
            stage=name,
            resolved=ref,
            vars=_var_refs(image.text),
            tag=tag,
            digest=digest,
        )
    )


def _split_image(ref: str) -> tuple[str, str | None, str | None]:
    repo, _, digest = ref.partition("@")
    tag = None
    slash = repo.rfind("/")
    colon = repo.rfind(":")
    if colon > slash:
        repo, tag = repo[:colon], repo[colon + 1 :]
    return repo, tag, digest or None


def _env(scan: _Scan, words: list[Word], line: int) -> None:
    assert scan.stage is not None  # noqa: S101 -- parse() refuses ENV before FROM
    pairs: list[tuple[str, str, Word]] = []
    if words and "=" not in words[0].text:
        pairs.append((words[0].text, " ".join(w.text for w in words[1:]), words[0]))  # ENV K V
    else:
        for w in words:
            k, _, v = w.text.partition("=")
            pairs.append((k, v, w))
    for k, v, w in pairs:
        value = scan.expand(v)
        scan.envs[scan.stage].append((k, value, w.line))
        scan.scope[k] = value
        if v and names_a_pin(k):
            variable_pin(scan, w, "env", k, v, value)


def _copy(scan: _Scan, ins: str, words: list[Word], text: str, line: int) -> None:
    flags, words = _split_flags(words)
    if any(f.text.startswith("--from") for f in flags):
        return
    if text.startswith("["):
        try:
            items = [str(x) for x in json.loads(text[text.index("[") :])]
        except json.JSONDecodeError as exc:
            raise ValueError(f"{ins} JSON form: {exc}") from exc
        sources = [(line, s) for s in items[:-1]]
    else:
        sources = [(w.line, w.text) for w in words[:-1] if not w.text.startswith("<<")]
    for src_line, src in sources:
        if ins == "ADD" and "://" in src:
            scan.pin(
                line=src_line, source="curl", name=url_name(scan.expand(src)), value=src, text=src
            )
        else:
            scan.copies.append((src_line, src))


# ---------------------------------------------------------------- RUN


def _run(scan: _Scan, chars: list[tuple[str, int]], line: int) -> None:
    scan.cwd = scan.workdir
    cut = next((k for k, c in enumerate(chars) if c[0] == "\x00"), len(chars))
    head, heredoc = chars[:cut], chars[cut + 1 :]
    words = tokenize(head)
    flags, words = _split_flags(words)
    for f in flags:
        if f.text.startswith("--mount="):
            opts = dict(o.partition("=")[::2] for o in f.text[len("--mount=") :].split(","))
            if opts.get("type", "bind") == "bind" and "from" not in opts:
                scan.copies.append((f.line, opts.get("source", opts.get("src", "."))))
    head_cmds = list(simple_commands(words))
    script_heredoc = not head_cmds or head_cmds[0][0].text in ("bash", "sh", "set")
    if heredoc and script_heredoc:
        words += [Word(";", ";", line, op=True), *tokenize(heredoc)]
    elif heredoc:
        data_heredoc(scan, words, heredoc)
    for cmd in simple_commands(words):
        command(scan, cmd)


def _settle_clones(pins: list[RecipePin]) -> list[RecipePin]:
    """A clone followed by a checkout/fetch of a commit is pinned by that commit, not floating."""
    fixed = {
        (p.repo, p.stage)
        for p in pins
        if p.source in ("git-checkout", "git-fetch") and p.repo and not p.floating
    }
    return [
        replace(p, floating=False) if p.source == "git-clone" and (p.repo, p.stage) in fixed else p
        for p in pins
    ]


def pins_by_name(recipe: Recipe) -> Mapping[str, list[RecipePin]]:
    """Pins grouped by name, in recipe order."""
    grouped: dict[str, list[RecipePin]] = {}
    for p in recipe.pins:
        grouped.setdefault(p.name, []).append(p)
    return grouped
