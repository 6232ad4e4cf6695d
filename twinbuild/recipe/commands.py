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
from twinbuild.recipe.shell import Text, Word, simple_commands, tokenize

_LOOSE_REQ = re.compile(r"^[A-Za-z][\w.+-]*(\[[^\]]*\])?(===|==|~=|>=|<=)[\w.*+!-]+$")
_AT_VERSION = re.compile(r"^@?[A-Za-z][\w./-]*@v?\d[\w.+-]*$")
_KEYWORDS = frozenset(["then", "do", "else", "elif", "if", "while", "until", "!", "{", "("])
_PIP = re.compile(r"pip[\d.]*")
_PYTHON = re.compile(r"python[\d.]*")
_ASSIGN = re.compile(r"[A-Za-z_]\w*=.*", re.DOTALL)
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


def data_heredoc(scan: Scan, words: list[Word], body: Text) -> None:
    """A heredoc that is file content: requirement files are read as such, the rest is sniffed."""
    target = " ".join(w.text for w in words)
    for k, raw in enumerate(body.s.split("\n")):
        item = raw.strip()
        if not item or item.startswith("#") or k >= len(body.lines):
            continue
        n = body.lines[k]
        if "requirements" in target or "constraints" in target:
            pip_requirement(scan, Word(item, item, n))
        elif _LOOSE_REQ.match(item) or SHA40.search(item):
            scan.unrecognised(n, item)


def _strip_prefix(cmd: list[Word]) -> list[Word]:
    while cmd and (
        cmd[0].text in _WRAPPERS
        or _ASSIGN.fullmatch(cmd[0].text)
        or (cmd[0].text.startswith("-") and cmd[0] is not cmd[-1])
    ):
        cmd = cmd[1:]
    return cmd


def command(scan: Scan, cmd: list[Word]) -> None:
    """One simple command of a RUN: the pins it installs or fetches, and the shell state it sets."""
    while cmd and cmd[0].text in _KEYWORDS:
        cmd = cmd[1:]
    if cmd and all(_ASSIGN.fullmatch(w.text) for w in cmd):
        for w in cmd:  # `X=1 Y=2` alone: shell variables for the rest of this RUN
            k, _, v = w.text.partition("=")
            assign(scan, k, v)
        return
    cmd = _strip_prefix(cmd)
    if not cmd:
        return
    prog = posixpath.basename(cmd[0].text)
    args = cmd[1:]
    if prog in ("bash", "sh") and len(args) >= 2 and args[0].text == "-c":
        inner = Text.one_line(args[1].text, args[1].line)
        for sub in simple_commands(tokenize(inner)):
            command(scan, sub)
        return
    if prog == "cd":
        scan.cwd = scan.resolve_dir(args[0].text) if args else "/root"
    elif prog == "export":
        for w in args:
            k, eq, v = w.text.partition("=")
            if eq:
                assign(scan, k, v)
                if v and names_a_pin(k):
                    variable_pin(scan, w, "env", k, v, scan.expand(v))
    elif prog in ("for", "read", "set", "local", "declare"):
        _shell_set(scan, prog, args)
    elif _PIP.fullmatch(prog):
        _pip(scan, args)
    elif _PYTHON.fullmatch(prog) and (pip_args := _python_m_pip(args)) is not None:
        _pip(scan, pip_args)
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


def assign(scan: Scan, name: str, value: str) -> None:
    """A shell variable set in a RUN. Set again to something else (``case`` or ``if`` branches),
    its value depends on the build machine, so it stays ``$NAME`` and pins using it are not
    read as values."""
    expanded = scan.expand(value)
    if "$(" in expanded or "`" in expanded:
        expanded = f"${{{name}}}"  # computed by a command at build time
    before = scan.shell_vars.get(name)
    if before is not None and before != expanded:
        expanded = f"${{{name}}}"
    _set(scan, name, expanded)


def _shell_set(scan: Scan, prog: str, args: list[Word]) -> None:
    """Variables a loop, ``read`` or ``set --`` fills at build time: unknown values."""
    names: list[str] = []
    if prog == "for" and args:
        names = [args[0].text]
    elif prog == "read":
        names = [a.text for a in args if not a.text.startswith("-")]
    elif prog == "set" and any(a.text == "--" for a in args):
        names = ["@", "*", *(str(k) for k in range(1, 10))]
    elif prog in ("local", "declare"):
        for a in args:
            k, eq, v = a.text.partition("=")
            if eq:
                assign(scan, k, v)
    for name in names:
        _set(scan, name, f"${{{name}}}")


def _set(scan: Scan, name: str, value: str) -> None:
    """Set a shell variable; the RUN's end puts back what the scope held before (the shell's
    variables die with it), so no RUN copies the whole scope."""
    if name not in scan.shell_vars:
        scan.shell_undo.setdefault(name, scan.scope.get(name))
    scan.shell_vars[name] = value
    scan.scope[name] = value


# pip's general options that take a value (they may come before the subcommand).
_PIP_GENERAL_VALUE_OPTS = frozenset(
    [
        "--python", "--log", "--log-file", "--proxy", "--retries", "--timeout", "--exists-action",
        "--trusted-host", "--cert", "--client-cert", "--cache-dir", "--use-feature",
        "--use-deprecated", "--resume-retries", "--keyring-provider", "--progress-bar",
    ]
)  # fmt: skip


def _pip(scan: Scan, args: list[Word]) -> None:
    """``pip [general options] install ...``: skip the options, then read the install."""
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        opt = args[i].text
        i += 2 if opt in _PIP_GENERAL_VALUE_OPTS else 1
    if i < len(args) and args[i].text == "install":
        pip_install(scan, args[i + 1 :])


def _python_m_pip(args: list[Word]) -> list[Word] | None:
    """The words after ``python [-u -I ...] -m pip``, or None when it is not pip."""
    i = 0
    while i < len(args) and args[i].text.startswith("-") and args[i].text != "-m":
        i += 1
    if i + 1 < len(args) and args[i].text == "-m" and args[i + 1].text == "pip":
        return args[i + 2 :]
    return None


def _download(scan: Scan, prog: str, args: list[Word]) -> None:
    """curl/wget URLs; the output file (-o/-O) is where the download lands in the image.

    A download written to stdout (curl without -o/-O, ``wget -O-``) is piped into another
    command: nothing lands in the image under its name, so the pin says ``stdout``.
    """
    dest: str | None = None
    stdout = prog == "curl"
    k = 0
    while k < len(args):
        t = args[k].text
        value = args[k + 1].text if k + 1 < len(args) else None
        if prog == "curl":
            if (t == "--output" or re.fullmatch(r"-[A-Za-z]*o", t)) and value is not None:
                dest, stdout = (None, True) if value == "-" else (scan.resolve_dir(value), False)
                k += 1
            elif t.startswith("--output="):
                dest, stdout = scan.resolve_dir(t.partition("=")[2]), False
            elif t in ("--remote-name", "--remote-name-all") or re.fullmatch(
                r"-[A-Za-z]*O[A-Za-z]*", t
            ):
                stdout = False
        elif re.fullmatch(r"-[A-Za-z]*O-?", t) or t in ("--output-document",):
            target = "-" if t.endswith("O-") else value
            if not t.endswith("O-"):
                k += 1
            stdout = target == "-"
            dest = None if stdout or target is None else scan.resolve_dir(target)
        elif t.startswith("--output-document="):
            target = t.partition("=")[2]
            stdout = target == "-"
            dest = None if stdout else scan.resolve_dir(target)
        k += 1
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
                dest=None if stdout else target,
                stdout=stdout,
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
    elif sub == "remote" and len(rest) >= 3 and rest[0].text == "add":
        # `git init && git remote add origin URL && git fetch origin SHA`: a clone by hand
        scan.clones[cwd] = normalize_repo(scan.expand(rest[-1].text))
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
            if sub not in ("fetch", "reset"):  # `git reset --hard` stays where it is
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
