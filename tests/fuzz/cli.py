"""The CLI boundary for the fuzz suite: a sandbox per example, and what a person or a runner hands
``twinbuild``: argv built from the real parser, environment variables, state files, API answers.

Each example runs ``main()`` in a sandbox of its own: a committed copy of the mini project (the
working folder), twinbuild's cache and a HOME beside it, and the odd things a careless path may
name (a FIFO, a symlink loop, a folder, a Latin-1 file). The result is what a person sees: the
exit code and what went to stdout and stderr.

Nothing here reaches past loopback or starts a process that outlives the call: commands that
would start daemons (``engine up``, ``registry up``), run the smoke suite on this machine
(``smoke --host``), run GPU checks (``gpu-proof`` without ``--dry-run``) or the external linters
(``workflows check`` without paths) are not generated, registries are named only as
``127.0.0.1:9`` (nothing listens there), and the engine boundary refuses as in every unit test
(``tests/conftest.py``), as does the host boundary (``tests/write_fence.py``: ``binfmt`` as root
would install QEMU and register it): reaching either means the input was accepted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.strategies import fragment
from tests.helpers import MINI
from twinbuild.cli.main import build_parser, main

#: Exit codes docs/errors.md lists (argparse exits 2 too).
DOCUMENTED = frozenset({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 130})
#: A long-enough commit for options that want 40 hex (not in the sandbox: refused by git).
SHA = "0123456789abcdef0123456789abcdef01234567"
#: The only registry any generated value names: loopback, a port nothing listens on.
REGISTRY = "127.0.0.1:9"
IMAGE = f"{REGISTRY}/twinbuild-ci/cuda@sha256:{'a' * 64}"

#: Leaf commands never generated (what they would start, see the module doc) and the options
#: dropped or forced on the others.
#: ``pins outdated`` asks PyPI, upstream git remotes and registries whatever its options say (its
#: bad input, unreachable sources included, is tests/unit/test_outdated.py's, against servers
#: on 127.0.0.1); generated, it would send a fuzz run's traffic off this machine.
SKIPPED_COMMANDS: frozenset[str] = frozenset({"pins outdated"})
DROPPED = {"smoke": {"--host"}}
FORCED: dict[str, list[str]] = {"gpu-proof": ["--dry-run"]}
ACTIONS = {"engine": ("status", "env"), "registry": ("status", "env")}

#: Values a careless user, a script or an attacker passes; paths are the sandbox's.
GOOD = (
    "pins/manifest.toml", "images/cuda/Dockerfile", "images/rocm/Dockerfile", ".", "build",
    "out", "out/x.json", "evidence/keys", "run.json", "jobs.json", "event.json", "reviews.json",
    "smoke", "HEAD", "HEAD~1", "main", "cuda", "rocm", "local", "production", "v1", "numba",
    "torch_memory_saver", "0.65.2", "1", "7", "42", "3.5", REGISTRY, IMAGE, SHA, "o/r",
    "https://github.com/o/r", "numba=.", "megatron-lm=.", ".github/workflows", "text", "json",
)  # fmt: skip
BAD = (
    "", " ", "-1", "0", "\u00b2", "\u0663", "nan", "inf", "1e300", "99999", "0x10", " 7", "+7",
    "../x", "../x.json", "/dev/null", "/dev/zero", "/dev/full", "fifo", "loop", "dir", "latin1",
    "missing/x.json", "x\n", "HEAD\n", "caf\udce9", "a\u2028b", "a\x85b", "a" * 300, "-x",
    "--output=out", "Registry.example/X/Y", "https://u:p@github.com/o/r", "https://github.com/o/r\n",
    "nosuchpin=/tmp", "sha256:", "{", "[[", "pins", "images", ".git", "HEAD:pins/manifest.toml",
)  # fmt: skip
value = st.one_of(st.sampled_from(GOOD), st.sampled_from(GOOD), st.sampled_from(BAD), fragment)
#: Values that fit an option or positional (by its flag or its dest): a careful example gives
#: most options one of these, so the command gets past its first checks and meets the one bad
#: value where it is read (with ``value`` alone most examples end in argparse's usage line).
FITTING: dict[str, tuple[str, ...]] = {
    "--attempt": ("1", "2"), "--base": ("HEAD", "main"), "--head": ("HEAD",), "--commit": (SHA,),
    "--current": ("jobs.json",), "--previous": ("jobs.json",), "--default-branch": ("main",),
    "--evidence": ("evidence", "event.json"), "--evidence-ref": ("HEAD", "main"),
    "--image": (IMAGE,), "--in": ("out",), "--jobs": ("1", "2"), "--keep": ("1", "3"),
    "--keys": ("evidence/keys",), "--manifest": ("pins/manifest.toml",),
    "--max-age-days": ("7", "3.5"), "--mirror": ("numba=.", "megatron-lm=."),
    "--out": ("out", "out/x.json", "x.json"), "--port": ("5000",), "--pr": ("42", "7"),
    "--reason": ("a fix upstream",), "--why": ("a fix upstream",), "--registry": (REGISTRY,),
    "--repo": (".",), "--report-dir": ("smoke", "out"), "--repository": ("o/r",),
    "--repository-id": ("7",), "--reviews": ("reviews.json",), "--root": (".",),
    "--run": ("run.json",), "--source": ("https://github.com/o/r",), "--tag": ("v1",),
    "--summary": ("summary.md",), "--upstream": (".",), "--version": ("0.65.2",),
    "name": ("numba", "torch_memory_saver"), "rev_a": ("HEAD", "main"), "rev_b": ("HEAD",),
    "cuda_dockerfile": ("images/cuda/Dockerfile",), "rocm_dockerfile": ("images/rocm/Dockerfile",),
}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Sandbox:
    """One example's world: ``repo`` is the working folder, all of it lies under ``root``."""

    root: Path
    repo: Path
    cache: Path
    home: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Ran:
    code: int | str  # the exit code, or "engine"/"host": it reached a refusing boundary
    out: str
    err: str


def template(folder: Path) -> Path:
    """The mini project as a committed git repository, with the API answers the commands read;
    copied for each example (the special files are made per sandbox: a FIFO cannot be copied)."""
    repo = folder / "repo"
    shutil.copytree(MINI, repo, ignore=shutil.ignore_patterns("build", ".twinbuild"))
    (repo / "run.json").write_text(RUN_ANSWER)
    (repo / "jobs.json").write_text(JOBS_ANSWER)
    (repo / "event.json").write_text(EVENT)
    (repo / "reviews.json").write_text("[[]]")
    (repo / "latin1").write_bytes(b"caf\xe9\n")
    env = {**os.environ, **_git_env(folder / "home")}
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "mini"]):
        subprocess.run(["git", "-C", str(repo), *argv], env=env, check=True, capture_output=True)
    return repo


def sandbox(template_repo: Path, root: Path) -> Sandbox:
    """A fresh copy of ``template_repo`` under ``root``, with the odd files beside its own."""
    repo = root / "repo"
    shutil.copytree(template_repo, repo, symlinks=True)
    os.mkfifo(repo / "fifo")
    (repo / "loop").symlink_to("loop")
    (repo / "dir").mkdir()
    return Sandbox(root=root, repo=repo, cache=root / "cache", home=root / "home")


def _git_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Fuzz",
        "GIT_AUTHOR_EMAIL": "fuzz@example.invalid",
        "GIT_COMMITTER_NAME": "Fuzz",
        "GIT_COMMITTER_EMAIL": "fuzz@example.invalid",
    }


#: Variables a run starts without unless an example sets them: a developer's or CI's own
#: DOCKER_HOST or GITHUB_* must not steer the sandbox.
_CLEARED = ("DOCKER_", "GITHUB_", "RUNNER_", "TWINBUILD_", "CI")


@contextlib.contextmanager
def entered(box: Sandbox, env: Mapping[str, str | bytes]) -> Iterator[None]:
    """The sandbox as the working folder and ``env`` over a cleaned environment, restored after."""
    saved = dict(os.environb)
    here = Path.cwd()
    try:
        for name in list(os.environ):
            if name.startswith(_CLEARED):
                del os.environ[name]
        os.environ.update(_git_env(box.home))
        os.environ["TWINBUILD_CACHE"] = str(box.cache)
        for key, val in env.items():
            if isinstance(val, bytes):
                os.environb[key.encode()] = val
            else:
                os.environ[key] = val
        os.chdir(box.repo)
        yield
    finally:
        os.chdir(here)
        os.environb.clear()
        os.environb.update(saved)


def run(argv: Sequence[str]) -> Ran:
    """``main(argv)`` as a person runs it: its exit code, stdout and stderr."""
    from tests.conftest import DockerBlocked
    from tests.write_fence import RanOnHost

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | str = main(list(argv))
        except SystemExit as exc:  # argparse, and lint --format json's findings
            code = exc.code if isinstance(exc.code, int) else 2
        except DockerBlocked:
            code = "engine"
        except RanOnHost:  # ``binfmt`` as root: it would install QEMU (tests/write_fence.py)
            code = "host"
    return Ran(code=code, out=out.getvalue(), err=err.getvalue())


def go(box: Sandbox, argv: Sequence[str], env: Mapping[str, str | bytes] | None = None) -> Ran:
    """``main(argv)`` in ``box`` under the suite's rules: the write fence, the time bound, and
    :func:`check` on what a person sees."""
    from tests.fuzz.conftest import time_bound
    from tests.write_fence import fenced

    # the repository, twinbuild's cache and HOME only (``bake --out ../x.json`` lands beside the
    # repository, still inside the example's folder); devices too, as in every unit test:
    # opening /dev/null (a child's stdin) or /dev/full (a step summary named there, refused once
    # open) writes no file
    fence = (box.repo, box.cache, box.home, Path(os.devnull).parent, *_runner_files(box, env))
    with fenced(*fence), time_bound(), entered(box, env or {}):
        ran = run(argv)
    check(ran, box)
    return ran


def _runner_files(box: Sandbox, env: Mapping[str, str | bytes] | None) -> list[Path]:
    """The files a runner hands over for writing ($GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY): they
    lie where the runner puts them, outside the repository (an example may name ``../``)."""
    named = [(env or {}).get(name) for name in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")]
    return [box.repo / v for v in named if isinstance(v, str) and v and v.isprintable()]


def check(ran: Ran, box: Sandbox) -> None:
    """What every run must show: a documented exit code, no traceback, a refusal that ends in
    one ``twinbuild:`` line (or argparse's own), and no temporary file left in the sandbox.

    Exit 1 (findings) and 3 (no engine or registry) may be a status said another way: ``engine
    status`` and ``lint --format json`` report on stdout; they must say something.
    """
    assert ran.code in ("engine", "host") or ran.code in DOCUMENTED, ran
    assert "Traceback" not in ran.err, ran.err
    if ran.code in (1, 3):
        assert ran.out.strip() or ran.err.strip(), ran
    elif ran.code not in {0, "engine", "host"}:
        last = ran.err.rstrip("\n").rpartition("\n")[2]
        assert last.startswith("twinbuild: ") or ": error: " in last, ran
    left = [p for p in box.root.rglob("*.tmp") if p.name.startswith(".")]
    assert not left, f"temporary files left behind: {left}"


# -- argv ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Command:
    words: tuple[str, ...]  # e.g. ("evidence", "gate")
    parser: argparse.ArgumentParser


def commands() -> list[Command]:
    """Every leaf command of the real parser that may be generated."""
    found: list[Command] = []

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            if " ".join(words) not in SKIPPED_COMMANDS:
                found.append(Command(words, parser))
            return
        for name, child in subs[0].choices.items():
            walk(child, (*words, name))

    walk(build_parser(), ())
    return found


@st.composite
def argv(draw: st.DrawFn, command: Command) -> list[str]:
    """Words for ``command``: each option present or not, with a good, bad or random value."""
    words = list(command.words)
    leaf = command.words[-1]
    careful = draw(st.booleans())  # fitting values for most options, a bad one here and there
    dropped = DROPPED.get(leaf, set())
    positionals: list[str] = []
    for action in command.parser._actions:
        if isinstance(action, argparse._HelpAction) or set(action.option_strings) & dropped:
            continue
        wanted = draw(st.integers(0, 9)) < (9 if action.required else 3)
        if not action.option_strings:
            positionals += _positional(draw, command, action, careful=careful)
            continue
        if not wanted:
            continue
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            words.append(flag)
            continue
        text = _choice(draw, action) if action.choices else _value(draw, flag, careful=careful)
        if draw(st.integers(0, 5)) == 0 and flag.startswith("--"):
            words.append(f"{flag}={text}")
        else:
            words += [flag, text]
    words += FORCED.get(leaf, [])
    return words + positionals


def _value(draw: st.DrawFn, key: str, *, careful: bool) -> str:
    """A value for the option ``key`` (or the positional of that dest)."""
    fitting = FITTING.get(key)
    if fitting and careful and draw(st.integers(0, 5)):
        return draw(st.sampled_from(fitting))
    return draw(value)


def _positional(
    draw: st.DrawFn, command: Command, action: argparse.Action, *, careful: bool
) -> list[str]:
    if command.words[0] in ACTIONS:
        return [draw(st.sampled_from(ACTIONS[command.words[0]]))]
    if action.nargs in ("*", "?"):
        count = draw(st.integers(0, 2))
    else:
        count = action.nargs if isinstance(action.nargs, int) else 1
    if command.words == ("workflows", "check"):  # the trust check alone: no zizmor, no network
        count = max(count, 1)
    return [
        _choice(draw, action) if action.choices else _value(draw, action.dest, careful=careful)
        for _ in range(count)
    ]


def _choice(draw: st.DrawFn, action: argparse.Action) -> str:
    assert action.choices is not None
    options = [str(c) for c in action.choices]
    return draw(st.sampled_from(options) | st.sampled_from(options) | value)


# -- environment, state files, API answers ------------------------------------------------------

ENV_VALUES: dict[str, tuple[str, ...]] = {
    "DOCKER_HOST": (
        "unix:///nonexistent/docker.sock", "tcp://localhost:abc", "tcp://localhost:99999",
        "tcp://[::1", "tcp://127.0.0.1:9", "ssh://host", "unix://", "tcp://localhost:", "x",
    ),
    "TWINBUILD_REGISTRY": (REGISTRY, "127.0.0.1:99999", "Bad Name", "127.0.0.1:9/ns", "x y"),
    "TWINBUILD_REGISTRY_PORT": ("5000", "\u00b2", "0", "65536", "x", " 5000"),
    "TWINBUILD_REGISTRY_TIMEOUT": ("1", "0", "\u00b2", "3601", "x"),
    "GITHUB_ACTIONS": ("true", "false"),
    "GITHUB_REPOSITORY": ("o/r", "", "o/r\n", "a" * 300),
    "GITHUB_REPOSITORY_ID": ("7", "\u00b2", "-1", "1" * 25, "x", "0"),
    "GITHUB_RUN_ID": ("9001", "\u00b2", "1" * 25),
    "GITHUB_RUN_ATTEMPT": ("1", "0", "\u00b2"),
    "GITHUB_EVENT_NAME": ("workflow_run", "pull_request", "push"),
    "GITHUB_EVENT_PATH": ("event.json", "/dev/null", "fifo", "dir", "missing.json", "latin1"),
    "GITHUB_OUTPUT": ("out.txt", "dir", "fifo", "/dev/full", "missing/out.txt", "loop"),
    "GITHUB_STEP_SUMMARY": ("summary.md", "dir", "fifo", "missing/s.md"),
    "GITHUB_SHA": (SHA, "x"),
    "GITHUB_REF": ("refs/heads/main", "refs/heads/validate/pr-42"),
    "GITHUB_WORKFLOW_REF": ("o/r/.github/workflows/validate-gpu.yml@refs/heads/main",),
    "GITHUB_ACTOR": ("maintainer",),
    "RUNNER_NAME": ("gpu-1",),
    "RUNNER_ENVIRONMENT": ("self-hosted",),
    "TWINBUILD_EVIDENCE_KEY": ("", "garbage", "-----BEGIN PRIVATE KEY-----\nAA==\n"),
}  # fmt: skip
#: Variables set as raw bytes (not UTF-8), as a runner or a shell may hand them over.
BYTE_VALUES = (b"o/r\xff", b"caf\xe9", b"\xff")

_GH = ("GITHUB_REPOSITORY", "GITHUB_REPOSITORY_ID", "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH")
_RUN = ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_SHA", "GITHUB_REF", "GITHUB_ACTOR")
_REG = ("TWINBUILD_REGISTRY", "TWINBUILD_REGISTRY_PORT", "TWINBUILD_REGISTRY_TIMEOUT")
#: Commands that read the environment, with the words that make them read the most of it and
#: the variables they read (an example spoils some of those).
ENV_COMMANDS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("engine", "status"), ("DOCKER_HOST",)), (("engine", "env"), ("DOCKER_HOST",)),
    (("registry", "status"), _REG), (("registry", "env"), _REG),
    (("evidence", "trigger", "--github-output"), (*_GH, "GITHUB_OUTPUT")),
    (("evidence", "gate", "--head", "HEAD", "--base", "HEAD", "--pr", "42", "--summary",
      "s.md"), _GH),
    (("evidence", "record", "--variant", "cuda", "--arch", "linux/amd64", "--report-dir", "smoke",
      "--out", "out",
      "--commit", SHA, "--pr", "42"), (*_GH, *_RUN, "GITHUB_WORKFLOW_REF")),
    (("evidence", "sign", "--in", "out", "--out", "signed", "--commit", SHA, "--pr", "42"),
     ("TWINBUILD_EVIDENCE_KEY", "GITHUB_ACTIONS", *_RUN)),
    (("release", "--variant", "cuda", "--image", IMAGE, "--tag", "v1", "--evidence",
      "event.json"), ("GITHUB_REPOSITORY", "GITHUB_REPOSITORY_ID", *_REG)),
    (("plan", "--github-output"), ("GITHUB_OUTPUT",)),
    (("lint",), ("GITHUB_ACTIONS",)), (("push",), (*_REG, "GITHUB_OUTPUT", "DOCKER_HOST")),
    (("prune",), ("DOCKER_HOST",)), (("bake",), ("GITHUB_ACTIONS", "GITHUB_REPOSITORY")),
    (("rerun-decision", "report", "--attempt", "1", "--current", "jobs.json",
      "--github-output"), ("GITHUB_OUTPUT",)),
)  # fmt: skip


#: A validation run's environment, every value good: each example spoils a few of them, so a
#: command gets past its first check and meets the spoilt one where it reads it.
RUNNER_ENV = {
    "GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "o/r", "GITHUB_REPOSITORY_ID": "7",
    "GITHUB_RUN_ID": "9001", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_EVENT_NAME": "workflow_run",
    "GITHUB_EVENT_PATH": "event.json", "GITHUB_OUTPUT": "out.txt",
    "GITHUB_STEP_SUMMARY": "summary.md", "GITHUB_SHA": SHA, "GITHUB_REF": "refs/heads/main",
    "GITHUB_WORKFLOW_REF": "o/r/.github/workflows/validate-gpu.yml@refs/heads/main",
    "GITHUB_ACTOR": "maintainer", "RUNNER_NAME": "gpu-1", "RUNNER_ENVIRONMENT": "self-hosted",
    "TWINBUILD_REGISTRY": REGISTRY, "TWINBUILD_REGISTRY_TIMEOUT": "1",
}  # fmt: skip


_TEXT = fragment.filter(lambda t: "\0" not in t)  # no environment holds a NUL


@st.composite
def environment(draw: st.DrawFn, names: tuple[str, ...]) -> dict[str, str | bytes]:
    """:data:`RUNNER_ENV` (mostly) with one or two of ``names`` spoilt: a value from
    :data:`ENV_VALUES`, random text, or bytes that are not UTF-8."""
    env: dict[str, str | bytes] = dict(RUNNER_ENV) if draw(st.integers(0, 3)) else {}
    for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            env[name] = draw(st.sampled_from(BYTE_VALUES))
        elif kind == 1:
            env[name] = draw(_TEXT)
        else:
            env[name] = draw(st.sampled_from(ENV_VALUES.get(name, ("",))))
    return env


#: Where twinbuild keeps its state, under the cache: the files a crash or a person may mangle.
STATE_FILES = ("engine/dockerd.pid", "registry/registry.pid", "registry/registry.port",
               "engine/x/containerd/containerd.pid", "engine/env")  # fmt: skip
STATE_BYTES = (
    b"", b"1\n", b"4242\n", b"\xc2\xb2\n", b"1" * 23 + b"\n", b"\xff\xfe", b"-5", b"0", b"5000",
    b"99999", b" 12 ", b"12\n13\n", b"9" * 70,
)  # fmt: skip
STATE_KINDS = ("bytes", "bytes", "bytes", "fifo", "dir", "loop", "dangling")
STATE_COMMANDS = (("engine", "status"), ("engine", "env"), ("engine", "--print-host"),
                  ("registry", "status"), ("registry", "env"), ("push",))  # fmt: skip


def put_state(box: Sandbox, name: str, kind: str, data: bytes) -> None:
    """Make the state file ``name`` (under the cache) a file holding ``data``, or a FIFO, ..."""
    path = box.cache / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "bytes":
        path.write_bytes(data)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    else:
        path.symlink_to(box.root / "nowhere")


RUN_ANSWER = (
    '{"id": 7, "path": ".github/workflows/nightly.yml", "status": "completed", '
    '"conclusion": "failure", "run_attempt": 1, "name": "nightly", "head_branch": "main", '
    '"event": "schedule"}'
)
JOBS_ANSWER = (
    '{"total_count": 2, "jobs": [{"name": "smoke (cuda)", "conclusion": "failure", '
    '"status": "completed"}, {"name": "smoke (rocm)", "conclusion": "success", '
    '"status": "completed"}]}'
)
EVENT = (
    '{"workflow_run": {"id": 9001, "path": ".github/workflows/validate.yml", "event": "push", '
    '"conclusion": "success", "head_branch": "validate/pr-42", "head_sha": "' + SHA + '", '
    '"repository": {"id": 7}, "head_repository": {"id": 7}}, '
    '"pull_request": {"number": 42}, "repository": {"id": 7}}'
)
#: Each API answer, the file it is saved in, and the command that reads it.
ANSWERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (RUN_ANSWER, "run.json", ("rerun-decision", "guard", "--run", "run.json", "--summary",
                              "summary.md")),
    (JOBS_ANSWER, "jobs.json", ("rerun-decision", "report", "--attempt", "2", "--current",
                                "jobs.json", "--previous", "jobs.json", "--summary", "s.md")),
    (EVENT, "event.json", ("evidence", "trigger", "--github-output")),
    ("[[]]", "reviews.json", ("evidence", "gate", "--head", "HEAD", "--base", "HEAD", "--pr",
                              "42", "--reviews", "reviews.json", "--summary", "s.md")),
    (EVENT, "evidence.dsse.json", ("evidence", "verify", "evidence.dsse.json")),
)  # fmt: skip
#: Strings an API answer may carry that no file can be written with, or that break a line.
HOSTILE_STRINGS = ("\ud800", "main\udfff", "x\n::error ::forged", "a\u2028b", "a\rb", "")


@st.composite
def spoiled(draw: st.DrawFn, seed: str) -> str:
    """``seed`` (a JSON document) with one of its strings replaced by a hostile one, written as
    JSON writes it (a lone surrogate as the escape ``\\ud800``)."""
    doc = json.loads(seed)
    strings: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        for key, item in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(item, str):
                strings.append((node, key))
            elif isinstance(item, dict | list):
                stack.append(item)
    if strings:
        node, key = draw(st.sampled_from(strings))
        node[key] = draw(st.sampled_from(HOSTILE_STRINGS))
    return json.dumps(doc)


#: What the commands reading an answer run with: a runner's environment, outputs in the sandbox.
ANSWER_ENV = {
    "GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": "event.json",
    "GITHUB_REPOSITORY": "o/r", "GITHUB_REPOSITORY_ID": "7", "GITHUB_OUTPUT": "out.txt",
}  # fmt: skip
