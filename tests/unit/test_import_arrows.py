"""Every arrow between twinbuild's subpackages points down: no two subpackages import each other,
however far round, counting the imports made inside functions (the lazy ones too). Within a
subpackage no two modules import each other either, and no module reaches into another's private
names; and the package's top-level modules (``errors.py``, ``inputs_rule.py``) are the bottom floor.

A cycle is found by the imports the code really writes, read with ``ast``; the message names the
files and lines that close it, so the fix (a helper moved down into ``util/``, say) is plain.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "twinbuild"

Arrows = dict[str, dict[str, list[str]]]  # subpackage -> subpackage -> "file:line" imports


def arrows(root: Path, package: str = PACKAGE) -> Arrows:
    """Which subpackage imports which, with where: ``{from: {to: ["path:line", ...]}}``."""
    top = root / package
    found: Arrows = defaultdict(lambda: defaultdict(list))
    for path in sorted(top.rglob("*.py")):
        parts = path.relative_to(top).parts
        if len(parts) < 2:
            continue  # a top-level module (errors.py): it belongs to no subpackage
        here = parts[0]
        module = path.relative_to(root).with_suffix("").parts
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            reached = set()
            for name in _imported(node, module):
                words = name.split(".")
                if len(words) >= 2 and words[0] == package and (top / words[1]).is_dir():
                    reached.add(words[1])
            for other in sorted(reached - {here}):
                found[here][other].append(f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}")
    return found


def module_arrows(root: Path, package: str = PACKAGE) -> Arrows:
    """Which module imports which (``twinbuild.builder.bake`` -> ``twinbuild.builder.image``),
    with where; a package's ``__init__`` is no module here (importing a module names it too)."""
    found: Arrows = defaultdict(lambda: defaultdict(list))
    for path in sorted((root / package).rglob("*.py")):
        module = path.relative_to(root).with_suffix("").parts
        here = ".".join(module)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(node, module):
                if name != here and (root / (name.replace(".", "/") + ".py")).is_file():
                    found[here][name].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def _imported(node: ast.AST, module: tuple[str, ...]) -> list[str]:
    """The dotted names an import statement reaches (``from a import b`` reaches ``a.b`` too)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: resolve against the importing module's package
        base = list(module[: len(module) - node.level])
        stem = ".".join([*base, node.module] if node.module else base)
    else:
        stem = node.module or ""
    return [stem, *(f"{stem}.{alias.name}" for alias in node.names)]


def cycles(found: Arrows) -> list[list[str]]:
    """The strongly connected groups of more than one subpackage (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    nodes = sorted(set(found) | {b for targets in found.values() for b in targets})

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(found.get(node, {})):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in nodes:
        if node not in index:
            visit(node)
    return groups


def describe(found: Arrows, group: list[str]) -> str:
    lines = [f"subpackages {', '.join(group)} import each other:"]
    for a in group:
        for b in group:
            if b in found.get(a, {}):
                lines.append(f"  {a} -> {b}: {', '.join(found[a][b][:4])}")
    return "\n".join(lines)


def test_no_subpackage_imports_one_that_imports_it_back() -> None:
    found = arrows(ROOT)
    assert found, "the walk found no imports between subpackages at all"
    problems = [describe(found, group) for group in cycles(found)]
    assert problems == [], "\n".join(problems)


def test_no_module_imports_one_that_imports_it_back() -> None:
    found = module_arrows(ROOT)
    assert found["twinbuild.builder.bake"], "the walk found no imports between modules"
    problems = [describe(found, group) for group in cycles(found)]
    assert problems == [], "\n".join(problems)


def test_the_module_check_sees_a_loop_closed_inside_a_function(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "b/__init__.py": "",
            "b/bake.py": "def f():\n    from twinbuild.b.build import g\n",
            "b/build.py": "from twinbuild.b import bake\n",
            "b/image.py": "from twinbuild.b import bake, build\n",
        },
    )
    found = module_arrows(root)
    assert cycles(found) == [["twinbuild.b.bake", "twinbuild.b.build"]]
    assert found["twinbuild.b.bake"]["twinbuild.b.build"] == ["twinbuild/b/bake.py:2"]


def test_no_module_of_twinbuild_uses_anothers_private_names() -> None:
    assert private_uses(ROOT / PACKAGE) == []


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        path = root / "twinbuild" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    return root


def test_the_check_sees_a_loop_closed_inside_a_function(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "",
            "low/__init__.py": "",
            "low/leaf.py": "from twinbuild.errors import x\n\ndef f():\n    from twinbuild.high import top\n",
            "high/__init__.py": "",
            "high/top.py": "from twinbuild.low import leaf\n",
            "apart/__init__.py": "",
            "apart/one.py": "from ..high import top\n",
        },
    )
    found = arrows(root)
    assert cycles(found) == [["high", "low"]]
    assert found["low"]["high"] == ["twinbuild/low/leaf.py:4"]
    assert found["apart"]["high"] == ["twinbuild/apart/one.py:1"]  # relative imports count too
    assert describe(found, ["high", "low"]).splitlines()[0] == (
        "subpackages high, low import each other:"
    )


def test_a_three_way_loop_is_one_group(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a/__init__.py": "import twinbuild.b.m\n",
            "b/__init__.py": "",
            "b/m.py": "from twinbuild import c\n",
            "c/__init__.py": "from twinbuild import a\n",
            "d/__init__.py": "from twinbuild.a import x\n",
        },
    )
    assert cycles(arrows(root)) == [["a", "b", "c"]]


#: The package's own top-level modules: the bottom floor, beside ``util/``. Each may import only
#: those named here (the rule of what counts as an image input needs nothing but the errors).
FLOOR = {"errors": set(), "inputs_rule": {"errors"}}


def floor_imports(root: Path, package: str = PACKAGE) -> dict[str, set[str]]:
    """What each top-level module of ``package`` (not ``__init__``, ``__main__``) imports of it,
    functions included: ``{"inputs_rule": {"errors"}}``."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / package).glob("*.py")):
        if path.stem in ("__init__", "__main__"):
            continue
        reached: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            for name in _imported(node, (package, path.stem)):
                words = name.split(".")
                if len(words) >= 2 and words[0] == package:
                    reached.add(words[1])
        found[path.stem] = reached
    return found


def test_the_top_level_modules_are_the_bottom_floor() -> None:
    """The builder, the plan and the gate all take the image-inputs rule from below them."""
    assert floor_imports(ROOT) == FLOOR


def test_the_floor_check_sees_an_import_up(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "__main__.py": "from twinbuild.cli import main\n",
            "errors.py": "",
            "inputs_rule.py": "from twinbuild.errors import E\n\ndef f():\n    from twinbuild.builder import x\n",
        },
    )
    assert floor_imports(root) == {"errors": set(), "inputs_rule": {"errors", "builder"}}


def private_uses(folder: Path, package: str = PACKAGE) -> list[str]:
    """Where code under ``folder`` reaches past ``package``'s public names, or into ``tests``:
    ``from twinbuild.x import _y``, ``module._y`` on an imported twinbuild module, ``import tests``."""
    found: list[str] = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        modules = {package}  # names bound to twinbuild modules in this file
        where = path.relative_to(folder.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                stem = node.module or "" if isinstance(node, ast.ImportFrom) else ""
                names = [stem] if stem else []
                names += [f"{stem}.{a.name}" if stem else a.name for a in node.names]
                if any(n == "tests" or n.startswith("tests.") for n in names):
                    found.append(f"{where}:{node.lineno}: imports test code")
                if any(_private(n) for n in names if n.startswith(package)):
                    found.append(f"{where}:{node.lineno}: imports a private name")
                if isinstance(node, ast.ImportFrom) and stem.startswith(package):
                    modules |= {a.asname or a.name for a in node.names}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and _root_name(node.value) in modules
            ):
                found.append(f"{where}:{node.lineno}: uses {node.attr}")
    return found


def _private(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return last.startswith("_") and not last.startswith("__")


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_the_benchmarks_use_twinbuild_by_its_public_names_only() -> None:
    assert private_uses(ROOT / "tools") == []


def test_the_public_names_check_sees_each_way_in(tmp_path: Path) -> None:
    tool = tmp_path / "tools" / "t.py"
    tool.parent.mkdir()
    tool.write_text(
        "from twinbuild.builder.image import _assemble\n"
        "from twinbuild.engine import base\n"
        "import tests.helpers\n"
        "def f():\n    base._remove_tree()\n    base.ensure_base()\n"
        "    import twinbuild.engine.daemon\n    twinbuild.engine.daemon._private_pid()\n"
    )
    assert private_uses(tmp_path / "tools") == [
        "tools/t.py:1: imports a private name",
        "tools/t.py:3: imports test code",
        "tools/t.py:5: uses _remove_tree",
        "tools/t.py:8: uses _private_pid",
    ]
