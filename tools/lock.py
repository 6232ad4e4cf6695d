"""``nox -s lock``: the hash-locked requirements CI installs from, written from pyproject.toml.

Each lock is what one kind of job runs, and nothing more (``LOCKS``): the gate and the plan job
twinbuild's own dependencies; the image jobs those and the ``docker`` and ``smoke`` extras; the
lint and test sessions those and their dependency group; the workflows' ``nox`` itself. Every
lock also holds the build backend (setuptools), so ``pip install --no-deps --no-build-isolation
.`` after ``pip install --require-hashes -r locks/NAME.txt`` fetches nothing unhashed.

pip-compile resolves against the default index only (``PIP_CONFIG_FILE`` is the null device:
no local mirror or constraint of this machine gets into a lock) for Python 3.11, with every
file's hash of each pinned version. ``tests/unit/test_locks.py`` checks each lock against
pyproject.toml and every workflow's ``pip install`` against the locks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "locks"


@dataclass(frozen=True, slots=True, kw_only=True)
class Lock:
    name: str
    extras: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    project: bool = True  # twinbuild's own dependencies (and its build backend)
    extra_requirements: tuple[str, ...] = ()
    why: str


LOCKS_WANTED = (
    Lock(name="gate", why="evidence gate, evidence trigger/record/sign/verify, plan, pins table: "
         "twinbuild's dependencies alone"),
    Lock(name="image", extras=("docker", "smoke"),
         why="build, smoke, push, release: the Docker SDK and the smoke suite too"),
    Lock(name="lint", extras=("docker", "smoke"), groups=("lint",), why="nox -s lint"),
    Lock(name="tests", extras=("docker", "smoke"), groups=("test",), why="nox -s tests"),
    Lock(name="nox", project=False, extra_requirements=("nox",),
         why="the nox that runs the sessions in the workflows"),
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Locked:
    """One package a lock pins: its version, the hashes pip checks, whether the lock's own
    input asked for it (``# via -r locks/NAME.in``) rather than a dependency bringing it."""

    name: str
    version: str
    hashes: tuple[str, ...]
    top_level: bool


_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def read_lock(path: Path) -> dict[str, Locked]:
    """The packages of a pip-compile lock by name (as the lock spells it)."""
    found: dict[str, Locked] = {}
    name = version = ""
    hashes: list[str] = []
    top = False

    def close() -> None:
        if name:
            found[name] = Locked(name=name, version=version, hashes=tuple(hashes), top_level=top)

    for line in path.read_text(encoding="utf-8").splitlines():
        if entry := _ENTRY.match(line):
            close()
            name, version, hashes, top = entry.group(1), entry.group(2), [], False
        elif name and (digest := _HASH.search(line)):
            hashes.append(digest.group(1))
        elif name and re.search(rf"-r locks/{re.escape(path.stem)}\.in\b", line):
            top = True
    close()
    return found


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def group(data: dict[str, Any], name: str) -> list[str]:
    """A dependency group's requirements, its included groups followed (PEP 735)."""
    out: list[str] = []
    for item in data["dependency-groups"][name]:
        out += group(data, item["include-group"]) if isinstance(item, dict) else [item]
    return out


def requirements(lock: Lock, data: dict[str, Any] | None = None) -> list[str]:
    """The top-level requirements a lock resolves."""
    data = data or pyproject()
    project, build = data["project"], data["build-system"]
    found: list[str] = list(lock.extra_requirements)
    if lock.project:
        found += list(project["dependencies"]) + list(build["requires"])
        for extra in lock.extras:
            found += list(project["optional-dependencies"][extra])
    for name in lock.groups:
        found += group(data, name)
    return sorted(set(found), key=str.lower)


def compile_lock(lock: Lock, *, pip_compile: str = "pip-compile") -> Path:
    """Write ``locks/<name>.txt`` with pip-compile (hashes, the build backend allowed)."""
    LOCKS.mkdir(exist_ok=True)
    out = LOCKS / f"{lock.name}.txt"
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "CUSTOM_COMPILE_COMMAND": "nox -s lock"}
    for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        env.pop(name, None)
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / f"{lock.name}.in"
        source.write_text(
            f"# {lock.why}\n" + "".join(f"{r}\n" for r in requirements(lock)), encoding="utf-8"
        )
        subprocess.run(
            [pip_compile, "--quiet", "--generate-hashes", "--allow-unsafe", "--strip-extras",
             "--no-emit-index-url", "--resolver=backtracking", "--output-file", str(out),
             str(source)],
            env=env, check=True, cwd=work,
        )  # fmt: skip
    text = out.read_text(encoding="utf-8").replace(str(source), f"locks/{lock.name}.in")
    out.write_text(f"# {lock.why}\n{text}", encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    wanted = [lock for lock in LOCKS_WANTED if not argv or lock.name in argv]
    for lock in wanted:
        print(f"lock: {compile_lock(lock).relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
