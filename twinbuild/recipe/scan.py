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
from twinbuild.recipe.shell import Text, Word, docker_words, simple_commands, tokenize
from twinbuild.util import bounded, strictjson

__all__ = [
    "ArgDecl",
    "Note",
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
    sha256: str | None = None  # ADD --checksum=sha256:...: the download's declared hash
    stdout: bool = False  # curl/wget writing to stdout (piped on), not to a file in the image


@dataclass(frozen=True, slots=True, kw_only=True)
class ArgDecl:
    path: Path
    line: int
    name: str
    default: str | None
    stage: str | None
    # Without a default of its own: the value it still has, from the stage it is built on (an ARG
    # or ENV there; BuildKit passes ARGs down) or a global ARG's default; None when it has none.
    inherited: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unrecognised:
    path: Path
    line: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Note:
    """Something the scan saw but deliberately did not read as a pin of this image (ONBUILD)."""

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
    notes: list[Note] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)  # stage -> the stage it is built FROM

    @property
    def final_base(self) -> RecipePin | None:
        """The external image the last stage is built on, followed through stage aliases."""
        if not self.stages:
            return None
        stage = self.stages[-1]
        seen: set[str] = set()
        while stage in self.parents and stage not in seen:
            seen.add(stage)
            stage = self.parents[stage]
        return next((p for p in self.pins if p.source == "from" and p.stage == stage), None)

    def stage_chain(self, stage: str) -> list[str]:
        """``stage`` and the stages it is built on, nearest first."""
        chain, seen = [stage], {stage}  # a set: n stages built on each other cost O(n), not n^2
        while chain[-1] in self.parents and self.parents[chain[-1]] not in seen:
            chain.append(self.parents[chain[-1]])
            seen.add(chain[-1])
        return chain


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
_DEFAULT = re.compile(r"\$\{\w+(:?)-(.*)\}$")
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
    notes: list[Note] = field(default_factory=list)
    parents: dict[str, str] = field(default_factory=dict)  # stage -> parent stage
    stage_scope: dict[str, dict[str, str]] = field(default_factory=dict)  # scope at stage end
    stage_workdir: dict[str, str] = field(default_factory=dict)  # WORKDIR at stage end
    stage_names: set[str] = field(default_factory=set)  # the stages, for O(1) look-ups
    shell_vars: dict[str, str] = field(default_factory=dict)  # set by this RUN's shell
    shell_undo: dict[str, str | None] = field(default_factory=dict)  # scope before this RUN
    budget: int = 0  # characters expansions may still produce (see expansion_budget)

    # --- helpers
    def expand(self, s: str) -> str:
        if "$" not in s:
            return s

        def sub(m: re.Match[str]) -> str:
            name = m.group(1) or m.group(2)
            whole = m.group(0)
            value = self.scope.get(name)
            dm = _DEFAULT.match(whole)
            if dm and (value is None or (value == "" and dm.group(1))):
                value = dm.group(2)  # ${X:-d}: d when X is unset or empty; ${X-d}: when unset
            elif value is None:
                return whole
            self.budget -= len(value)
            if self.budget < 0:
                raise ExpansionTooLarge(
                    f"variables expand to over {EXPANSION_FACTOR} times the recipe's size (a "
                    f"value that repeats itself, such as ARG X=${{X}}${{X}}?); write values out"
                )
            return value

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
        stdout: bool = False,
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
                stdout=stdout,
                **extra,
            )
        )

    def unrecognised(self, line: int, text: str) -> None:
        self.unrec.append(Unrecognised(path=self.path, line=line, text=text))

    def resolve_dir(self, d: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, self.expand(d)))


class ExpansionTooLarge(ValueError):
    """Variables expanded past the recipe's budget (:data:`EXPANSION_FACTOR`)."""


EXPANSION_FACTOR = 8
"""What all variable expansions of one recipe may produce, in multiples of its size (plus 1 MiB):
real recipes expand to less than their own size; forty lines of ``ARG X=${X}${X}`` would double
a value forty times. The cap keeps the scan linear in the recipe."""


def expansion_budget(text: str) -> int:
    return EXPANSION_FACTOR * len(text) + (1 << 20)


MAX_BYTES = 16 * 1024 * 1024
"""Largest recipe read: real ones are a few KiB, the benchmark's 100,000-line ones about 5 MiB;
more is the wrong file (or /dev/zero)."""
_CONTINUED_AT_EOF = re.compile(r"\\[ \t]*(\r?\n[ \t]*)*\Z")


def parse(path: Path, *, data: bytes | None = None) -> Recipe:
    """Read a recipe and return every pin, ARG, variable use, COPY source and stage it holds.

    ``data`` is the recipe's bytes when they do not come from the file (the gate reads a commit).
    """
    if data is None:
        data = bounded.read_bytes(
            path,
            limit=MAX_BYTES,
            what="recipe",
            missing="recipe not found; pass a Dockerfile's path",
        )
    elif len(data) > MAX_BYTES:
        raise ConfigError(
            f"{path}: over the {MAX_BYTES}-byte limit for a recipe; is it the right file?"
        )
    text = bounded.decode(data, source=str(path), what="recipe")
    return parse_text(text, path)


def parse_text(text: str, path: Path) -> Recipe:
    """:func:`parse` on a recipe's text (``path`` names it in messages and findings)."""
    # A continuation backslash on the last line: Docker ends the instruction at the end of the
    # file, dockerfile-parse drops it, and a pin written there would go unseen by lint and import.
    text = _CONTINUED_AT_EOF.sub("", text)
    data = text.encode("utf-8")
    try:
        structure = DockerfileParser(fileobj=io.BytesIO(data)).structure
    except Exception as exc:  # dockerfile-parse raises bare exceptions on broken input
        raise ConfigError(f"{path}:1: does not parse: {exc}") from exc
    lines = bounded.lines(text)  # dockerfile-parse counts LFs: U+2028 is no line end to it
    scan = _Scan(path=path, budget=expansion_budget(text))
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
        head, heredoc, skip_until = _body(path, lines, start, end)
        try:
            _instruction(scan, ins, head, heredoc, start + 1)
        except ValueError as exc:
            raise ConfigError(f"{path}:{start + 1}: does not parse: {exc}") from exc
    if not scan.stages:
        raise ConfigError(f"{path}: does not parse: no FROM instruction; is this a Dockerfile?")
    for text_line in lines:
        if "$" in text_line and not text_line.lstrip().startswith("#"):
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
        notes=scan.notes,
        parents=scan.parents,
    )


def _body(path: Path, lines: list[str], start: int, end: int) -> tuple[Text, Text | None, int]:
    """The instruction (comment lines dropped), its heredoc bodies (RUN only), the last line."""
    parts: list[str] = []
    starts: list[int] = []
    numbers: list[int] = []
    offset = 0
    for n in range(start, end + 1):
        if n > start and lines[n].lstrip().startswith("#"):
            continue  # Docker drops comment lines inside a continued instruction
        starts.append(offset)
        numbers.append(n + 1)
        parts.append(lines[n])
        offset += len(lines[n]) + 1
    head = Text("\n".join(parts) + "\n", tuple(starts), tuple(numbers))
    last = end
    if "<<" not in head.s:
        return head, None, last
    body_parts: list[str] = []
    body_starts: list[int] = []
    body_numbers: list[int] = []
    offset = 0
    is_run = lines[start].lstrip().upper().startswith("RUN")
    for m in _HEREDOC.finditer(head.s):
        word = m.group(3)
        k = last + 1
        while k < len(lines) and (lines[k].strip() if m.group(1) else lines[k]) != word:
            k += 1
        if k >= len(lines):
            raise ConfigError(f"{path}:{start + 1}: does not parse: heredoc {word} is never closed")
        if is_run:
            for n in range(last + 1, k):
                body_starts.append(offset)
                body_numbers.append(n + 1)
                body_parts.append(lines[n])
                offset += len(lines[n]) + 1
        last = k
    if not body_parts:
        return head, None, last
    body = Text("\n".join(body_parts) + "\n", tuple(body_starts), tuple(body_numbers))
    return head, body, last


def _split_flags(words: list[Word]) -> tuple[list[Word], list[Word]]:
    flags = []
    while words and words[0].text.startswith("--"):
        flags.append(words.pop(0))
    return flags, words


def _after_keyword(text: Text) -> Text:
    s = text.s
    k = len(s) - len(s.lstrip(" \t"))
    keyword = s[k:].split(None, 1)
    if not keyword or not s[k : k + 1].isalpha():
        # the parser saw a keyword where Python sees blanks (a control character: RS, FF, ...)
        raise ValueError("a control character around the instruction's keyword; retype the line")
    k += len(keyword[0])
    return Text(s[k:], tuple(max(o - k, 0) for o in text.starts), text.lines)


def _instruction(scan: _Scan, ins: str, head: Text, heredoc: Text | None, line: int) -> None:
    rest = _after_keyword(head)
    if ins == "RUN":
        _run(scan, rest, heredoc, line)
        return
    if ins == "ONBUILD":
        trigger = " ".join(rest.s.replace("\\\n", " ").split())
        scan.notes.append(Note(path=scan.path, line=line, text=f"ONBUILD {trigger}"))
        return
    words = docker_words(rest)
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
        _copy(scan, ins, words, rest.s.strip(), line)


def _arg(scan: _Scan, words: list[Word]) -> None:
    for w in words:
        name, eq, default = w.text.partition("=")
        if scan.stage is None and eq:
            scan.globals_[name] = default
        if eq:
            try:
                scan.scope[name] = scan.expand(default)
            except ExpansionTooLarge as exc:
                raise ExpansionTooLarge(f"ARG {name}: {exc}") from None
        elif scan.stage is not None and name not in scan.scope and name in scan.globals_:
            scan.scope[name] = scan.globals_[name]  # re-declared global ARG keeps its default
        inherited = scan.scope.get(name) if not eq and scan.stage is not None else None
        scan.args.append(
            ArgDecl(
                path=scan.path,
                line=w.line,
                name=name,
                default=default if eq else None,
                stage=scan.stage,
                inherited=inherited,
            )
        )
        if eq and default and is_pin_value(name, default):
            variable_pin(scan, w, "arg", name, default, scan.expand(default))


def _from(scan: _Scan, words: list[Word], line: int) -> None:
    _, words = _split_flags(words)
    if not words:
        raise ValueError("FROM without an image")
    if scan.stage is not None:
        scan.stage_scope[scan.stage] = scan.scope
        scan.stage_workdir[scan.stage] = scan.workdir
    image = words[0]
    alias = words[2].text if len(words) >= 3 and words[1].text.upper() == "AS" else None
    name = alias or str(len(scan.stages))
    scan.scope = dict(scan.globals_)  # FROM sees the ARGs declared before the first FROM
    ref = scan.expand(image.text)
    parent = ref if ref in scan.stage_names else None
    # A stage built on another inherits its ENV and (BuildKit) the ARGs it declared;
    # one built on an image starts with neither.
    scan.scope = dict(scan.stage_scope.get(parent, {})) if parent is not None else {}
    scan.stages.append(name)
    scan.stage_names.add(name)
    scan.stage = name
    scan.workdir = scan.cwd = scan.stage_workdir.get(parent, "/") if parent is not None else "/"
    scan.envs.setdefault(name, [])
    if parent is not None:
        scan.parents[name] = parent
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
    options = {f.text.partition("=")[0]: f.text.partition("=")[2] for f in flags}
    source = options.get("--from")
    if source is not None:
        _copy_from(scan, source, flags, line)
        return
    if text.startswith("[") or (flags and words and words[0].text.startswith("[")):
        json_text = text[text.index("[") :]
        depth = strictjson.depth(json_text.encode("utf-8", "surrogatepass"))
        if depth > 1:  # json recurses per bracket: 100,000 of them end in a RecursionError
            raise ValueError(
                f"{ins} JSON form: arrays nested {depth} deep; it is one list of strings, "
                f'e.g. {ins} ["src", "dest/"]'
            )
        try:
            items = [str(x) for x in json.loads(json_text)]
        except json.JSONDecodeError as exc:
            raise ValueError(f"{ins} JSON form: {exc}") from exc
        sources = [(line, s) for s in items[:-1]]
        dest = items[-1] if items else ""
    else:
        sources = [(w.line, w.text) for w in words[:-1] if not w.text.startswith("<<")]
        dest = words[-1].text if words else ""
    checksum = options.get("--checksum", "")
    for src_line, src in sources:
        if ins == "ADD" and "://" in src:
            url = scan.expand(src)
            target = scan.resolve_dir(dest)
            if dest.endswith("/") or len(sources) > 1:
                target = posixpath.join(target, posixpath.basename(url.split("?")[0]))
            scan.pin(
                line=src_line,
                source="curl",
                name=url_name(url),
                value=src,
                text=src,
                dest=target,
                sha256=checksum.removeprefix("sha256:") if checksum.startswith("sha256:") else None,
                floating=False if checksum else None,
            )
        else:
            scan.copies.append((src_line, src))


def _copy_from(scan: _Scan, source: str, flags: list[Word], line: int) -> None:
    """``COPY --from=X``: a stage of this recipe, or an image (a pin the recipe writes)."""
    ref = scan.expand(source)
    if ref in scan.stage_names or (ref.isascii() and ref.isdigit()):  # a stage index
        return
    word = next(f for f in flags if f.text.startswith("--from"))
    repo, tag, digest = _split_image(ref)
    scan.pins.append(
        RecipePin(
            path=scan.path,
            line=word.line,
            source="image",
            name=repo,
            value=(tag or "") + (f"@{digest}" if digest else ""),
            text=source,
            literal=bool(_VAR.sub("", source).strip(":@/")),
            floating=not digest,
            stage=scan.stage,
            resolved=ref,
            vars=_var_refs(source),
            tag=tag,
            digest=digest,
        )
    )


# ---------------------------------------------------------------- RUN


def _run(scan: _Scan, head: Text, heredoc: Text | None, line: int) -> None:
    scan.cwd = scan.workdir
    scan.shell_vars = {}
    scan.shell_undo = {}
    words = tokenize(head)
    flags, words = _split_flags(words)
    for f in flags:
        if f.text.startswith("--mount="):
            opts = dict(o.partition("=")[::2] for o in f.text[len("--mount=") :].split(","))
            if opts.get("type", "bind") == "bind" and "from" not in opts:
                scan.copies.append((f.line, opts.get("source", opts.get("src", "."))))
    if heredoc is not None:
        head_cmds = list(simple_commands(words))
        script_heredoc = not head_cmds or head_cmds[0][0].text in ("bash", "sh", "set")
        if script_heredoc:
            words += [Word(";", ";", line, op=True), *tokenize(heredoc)]
        else:
            data_heredoc(scan, words, heredoc)
    for cmd in simple_commands(words):
        command(scan, cmd)
    for name, before in scan.shell_undo.items():  # what the shell set dies with the RUN
        if before is None:
            scan.scope.pop(name, None)
        else:
            scan.scope[name] = before


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
