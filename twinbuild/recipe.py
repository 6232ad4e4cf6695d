"""Find every pin a Dockerfile recipe writes: base images, ARG defaults, pip, git, curl, apt, ENV.

The lint uses it to prove a recipe holds no literal pin; the importer uses it to draft a manifest
from recipes that still do. Instruction boundaries come from dockerfile-parse; RUN bodies are split
by a small shell tokenizer that keeps the physical line of every word, so a finding points at the
line that holds the token. Whatever looks like a pin but fits no rule lands in ``unrecognised``.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from dockerfile_parse import DockerfileParser
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from twinbuild.errors import ConfigError

Source = Literal[
    "from", "arg", "pip", "git-clone", "git-checkout", "git-fetch", "curl", "apt", "env"
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
_HEX = re.compile(r"[0-9a-f]{7,40}")
_SHA40 = re.compile(r"[0-9a-f]{40}")
_VERSION = re.compile(r"v?\d+(\.\d+)+([.+-]?[A-Za-z0-9]+)*")
_PIN_ARG = re.compile(r".*_(BRANCH|REF|COMMIT|VERSION|TAG|SHA)$")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_REQ = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\[[^\]]*\])?\s*"
    r"(?P<spec>(===|==|~=|!=|>=|<=|<|>).*)?$"
)
_LOOSE_REQ = re.compile(r"^[A-Za-z][\w.+-]*(\[[^\]]*\])?(===|==|~=|>=|<=)[\w.*+!-]+$")
_AT_VERSION = re.compile(r"^@?[A-Za-z][\w./-]*@v?\d[\w.+-]*$")
_WHEEL = re.compile(
    r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>\d[^-]*)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$"
)
_SDIST = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)-(?P<version>v?\d[\w.]*)\.(tar\.gz|zip|tgz)$")
_QUIET = frozenset(
    [
        "echo",
        "printf",
        "sed",
        "grep",
        "awk",
        "test",
        "[",
        "[[",
        "cat",
        "tee",
        "true",
        "false",
        "exit",
    ]
)

# pip options that take a value (the value is never a requirement unless listed below).
_PIP_VALUE_OPTS = frozenset(
    [
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--src",
        "--upgrade-strategy",
        "--python-version",
        "--platform",
        "--implementation",
        "--abi",
        "--only-binary",
        "--no-binary",
        "--global-option",
        "--install-option",
        "-C",
        "--config-settings",
        "--progress-bar",
        "--cache-dir",
        "--log",
        "--trusted-host",
        "--python",
        "-p",
        "--index-strategy",
        "--extra",
        "--group",
        "--keyring-provider",
        "--resolution",
        "--prerelease",
        "--exclude-newer",
        "--timeout",
        "--retries",
        "--proxy",
        "--cert",
        "--client-cert",
        "--root-user-action",
    ]
)
_PIP_INDEX_OPTS = frozenset(
    ["-f", "--find-links", "-i", "--index-url", "--extra-index-url", "--index"]
)
_PIP_FILE_OPTS = {
    "-r": "requirements",
    "--requirement": "requirements",
    "-c": "constraints",
    "--constraint": "constraints",
    "--overrides": "overrides",
}
_GIT_CLONE_VALUE_OPTS = frozenset(
    [
        "-b",
        "--branch",
        "--depth",
        "-o",
        "--origin",
        "-j",
        "--jobs",
        "--reference",
        "--filter",
        "-c",
        "--config",
        "-u",
        "--upload-pack",
        "--separate-git-dir",
        "--shallow-since",
        "--shallow-exclude",
        "--template",
    ]
)
_WRAPPERS = frozenset(
    [
        "sudo",
        "env",
        "time",
        "nohup",
        "exec",
        "command",
        "eval",
        "xargs",
        "then",
        "do",
        "else",
        "elif",
        "if",
        "while",
        "!",
        "{",
        "(",
    ]
)


def normalize_repo(url: str) -> str:
    """Normalise a repository URL so the same repository compares equal across recipes.

    >>> normalize_repo("git+HTTPS://GitHub.com/NVIDIA/Megatron-LM.git/")
    'https://github.com/nvidia/megatron-lm'
    """
    u = url.strip()
    u = u.removeprefix("git+")
    m = re.match(r"^git@([^:]+):(.*)$", u)
    if m:
        u = f"https://{m.group(1)}/{m.group(2)}"
    u = re.sub(r"^(ssh|git|http)://(git@)?", "https://", u, flags=re.IGNORECASE)
    u = u.rstrip("/").removesuffix(".git").rstrip("/")
    return u if "$" in u else u.lower()


# ---------------------------------------------------------------- shell words


@dataclass(frozen=True, slots=True)
class _Word:
    text: str  # with quotes removed
    raw: str  # as written
    line: int
    op: bool = False


_OPS = ("&&", "||", ";;", ">>", "&>", "<<", "|", "&", ";", "(", ")", ">", "<")


def _tokenize(chars: list[tuple[str, int]]) -> list[_Word]:
    """Split a shell command into words and operators, remembering each word's physical line."""
    words: list[_Word] = []
    n, i = len(chars), 0

    def at(k: int) -> str:
        return chars[k][0] if k < n else ""

    while i < n:
        c, line = chars[i]
        if c == "\\" and at(i + 1) == "\n":
            i += 2
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "\n":
            words.append(_Word(";", ";", line, op=True))
            i += 1
            continue
        if c == "#":
            while i < n and chars[i][0] != "\n":
                i += 1
            continue
        j = i
        while j < n and chars[j][0].isdigit():
            j += 1
        if j > i and at(j) in "<>":
            i = j  # "2>" redirection: the digits belong to the operator
            c = chars[i][0]
        op = next((o for o in _OPS if "".join(at(i + k) for k in range(len(o))) == o), None)
        if op is not None:
            words.append(_Word(op, op, line, op=True))
            i += len(op)
            continue
        text: list[str] = []
        raw: list[str] = []
        while i < n:
            c = chars[i][0]
            if c in " \t\r\n" or (c in "&|;()<>"):
                break
            if c == "\\":
                if at(i + 1) == "\n":
                    i += 2
                    continue
                text.append(at(i + 1))
                raw.append(c + at(i + 1))
                i += 2
                continue
            if c == "'":
                k = i + 1
                while k < n and chars[k][0] != "'":
                    k += 1
                if k >= n:
                    raise ValueError("unterminated single quote")
                seg = "".join(ch for ch, _ in chars[i + 1 : k])
                text.append(seg)
                raw.append("'" + seg + "'")
                i = k + 1
                continue
            if c == '"':
                k = i + 1
                seg_t: list[str] = []
                while k < n and chars[k][0] != '"':
                    if chars[k][0] == "\\" and at(k + 1) in '"\\$`\n':
                        if at(k + 1) != "\n":
                            seg_t.append(at(k + 1))
                        k += 2
                        continue
                    seg_t.append(chars[k][0])
                    k += 1
                if k >= n:
                    raise ValueError("unterminated double quote")
                text.append("".join(seg_t))
                raw.append("".join(ch for ch, _ in chars[i : k + 1]))
                i = k + 1
                continue
            if c == "$" and at(i + 1) in "({":
                close = ")" if at(i + 1) == "(" else "}"
                depth, k = 0, i + 1
                while k < n:
                    ch = chars[k][0]
                    if ch == at(i + 1):
                        depth += 1
                    elif ch == close:
                        depth -= 1
                        if depth == 0:
                            break
                    k += 1
                seg = "".join(ch for ch, _ in chars[i : k + 1]).replace("\\\n", "")
                text.append(seg)
                raw.append(seg)
                i = k + 1
                continue
            if c == "`":
                k = i + 1
                while k < n and chars[k][0] != "`":
                    k += 1
                seg = "".join(ch for ch, _ in chars[i : k + 1])
                text.append(seg)
                raw.append(seg)
                i = k + 1
                continue
            text.append(c)
            raw.append(c)
            i += 1
        words.append(_Word("".join(text), "".join(raw), line))
    return words


def _commands(words: list[_Word]) -> Iterator[list[_Word]]:
    """Simple commands: words between operators, without redirections and `case` patterns."""
    cmd: list[_Word] = []
    skip_next = False
    for w in words:
        if skip_next and not w.op:
            skip_next = False
            continue
        if w.op and w.text in (">", ">>", "<", "&>", "<<"):
            skip_next = True
            continue
        if w.op:
            if w.text == ")" and cmd and cmd[0].text == "case":
                cmd = []  # `case X in pat)`: what follows the pattern is the command
            elif w.text == ")" and len(cmd) <= 2:
                cmd = []  # `pat)` or `a|b)` inside a case
            if cmd:
                yield cmd
            cmd = []
            continue
        cmd.append(w)
    if cmd:
        yield cmd


# ---------------------------------------------------------------- the scanner


@dataclass(slots=True)
class _Scan:
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
        refs = tuple(dict.fromkeys(a or b for a, b in _VAR.findall(value or text)))
        bare = _VAR.sub("", value).strip("{}:-") if value else ""
        resolved = self.expand(value)
        if floating is None:
            floating = _floating(source, resolved)
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


def _floating(source: Source, value: str) -> bool:
    """Default floating rule: git refs that are not commits, downloads without a version."""
    if value == "":
        return True
    if "$" in value:
        return False  # decided at build time; the lint checks the variable instead
    if source in ("git-clone", "git-checkout", "git-fetch"):
        return not _HEX.fullmatch(value)
    if source == "curl":
        return "latest" in value or not re.search(r"\d+\.\d+", value)
    return False


def parse(path: Path) -> Recipe:
    """Read a recipe and return every pin, ARG, variable use, COPY source and stage it holds."""
    try:
        data = path.read_bytes()
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
    for n in range(len(lines)):
        for a, b in _VAR.findall(lines[n]):
            if not lines[n].lstrip().startswith("#"):
                scan.used.add(a or b)
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


def _split_flags(words: list[_Word]) -> tuple[list[_Word], list[_Word]]:
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
    words = [w for w in _tokenize([c for c in rest if c[0] != "\x00"]) if not w.op]
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


def _arg(scan: _Scan, words: list[_Word]) -> None:
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
        if eq and default and _is_pin_value(name, default):
            scan.pin(
                line=w.line,
                source="arg",
                name=name,
                value=default,
                text=w.raw,
                floating=_arg_floating(name, scan.expand(default)),
            )


def _is_pin_value(name: str, value: str) -> bool:
    if _PIN_ARG.match(name.upper()):
        return True
    return bool(_HEX.fullmatch(value) or _VERSION.fullmatch(value))


def _arg_floating(name: str, value: str) -> bool:
    upper = name.upper()
    if _SHA40.fullmatch(value) or "$" in value:
        return False
    if upper.endswith(("_BRANCH", "_REF", "_TAG")):
        return not _HEX.fullmatch(value)
    return not (_HEX.fullmatch(value) or _VERSION.fullmatch(value))


def _from(scan: _Scan, words: list[_Word], line: int) -> None:
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
    refs = tuple(dict.fromkeys(a or b for a, b in _VAR.findall(image.text)))
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
            vars=refs,
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


def _env(scan: _Scan, words: list[_Word], line: int) -> None:
    assert scan.stage is not None  # noqa: S101 -- parse() refuses ENV before FROM
    pairs: list[tuple[str, str, _Word]] = []
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
        if v and _PIN_ARG.match(k.upper()):
            scan.pin(
                line=w.line,
                source="env",
                name=k,
                value=v,
                text=w.raw,
                floating=_arg_floating(k, value),
            )


def _copy(scan: _Scan, ins: str, words: list[_Word], text: str, line: int) -> None:
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
                line=src_line, source="curl", name=_url_name(scan.expand(src)), value=src, text=src
            )
        else:
            scan.copies.append((src_line, src))


# ---------------------------------------------------------------- RUN


def _run(scan: _Scan, chars: list[tuple[str, int]], line: int) -> None:
    scan.cwd = scan.workdir
    cut = next((k for k, c in enumerate(chars) if c[0] == "\x00"), len(chars))
    head, heredoc = chars[:cut], chars[cut + 1 :]
    words = _tokenize(head)
    flags, words = _split_flags(words)
    for f in flags:
        if f.text.startswith("--mount="):
            opts = dict(o.partition("=")[::2] for o in f.text[len("--mount=") :].split(","))
            if opts.get("type", "bind") == "bind" and "from" not in opts:
                scan.copies.append((f.line, opts.get("source", opts.get("src", "."))))
    head_cmds = list(_commands(words))
    script_heredoc = not head_cmds or head_cmds[0][0].text in ("bash", "sh", "set")
    if heredoc and script_heredoc:
        words += [_Word(";", ";", line, op=True), *_tokenize(heredoc)]
    elif heredoc:
        _data_heredoc(scan, words, heredoc)
    for cmd in _commands(words):
        _command(scan, cmd)


def _data_heredoc(scan: _Scan, words: list[_Word], chars: list[tuple[str, int]]) -> None:
    """A heredoc that is file content: requirement files are read as such, the rest is sniffed."""
    target = " ".join(w.text for w in words)
    by_line: dict[int, str] = {}
    for ch, n in chars:
        by_line[n] = by_line.get(n, "") + ch
    for n, text in by_line.items():
        item = text.strip()
        if not item or item.startswith("#"):
            continue
        if "requirements" in target or "constraints" in target:
            _pip_requirement(scan, _Word(item, item, n))
        elif _LOOSE_REQ.match(item) or _SHA40.search(item):
            scan.unrecognised(n, item)


def _strip_prefix(cmd: list[_Word]) -> list[_Word]:
    while cmd and (
        cmd[0].text in _WRAPPERS
        or re.fullmatch(r"[A-Za-z_]\w*=.*", cmd[0].text)
        or (cmd[0].text.startswith("-") and cmd[0] is not cmd[-1])
    ):
        cmd = cmd[1:]
    return cmd


def _command(scan: _Scan, cmd: list[_Word]) -> None:
    cmd = _strip_prefix(cmd)
    if not cmd:
        return
    prog = posixpath.basename(cmd[0].text)
    args = cmd[1:]
    if prog in ("bash", "sh") and len(args) >= 2 and args[0].text == "-c":
        inner = [(ch, args[1].line) for ch in args[1].text]
        for sub in _commands(_tokenize(inner)):
            _command(scan, sub)
        return
    if prog == "cd":
        scan.cwd = scan.resolve_dir(args[0].text) if args else "/root"
    elif prog == "export":
        for w in args:
            k, eq, v = w.text.partition("=")
            if eq:
                scan.scope[k] = scan.expand(v)
                if v and _PIN_ARG.match(k.upper()):
                    scan.pin(
                        line=w.line,
                        source="env",
                        name=k,
                        value=v,
                        text=w.raw,
                        floating=_arg_floating(k, scan.expand(v)),
                    )
    elif re.fullmatch(r"pip[\d.]*", prog) and args and args[0].text == "install":
        _pip(scan, args[1:])
    elif (
        re.fullmatch(r"python[\d.]*", prog)
        and len(args) >= 3
        and [a.text for a in args[:3]] == ["-m", "pip", "install"]
    ):
        _pip(scan, args[3:])
    elif prog == "uv" and len(args) >= 2 and [a.text for a in args[:2]] == ["pip", "install"]:
        _pip(scan, args[2:])
    elif prog == "git":
        _git(scan, args)
    elif prog in ("curl", "wget"):
        _download(scan, prog, args)
    elif prog in ("apt-get", "apt") and args and any(a.text == "install" for a in args):
        for w in args:
            if not w.text.startswith("-") and "=" in w.text:
                pkg, _, version = w.text.partition("=")
                scan.pin(
                    line=w.line, source="apt", name=pkg.split(":")[0], value=version, text=w.raw
                )
    elif prog not in _QUIET:
        for w in args:
            if _LOOSE_REQ.match(w.text) or _AT_VERSION.match(w.text) or _SHA40.fullmatch(w.text):
                scan.unrecognised(w.line, f"{cmd[0].text} ... {w.raw}")


def _download(scan: _Scan, prog: str, args: list[_Word]) -> None:
    """curl/wget URLs; the output file (-o/-O) is where the download lands in the image."""
    out_opts = ("-o", "--output") if prog == "curl" else ("-O", "--output-document")
    dest = None
    for k, w in enumerate(args):
        if w.text in out_opts and k + 1 < len(args) and args[k + 1].text != "-":
            dest = scan.resolve_dir(args[k + 1].text)
    for w in args:
        if "://" in w.text:
            url = scan.expand(w.text)
            target = dest or posixpath.join(scan.cwd, posixpath.basename(url.split("?")[0]))
            scan.pin(
                line=w.line,
                source="curl",
                name=_url_name(url),
                value=w.text,
                text=w.raw,
                dest=target,
            )


def _url_name(url: str) -> str:
    """A URL with its version parts replaced, so the same download matches across versions."""
    return re.sub(
        r"(?<=[/=_-])v?\d+(\.\d+)+(?=[/._-]|$)", "{version}", url.split("?", maxsplit=1)[0]
    )


def _pip(scan: _Scan, args: list[_Word]) -> None:
    i = 0
    while i < len(args):
        w = args[i]
        opt, eq, inline = w.text.partition("=")
        has_value = opt in _PIP_VALUE_OPTS or opt in _PIP_INDEX_OPTS or opt in _PIP_FILE_OPTS
        value_word = None
        if has_value and w.text.startswith("-"):
            if eq and opt.startswith("--"):
                value_word = _Word(inline, inline, w.line)
            elif i + 1 < len(args):
                value_word = args[i + 1]
                i += 1
        i += 1
        if value_word is not None:
            if opt in _PIP_INDEX_OPTS and "://" not in value_word.text:
                pass  # a folder inside the image (a wheelhouse the build copied in) is no source
            elif opt in _PIP_INDEX_OPTS:
                scan.pin(
                    line=w.line,
                    source="pip",
                    name=f"index:{scan.expand(value_word.text)}",
                    value=value_word.text,
                    text=f"{w.raw} {value_word.raw}".strip(),
                    floating=False,
                )
            elif opt in _PIP_FILE_OPTS:
                scan.pin(
                    line=w.line,
                    source="pip",
                    name=f"{_PIP_FILE_OPTS[opt]}:{value_word.text}",
                    value="",
                    text=f"{w.raw} {value_word.raw}",
                    floating=False,
                    dest=scan.resolve_dir(value_word.text),
                )
            continue
        if w.text in ("-e", "--editable"):
            continue  # the next word is the requirement or path
        if w.text.startswith("-"):
            continue  # a flag: --no-deps, -U, --no-build-isolation ...
        if i < len(args) - 1 and args[i].text == "@":  # `name @ URL` written as three words
            merged = f"{w.text} @ {args[i + 1].text}"
            _pip_requirement(scan, _Word(merged, f"{w.raw} @ {args[i + 1].raw}", w.line))
            i += 2
            continue
        _pip_requirement(scan, w)


def _pip_requirement(scan: _Scan, w: _Word) -> None:
    token = w.text.strip()
    if "git+" in token:
        _pip_git(scan, w, token)
        return
    base = token.split("#")[0].split("?")[0]
    if (
        "://" in base
        or "/" in base
        or base.endswith((".whl", ".tar.gz", ".zip"))
        or base in (".", "..")
    ):
        _pip_file(scan, w, token)
        return
    m = _REQ.match(token)
    if m is None:
        scan.unrecognised(w.line, f"pip install {w.raw}")
        return
    name = canonicalize_name(m.group("name"))
    written = (m.group("spec") or "").split(";")[0].strip()
    expanded = scan.expand(token)
    exact = written.startswith("==") and "*" not in written and "," not in written
    value = re.sub(r"^===?\s*", "", written) if exact else written
    if "$" in expanded:  # an unresolved variable: the value is decided at build time
        scan.pin(
            line=w.line, source="pip", name=name, value=value, text=w.raw, floating=False, dist=name
        )
        return
    try:
        req = Requirement(expanded)
    except InvalidRequirement:
        scan.unrecognised(w.line, f"pip install {w.raw}")
        return
    specs = list(req.specifier)
    exact = len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version
    scan.pin(
        line=w.line, source="pip", name=name, value=value, text=w.raw, floating=not exact, dist=name
    )


def _pip_git(scan: _Scan, w: _Word, token: str) -> None:
    name_part, at, url_part = token.partition(" @ ") if " @ " in token else ("", "", token)
    if not at and "@git+" in token.replace(" ", ""):
        name_part, _, url_part = token.partition("@")
    url_part = url_part.strip()
    url, _, fragment = url_part.partition("#")
    frag = dict(p.partition("=")[::2] for p in fragment.split("&") if p)
    url = url.removeprefix("git+")
    scheme, sep, rest = url.partition("://")
    host_path = rest if sep else scheme
    at_pos = host_path.rfind("@")
    slash = host_path.find("/")
    ref = ""
    if at_pos > slash:
        host_path, ref = host_path[:at_pos], host_path[at_pos + 1 :]
    repo = normalize_repo((scheme + sep if sep else "") + host_path)
    dist_raw = name_part.strip() or frag.get("egg", "")
    dist = canonicalize_name(re.split(r"[\[=<>~!;\s]", dist_raw)[0]) if dist_raw else None
    resolved = scan.expand(ref)
    scan.pin(
        line=w.line,
        source="pip",
        name=dist or repo,
        value=ref,
        text=w.raw,
        floating=not _HEX.fullmatch(resolved) and "$" not in resolved,
        repo=repo,
        dist=dist,
        subdirectory=frag.get("subdirectory") or None,
    )


def _pip_file(scan: _Scan, w: _Word, token: str) -> None:
    declared, at, url = token.partition(" @ ")
    if not at:
        declared, url = "", token
    url = url.strip()
    basename = posixpath.basename(url.split("#", maxsplit=1)[0].split("?", maxsplit=1)[0])
    m = _WHEEL.match(basename) or _SDIST.match(basename)
    remote = "://" in url
    if declared:
        dist = canonicalize_name(re.split(r"[\[\s]", declared.strip())[0])
        scan.pin(
            line=w.line,
            source="pip",
            name=dist,
            value=url,
            text=w.raw,
            floating=not (m or _VERSION.search(url)),
            dist=dist,
        )
    elif m and "*" not in basename and "$" not in m.group("version"):
        dist = canonicalize_name(m.group("name"))
        value = url if remote else m.group("version")
        scan.pin(
            line=w.line, source="pip", name=dist, value=value, text=w.raw, floating=False, dist=dist
        )
    elif remote:
        scan.pin(
            line=w.line,
            source="pip",
            name=_url_name(url),
            value=url,
            text=w.raw,
            floating=not _VERSION.search(url),
        )
    else:  # a local path or glob: what is installed is decided by whoever put it there
        path = scan.resolve_dir(url)
        scan.pin(
            line=w.line,
            source="pip",
            name=f"path:{path}",
            value="",
            text=w.raw,
            floating=False,
            dest=path,
        )


def _git(scan: _Scan, args: list[_Word]) -> None:
    cwd = scan.cwd
    while args and args[0].text in ("-C", "-c"):
        if args[0].text == "-C" and len(args) > 1:
            cwd = scan.resolve_dir(args[1].text)
        args = args[2:]
    if not args:
        return
    sub, rest = args[0].text, args[1:]
    if sub == "clone":
        _git_clone(scan, rest, cwd)
    elif sub in ("checkout", "switch", "reset", "fetch"):
        positional: list[_Word] = []
        i = 0
        while i < len(rest):
            t = rest[i].text
            if t == "--":
                break
            if t in ("--depth", "-b", "-B", "-c", "--branch", "--jobs", "-j") and i + 1 < len(rest):
                i += 2
                continue
            if not t.startswith("-"):
                positional.append(rest[i])
            i += 1
        target = positional[-1] if positional else None
        if sub == "fetch" and len(positional) < 2:
            target = None  # `git fetch origin` moves nothing by itself
        if target is None:
            if sub != "fetch":
                scan.unrecognised(args[0].line, "git " + " ".join(a.raw for a in args))
            return
        if target.text in ("FETCH_HEAD", "HEAD", "-", "."):
            return  # points at what an earlier fetch or clone pinned
        source: Source = "git-fetch" if sub == "fetch" else "git-checkout"
        repo = scan.clones.get(cwd)
        scan.pin(
            line=target.line,
            source=source,
            name=repo or f"dir:{cwd}",
            value=target.text,
            text=target.raw,
            repo=repo,
            dest=cwd,
        )


def _git_clone(scan: _Scan, rest: list[_Word], cwd: str) -> None:
    branch: _Word | None = None
    positional: list[_Word] = []
    i = 0
    while i < len(rest):
        t = rest[i].text
        opt, eq, inline = t.partition("=")
        if opt in ("-b", "--branch"):
            if eq:
                branch = _Word(inline, inline, rest[i].line)
            elif i + 1 < len(rest):
                branch = rest[i + 1]
                i += 1
        elif opt in _GIT_CLONE_VALUE_OPTS and not eq:
            i += 1
        elif not t.startswith("-"):
            positional.append(rest[i])
        i += 1
    if not positional:
        scan.unrecognised(rest[0].line if rest else 0, "git clone " + " ".join(w.raw for w in rest))
        return
    url_word = positional[0]
    url = scan.expand(url_word.text)
    repo = normalize_repo(url)
    default_dir = posixpath.basename(url.rstrip("/")).removesuffix(".git")
    dest_rel = positional[1].text if len(positional) > 1 else default_dir
    dest = posixpath.normpath(posixpath.join(cwd, scan.expand(dest_rel)))
    scan.clones[dest] = repo
    value = branch.text if branch else ""
    scan.pin(
        line=(branch or url_word).line,
        source="git-clone",
        name=repo,
        value=value,
        text=" ".join(w.raw for w in rest),
        repo=repo,
        dest=dest,
    )


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
