"""Pins in ``pip install`` arguments (also ``python -m pip`` and ``uv pip``): requirements,
git+ URLs, wheel and sdist files or URLs, local paths, requirement files and package indexes.
"""

from __future__ import annotations

import posixpath
import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from twinbuild.recipe.pin_rules import HEX, VERSION, Scan, normalize_repo, url_name
from twinbuild.recipe.shell import Word

_REQ = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\[[^\]]*\])?\s*"
    r"(?P<spec>(===|==|~=|!=|>=|<=|<|>).*)?$"
)
_WHEEL = re.compile(
    r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>\d[^-]*)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$"
)
_SDIST = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)-(?P<version>v?\d[\w.]*)\.(tar\.gz|zip|tgz)$")

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
        "--resume-retries",
        "--exists-action",
        "--use-feature",
        "--use-deprecated",
        "--report",
        "--log-file",
        "--build-option",
        "--python-platform",
        "--upgrade-package",
        "-P",
        "--reinstall-package",
        "--no-binary-package",
        "--no-build-package",
        "--config-setting",
        "--hash",
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


def pip_install(scan: Scan, args: list[Word]) -> None:
    """The words after ``pip install``: options with their values, then requirements."""
    i = 0
    while i < len(args):
        w = args[i]
        opt, eq, inline = w.text.partition("=")
        has_value = opt in _PIP_VALUE_OPTS or opt in _PIP_INDEX_OPTS or opt in _PIP_FILE_OPTS
        value_word = None
        if has_value and w.text.startswith("-"):
            if eq and opt.startswith("--"):
                value_word = Word(inline, inline, w.line)
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
        if w.text in ("-e", "--editable") or w.text.startswith("--editable="):
            target = w.text.partition("=")[2] if "=" in w.text else None
            if target is None and i < len(args):
                target_word = args[i]
                i += 1
            elif target is not None:
                target_word = Word(target, target, w.line)
            else:
                continue
            _editable(scan, target_word)
            continue
        if w.text.startswith("-"):
            continue  # a flag: --no-deps, -U, --no-build-isolation ...
        if i < len(args) - 1 and args[i].text == "@":  # `name @ URL` written as three words
            merged = f"{w.text} @ {args[i + 1].text}"
            pip_requirement(scan, Word(merged, f"{w.raw} @ {args[i + 1].raw}", w.line))
            i += 2
            continue
        pip_requirement(scan, w)


def _editable(scan: Scan, w: Word) -> None:
    """``-e TARGET``: a VCS URL, or a local project (``-e "python[all]"`` is the folder
    ``python`` with extras, never the PyPI name ``python``)."""
    if "git+" in w.text or "://" in w.text:
        pip_requirement(scan, w)
        return
    folder = re.sub(r"\[[^\]]*\]$", "", w.text)
    path = scan.resolve_dir(folder)
    scan.pin(line=w.line, source="pip", name=f"path:{path}", value="", text=w.raw,
             floating=False, dest=path)  # fmt: skip


def pip_requirement(scan: Scan, w: Word) -> None:
    """One requirement, as written on the command line or in a requirements file."""
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
    if m is None or token.isdigit():  # a bare number is an unknown option's value, not a name
        scan.unrecognised(w.line, f"pip install {w.raw}")
        return
    name = canonicalize_name(m.group("name"))
    written = (m.group("spec") or "").split(";")[0].strip()
    expanded = scan.expand(token)
    exact = written.startswith("==") and "*" not in written and "," not in written
    value = re.sub(r"^===?\s*", "", written) if exact else written
    if "$" in expanded:  # an unresolved variable: the value is decided at build time
        _dist_pin(scan, w, name, value, floating=False)
        return
    try:
        req = Requirement(expanded)
    except InvalidRequirement:
        scan.unrecognised(w.line, f"pip install {w.raw}")
        return
    specs = list(req.specifier)
    exact = len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version
    _dist_pin(scan, w, name, value, floating=not exact)


def _dist_pin(scan: Scan, w: Word, dist: str, value: str, *, floating: bool) -> None:
    """A pip requirement for a known distribution: the pin is named by the distribution."""
    scan.pin(
        line=w.line, source="pip", name=dist, value=value, text=w.raw, floating=floating, dist=dist
    )


def _pip_git(scan: Scan, w: Word, token: str) -> None:
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
        floating=not HEX.fullmatch(resolved) and "$" not in resolved,
        repo=repo,
        dist=dist,
        subdirectory=frag.get("subdirectory") or None,
    )


def _pip_file(scan: Scan, w: Word, token: str) -> None:
    declared, at, url = token.partition(" @ ")
    if not at:
        declared, url = "", token
    url = url.strip()
    basename = posixpath.basename(url.split("#", maxsplit=1)[0].split("?", maxsplit=1)[0])
    m = _WHEEL.match(basename) or _SDIST.match(basename)
    remote = "://" in url
    if declared:
        dist = canonicalize_name(re.split(r"[\[\s]", declared.strip())[0])
        _dist_pin(scan, w, dist, url, floating=not (m or VERSION.search(url)))
    elif m and "*" not in basename and "$" not in m.group("version"):
        dist = canonicalize_name(m.group("name"))
        value = url if remote else m.group("version")
        _dist_pin(scan, w, dist, value, floating=False)
    elif remote:
        scan.pin(
            line=w.line,
            source="pip",
            name=url_name(url),
            value=url,
            text=w.raw,
            floating=not VERSION.search(url),
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
