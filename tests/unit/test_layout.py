"""The tree is what docs/layout.md says it is, and the engine boundary holds.

The package table must name every module of ``twinbuild/`` and ``tools/`` (a row per package, its
modules in backticks) and nothing that is not there; the top-level table every entry git tracks at
the root; the tests table every helper module of ``tests/``. No two modules of the package share a
file name. Only ``twinbuild/engine/`` may import ``docker``.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from tests.unit.gitrepos import needs_git

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "twinbuild"
TOOLS = ROOT / "tools"
LAYOUT = ROOT / "docs" / "layout.md"
_ROW = re.compile(r"^\| `((?:twinbuild|tools)/[^`]*)` \|(.*)\|$")
_FIRST_CELL = re.compile(r"^\| ([^|]*) \|(.*)\|$")


def documented() -> set[str]:
    """Module paths the layout table names: a package row's ``x.py`` entries, or a module row."""
    found: set[str] = set()
    for line in LAYOUT.read_text(encoding="utf-8").splitlines():
        row = _ROW.match(line)
        if row is None:
            continue
        path, what = row.groups()
        if path.endswith(".py"):
            found.add(path)
            continue
        found |= {path + name for name in re.findall(r"`([\w/]+\.py)`", what)}
    return found


def existing() -> set[str]:
    """Every module of the package and the tools except ``__init__.py`` (a package is its row)."""
    return {
        p.relative_to(ROOT).as_posix()
        for top in (PACKAGE, TOOLS)
        for p in top.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    }


def section(title: str) -> list[str]:
    """The lines of the layout page's section ``### title``."""
    lines = LAYOUT.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"### {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")), len(lines))
    return lines[start:end]


def rows(title: str) -> list[tuple[list[str], str]]:
    """Each table row of a section: the paths its first cell names, and the rest of the row."""
    found = []
    for line in section(title):
        row = _FIRST_CELL.match(line)
        if row is not None and "`" in row.group(1):
            found.append((re.findall(r"`([^`]+)`", row.group(1)), row.group(2)))
    return found


def tracked_top_level() -> set[str]:
    """Every entry git tracks at the repository root: ``name/`` for a folder."""
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False
    )
    if proc.returncode != 0:
        pytest.skip("not a git checkout: the tracked entries are git's to say")
    names = (p.decode() for p in proc.stdout.split(b"\0") if p)
    return {n.split("/", 1)[0] + ("/" if "/" in n else "") for n in names}


def top_level_named() -> set[str]:
    return {
        path.split("/", 1)[0] + ("/" if "/" in path else "")
        for paths, _ in rows("The top level")
        for path in paths
    }


def test_the_layout_table_names_every_module_and_nothing_else() -> None:
    named, there = documented(), existing()
    assert sorted(there - named) == [], "modules missing from docs/layout.md"
    assert sorted(named - there) == [], "docs/layout.md names modules that do not exist"


def test_every_package_has_a_row() -> None:
    named = {m.group(1) for line in LAYOUT.read_text().splitlines() if (m := _ROW.match(line))}
    packages = {
        p.parent.relative_to(ROOT).as_posix() + "/"
        for top in (PACKAGE, TOOLS)
        for p in top.rglob("__init__.py")
        if p.parent not in (PACKAGE, TOOLS)
    }
    assert sorted(packages - named) == []


def shared_names(package: Path) -> dict[str, list[str]]:
    """Module file names that more than one module of ``package`` bears (``__init__.py`` aside),
    with the modules: ``{"index.py": ["pins/index.py", "ship/index.py"]}``."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        if path.name != "__init__.py" and "__pycache__" not in path.parts:
            found.setdefault(path.name, []).append(path.relative_to(package).as_posix())
    return {name: paths for name, paths in found.items() if len(paths) > 1}


def test_no_two_modules_share_a_name() -> None:
    """`git ls-files | grep /index.py` finds the one module meant: a name says which concern it is
    (``pypi_index.py``, ``oci_index.py``), not only which folder it sits in."""
    assert shared_names(PACKAGE) == {}, "rename one of each so its name says what it is"


def test_the_shared_name_check_sees_a_pair_in_two_folders(tmp_path: Path) -> None:
    for path in ("a/__init__.py", "a/index.py", "b/__init__.py", "b/index.py", "b/c/report.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert shared_names(tmp_path) == {"index.py": ["a/index.py", "b/index.py"]}


@needs_git
def test_the_top_level_table_names_every_tracked_entry_and_nothing_else() -> None:
    tracked, named = tracked_top_level(), top_level_named()
    assert sorted(tracked - named) == [], "top-level entries missing from docs/layout.md"
    assert sorted(named - tracked) == [], "docs/layout.md names top-level entries git lacks"


def test_the_tests_table_names_every_helper_module() -> None:
    covered = rows("The tests and their helpers")
    helpers = sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "tests").rglob("*.py")
        if not p.name.startswith("test_")
        and p.name != "__init__.py"
        and "fixtures" not in p.parts
        and "__pycache__" not in p.parts
    )

    def named(helper: str) -> bool:
        for paths, what in covered:
            for path in paths:
                if helper == path:
                    return True
                if path.endswith("/") and helper.startswith(path):
                    first = helper.removeprefix(path).split("/")[0]
                    if f"`{first}`" in what or f"`{first}/`" in what:
                        return True
        return False

    assert [h for h in helpers if not named(h)] == []


def _imports_docker(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "docker" or name.startswith("docker.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_the_engine_package_imports_docker() -> None:
    engine = PACKAGE / "engine"
    offenders = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if engine not in p.parents
        for line in _imports_docker(p)
    ]
    assert offenders == []
    assert _imports_docker(engine / "client.py")  # the walk sees the boundary's own import


def test_the_docker_check_sees_every_spelling(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text(
        "import docker\nimport os, docker.errors\nfrom docker import APIClient\n"
        "from docker.errors import NotFound\nimport dockerfile_parse\n"
        "def f():\n    import docker.types\n"
    )
    assert _imports_docker(sample) == [1, 2, 3, 4, 7]


def test_lint_loads_neither_docker_nor_cryptography(tmp_path: Path) -> None:
    """Command modules import library code inside handlers, so a lint stays light."""
    import subprocess
    import sys

    from tests.helpers import mini_project

    root = mini_project(tmp_path)
    code = (
        "import sys\nfrom twinbuild.cli.main import main\n"
        f"main(['lint', '--root', {str(root)!r}, '--manifest', {str(root / 'pins/manifest.toml')!r}])\n"
        "print(sorted(m for m in ('docker', 'cryptography') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"
