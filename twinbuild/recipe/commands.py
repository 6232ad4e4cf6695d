"""Pins in RUN commands: git clone/checkout/fetch, curl/wget, apt-get install, export, and the
pip installs that ``recipe_pip`` reads.

Each recogniser reads one simple command (words from ``shell``) and records what it installs or
fetches into the recipe scan; a token that looks like a pin but fits no rule is reported as
unrecognised, so nothing pinned slips past the lint unseen.
"""

from __future__ import annotations

import posixpath
import re

from twinbuild.recipe.pin_rules import (
    SHA40,
    Scan,
    Source,
    names_a_pin,
    normalize_repo,
    url_name,
    variable_floating,
)
from twinbuild.recipe.pip import pip_install, pip_requirement
from twinbuild.recipe.shell import Word, simple_commands, tokenize

_LOOSE_REQ = re.compile(r"^[A-Za-z][\w.+-]*(\[[^\]]*\])?(===|==|~=|>=|<=)[\w.*+!-]+$")
_AT_VERSION = re.compile(r"^@?[A-Za-z][\w./-]*@v?\d[\w.+-]*$")
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


def variable_pin(scan: Scan, w: Word, source: Source, name: str, value: str, resolved: str) -> None:
    """An ARG, ENV or ``export`` that pins by its value; ``resolved`` judges whether it floats."""
    scan.pin(
        line=w.line,
        source=source,
        name=name,
        value=value,
        text=w.raw,
        floating=variable_floating(name, resolved),
    )


def data_heredoc(scan: Scan, words: list[Word], chars: list[tuple[str, int]]) -> None:
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
            pip_requirement(scan, Word(item, item, n))
        elif _LOOSE_REQ.match(item) or SHA40.search(item):
            scan.unrecognised(n, item)


def _strip_prefix(cmd: list[Word]) -> list[Word]:
    while cmd and (
        cmd[0].text in _WRAPPERS
        or re.fullmatch(r"[A-Za-z_]\w*=.*", cmd[0].text)
        or (cmd[0].text.startswith("-") and cmd[0] is not cmd[-1])
    ):
        cmd = cmd[1:]
    return cmd


def command(scan: Scan, cmd: list[Word]) -> None:
    """One simple command of a RUN: the pins it installs or fetches, and the shell state it sets."""
    cmd = _strip_prefix(cmd)
    if not cmd:
        return
    prog = posixpath.basename(cmd[0].text)
    args = cmd[1:]
    if prog in ("bash", "sh") and len(args) >= 2 and args[0].text == "-c":
        inner = [(ch, args[1].line) for ch in args[1].text]
        for sub in simple_commands(tokenize(inner)):
            command(scan, sub)
        return
    if prog == "cd":
        scan.cwd = scan.resolve_dir(args[0].text) if args else "/root"
    elif prog == "export":
        for w in args:
            k, eq, v = w.text.partition("=")
            if eq:
                scan.scope[k] = scan.expand(v)
                if v and names_a_pin(k):
                    variable_pin(scan, w, "env", k, v, scan.expand(v))
    elif re.fullmatch(r"pip[\d.]*", prog) and args and args[0].text == "install":
        pip_install(scan, args[1:])
    elif (
        re.fullmatch(r"python[\d.]*", prog)
        and len(args) >= 3
        and [a.text for a in args[:3]] == ["-m", "pip", "install"]
    ):
        pip_install(scan, args[3:])
    elif prog == "uv" and len(args) >= 2 and [a.text for a in args[:2]] == ["pip", "install"]:
        pip_install(scan, args[2:])
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
            if _LOOSE_REQ.match(w.text) or _AT_VERSION.match(w.text) or SHA40.fullmatch(w.text):
                scan.unrecognised(w.line, f"{cmd[0].text} ... {w.raw}")


def _download(scan: Scan, prog: str, args: list[Word]) -> None:
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
                name=url_name(url),
                value=w.text,
                text=w.raw,
                dest=target,
            )


def _git(scan: Scan, args: list[Word]) -> None:
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
        positional: list[Word] = []
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


def _git_clone(scan: Scan, rest: list[Word], cwd: str) -> None:
    branch: Word | None = None
    positional: list[Word] = []
    i = 0
    while i < len(rest):
        t = rest[i].text
        opt, eq, inline = t.partition("=")
        if opt in ("-b", "--branch"):
            if eq:
                branch = Word(inline, inline, rest[i].line)
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
