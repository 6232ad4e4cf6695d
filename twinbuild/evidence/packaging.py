"""What ``pyproject.toml`` makes pip run or install, judged against the paths nothing runs.

The not-inputs (:data:`twinbuild.inputs_rule.NOT_INPUTS`: docs/, tests/, tools/,
evidence/) pass the gate with no evidence and no approval because no build installs or runs them.
``pyproject.toml`` (an input and a trust root) can change that, and every ``pip install`` of the
default branch (gate.yml before the gate, validate-gpu.yml before record and sign) would then run
a folder anyone may edit: PEP 517's ``backend-path`` imports the build backend from the tree, and
setuptools installs from ``package-dir``, ``data-files``, ``script-files`` and
``packages.find``, reads requirements from ``dynamic`` files, and entry points import modules.
So the gate refuses a landing tree whose packaging names a not-input (exit 9), whoever approves:
an approval of one line would make a whole folder a trust root nobody is asked about again.
``readme`` and ``license-files`` are text pip copies into the metadata: allowed.
"""

from __future__ import annotations

import fnmatch
import posixpath
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from twinbuild.errors import ConfigError
from twinbuild.inputs_rule import NOT_INPUTS, under
from twinbuild.util import bounded
from twinbuild.util.repo_tree import CommitTree

PYPROJECT = "pyproject.toml"
MAX_BYTES = 1024 * 1024
#: The folders of the not-inputs, as the package names setuptools would find them under.
_FOLDERS = tuple(p.rstrip("/") for p in NOT_INPUTS if p.endswith("/"))
_SHOWN = ", ".join(f"{f}/" for f in _FOLDERS)


def refusals(repo: Path, landing: str, *, name: str) -> list[str]:
    """One line per path the landing tree's ``pyproject.toml`` has pip run or install that is a
    not-input; ``name`` is how messages call the landing tree."""
    tree = CommitTree(repo, landing)
    found = [e for e in tree.entries(PYPROJECT) if e.path == PYPROJECT]
    if not found or found[0].kind not in ("file", "executable"):
        return []  # no pyproject.toml, or a link (an input: the inputs hash refuses it)
    source = f"{name}:{PYPROJECT}"
    text = bounded.decode(tree.read([PYPROJECT], max_bytes=MAX_BYTES)[PYPROJECT], source=source,
                          what="pyproject.toml")  # fmt: skip
    try:
        data = bounded.parse(lambda: tomllib.loads(text), source=source, what="pyproject.toml")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc}); fix the file") from None
    return [
        f"{source}: {key}: names {value!r}, which is neither an image input nor a trust root "
        f"({_SHOWN}), yet pip would run or install it at every install of the default branch, "
        "the gate's and the signer's too: keep what pip runs and installs in twinbuild/ and the "
        "top level"
        for key, value in _named(data)
        if _reaches_not_input(key, value)
    ]


def _named(data: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, value) for every path, package pattern or entry point the file names."""
    build = _table(data, "build-system")
    yield from _strings("build-system.backend-path", build.get("backend-path"))
    project = _table(data, "project")
    for group in ("scripts", "gui-scripts"):
        for name, target in _table(project, group).items():
            yield from _strings(f"project.{group}.{name}", target)
    for group, points in _table(project, "entry-points").items():
        for name, target in points.items() if isinstance(points, dict) else ():
            yield from _strings(f"project.entry-points.{group}.{name}", target)
    tool = _table(_table(data, "tool"), "setuptools")
    for folder in _table(tool, "package-dir").values():
        yield from _strings("tool.setuptools.package-dir", folder)
    for sources in _table(tool, "data-files").values():  # keys: where under the prefix
        yield from _strings("tool.setuptools.data-files", sources)
    for key in ("script-files", "py-modules"):
        yield from _strings(f"tool.setuptools.{key}", tool.get(key))
    packages = tool.get("packages")
    if isinstance(packages, dict):  # packages.find / packages.find-namespace
        for kind in packages:
            finder = _table(packages, kind)
            for key in ("where", "include"):
                yield from _strings(f"tool.setuptools.packages.{kind}.{key}", finder.get(key))
    else:
        yield from _strings("tool.setuptools.packages", packages)
    for field, spec in _table(tool, "dynamic").items():
        if isinstance(spec, dict):
            yield from _strings(f"tool.setuptools.dynamic.{field}.file", spec.get("file"))
            yield from _strings(f"tool.setuptools.dynamic.{field}.attr", spec.get("attr"))


def _reaches_not_input(key: str, value: str) -> bool:
    """Whether ``value`` (a path, a package pattern, a module or ``module:attr``) lies in a
    not-input folder."""
    if (
        key.endswith((".include", ".attr", "py-modules"))
        or key.startswith("project.")
        or (key == "tool.setuptools.packages")
    ):
        top = value.split(":", 1)[0].strip().split(".", 1)[0]
        return any(fnmatch.fnmatchcase(folder, top) for folder in _FOLDERS)
    path = posixpath.normpath(value.strip() or ".")
    return any(under(path, prefix) or path == prefix.rstrip("/") for prefix in NOT_INPUTS)


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _strings(key: str, value: object) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, list):
        yield from ((key, v) for v in value if isinstance(v, str))
