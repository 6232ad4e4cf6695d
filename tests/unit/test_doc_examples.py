"""Every command example of the docs' console blocks that needs no engine, run, and its output
compared with what the docs show.

The blocks are read from README.md and docs/*.md (never copied here): ``$ `` starts a command
(a line ending in ``\\`` continues it; two spaces and ``#`` start a comment), the lines up to the
next command are its output. In the shown output ``…`` stands for any text within a line and a
line ``...`` for any lines. Each block runs in a fresh copy of this checkout (the files git tracks
or would track, committed once, so HEAD and ``origin/main`` are that commit), one command after
the other, with ``twinbuild`` on PATH; ``/tmp/`` in a command is the test's own folder. A command
the machine cannot run without an engine, a registry or a clone of upstream is listed in
``NOT_RUN`` with the reason; a command neither run nor listed fails the test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.gitrepos import git, isolate_git, needs_git

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 120

#: Commands (by their start) not run here, and why.
NOT_RUN: dict[str, str] = {
    "twinbuild build": "builds on an engine (tests/docker run builds)",
    "twinbuild prune": "asks an engine for its images",
    'eval "$(twinbuild engine env)"': "points the docker CLI at a running engine",
    "docker ": "the docker CLI and an engine",
    'twinbuild pins bump torch_memory_saver --commit "$MERGE"': (
        "needs a clone of upstream torch_memory_saver (tests/unit/test_bump.py runs --upstream on a "
        "real git repository)"
    ),
    "twinbuild plan\n": "describes a change to images/rocm and pins.numba that the copy does not have",
    "twinbuild lock --upgrade": (
        "asks the package index for its newest releases, which move from day to day "
        "(tests/unit/test_lock.py runs --upgrade against an index of its own on 127.0.0.1)"
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    command: str
    shown: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    where: str
    examples: tuple[Example, ...] = field(default=())


_BLOCK = re.compile(r"^```console\n(.*?)^```", re.S | re.M)
_COMMENT = re.compile(r"\s{2,}#.*$")


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 1
            examples: list[Example] = []
            command: list[str] = []
            shown: list[str] = []
            for raw in match.group(1).splitlines():
                if command and command[-1].endswith("\\"):
                    command.append(_COMMENT.sub("", raw))
                    continue
                if raw.startswith("$ "):
                    if command:
                        examples.append(Example(command="\n".join(command), shown=tuple(shown)))
                    command, shown = [_COMMENT.sub("", raw[2:])], []
                elif command and raw.strip():
                    shown.append(raw)
            if command:
                examples.append(Example(command="\n".join(command), shown=tuple(shown)))
            if examples:
                found.append(
                    Block(where=f"{path.relative_to(ROOT)}:{line}", examples=tuple(examples))
                )
    return found


def _pattern(shown: tuple[str, ...]) -> re.Pattern[str]:
    parts = []
    for line in shown:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(map(re.escape, line.split("…"))) + r"\n")
    return re.compile("".join(parts), re.S)


def _not_run(command: str) -> str | None:
    for start, why in NOT_RUN.items():
        if (command + "\n").startswith(start):
            return why
    return None


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout's files, committed once in a repository of their own."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    base = tmp_path_factory.mktemp("docs") / "base"
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (base / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, base / name)
    with pytest.MonkeyPatch.context() as patch:
        isolate_git(patch, tmp_path_factory.mktemp("home"))
        git(base, "init", "-q", "-b", "main")
        git(base, "add", "-A")
        git(base, "commit", "-qm", "the checkout")
    return base


def _run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-o", "pipefail", "-c", command],
        cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=TIMEOUT_S, check=False,
    )  # fmt: skip


@needs_git
@pytest.mark.parametrize("block", blocks(), ids=lambda block: block.where)
def test_the_example_prints_what_the_docs_show(
    block: Block, checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    work = tmp_path / "twinbuild"
    subprocess.run(["git", "clone", "-q", str(checkout), str(work)], check=True, env=os.environ)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "twinbuild"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m twinbuild "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "HOME": str(tmp_path / "home"),
        "COLUMNS": "200",
    }  # fmt: skip
    env.pop("GITHUB_ACTIONS", None)
    env.pop("DOCKER_HOST", None)
    cwd = work
    ran = 0
    for example in block.examples:
        if _not_run(example.command):
            continue
        command = example.command.replace("/tmp/", f"{tmp_path}/")
        if command.startswith("cd "):
            cwd = cwd / command.removeprefix("cd ").strip()
            continue
        assert command.startswith(("twinbuild ", "git ")), (
            f"{block.where}: `{example.command}` is neither run nor in NOT_RUN with a reason"
        )
        proc = _run(command, cwd, env)
        ran += 1
        where = f"{block.where}: `{example.command}` (exit {proc.returncode})"
        assert proc.returncode == 0, f"{where}:\n{proc.stdout}"
        if example.shown:
            assert _pattern(example.shown).fullmatch(proc.stdout), (
                f"{where} printed:\n{proc.stdout}\nthe docs show:\n" + "\n".join(example.shown)
            )
    if not ran:
        pytest.skip(f"{block.where}: every command needs what NOT_RUN says")


def test_some_examples_run_and_every_reason_is_still_used() -> None:
    commands = [e.command for b in blocks() for e in b.examples]
    assert sum(1 for c in commands if _not_run(c) is None) >= 10
    for start in NOT_RUN:
        assert any((c + "\n").startswith(start) for c in commands), f"NOT_RUN {start!r}: unused"
