"""``python3 -m tools.fresh_machine``: the README's two commands on a machine made fresh again.

A green CI can hide a missing install step: once anything has installed or registered what a
command needs, every later run passes. This check (a) undoes what the two README commands install
or register here: the private engines and registry (their processes), the emulator registrations
and the binfmt_misc mount, ``~/.cache/twinbuild``, the nox they install with pip, and the Debian
packages (mmdebstrap, arch-test, qemu-user-static, binfmt-support, docker.io, containerd, runc,
docker-buildx, docker-registry); (b) clones the given commit into a temporary folder; (c) runs the
README's two commands there, as written in that commit's README.md, then the main command again;
(d) reports each step's wall time, exit status and output lines, as a table and as JSON
(``build/fresh-machine/`` of the repository it runs from).

Standard library only: it runs with the machine's ``python3`` before (and after) anything is
installed. It needs root, and it really removes what it lists: ``--dry-run`` prints what it would
undo and run and changes nothing. Exit codes: 0 every step passed; 1 a README command failed (the
finding this check exists for); 2 bad input (not root, a README without the two commands, an
unknown commit); 4 an undo or clone step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINFMT = Path("/proc/sys/fs/binfmt_misc")
#: What the two commands (and what they run: engine up, base, binfmt, bake, the test suite's
#: registry) install with apt-get; purged where installed.
PACKAGES = (
    "mmdebstrap", "arch-test", "qemu-user-static", "binfmt-support", "docker.io", "containerd",
    "runc", "docker-buildx", "docker-registry",
)  # fmt: skip
#: The programs that run from the cache: the private engine, the test engine, the registry.
DAEMONS = ("dockerd", "containerd", "docker-registry", "registry")
SECTION = "## The two commands"
STOP_WAIT_S = 60

Runner = Callable[[Sequence[str], Path | None], tuple[int, str]]
Clock = Callable[[], float]


class FreshError(Exception):
    """One line for the person, and the exit code it ends in."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One command of the check: ``kind`` is undo, clone or readme."""

    name: str
    kind: str
    argv: tuple[str, ...]
    cwd: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    name: str
    kind: str
    command: str
    seconds: float
    exit: int
    lines: int


def _cache() -> Path:
    env = os.environ.get("TWINBUILD_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "twinbuild"


@dataclass(frozen=True, slots=True, kw_only=True)
class Machine:
    """Where this machine keeps what the commands made (tests point these at their own)."""

    cache: Path = field(default_factory=_cache)
    binfmt: Path = BINFMT
    proc: Path = Path("/proc")
    python: str = "python3"


def readme_commands(readme: Path) -> tuple[str, str]:
    """The two shell lines of README.md's "The two commands" section: the main job, the tests."""
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError as exc:
        raise FreshError(f"{readme}: cannot be read ({exc.strerror})", 2) from None
    lines = text.splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        raise FreshError(
            f"{readme}: no {SECTION!r} section; the check runs its commands", 2
        ) from None
    found: list[str] = []
    inside = False
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("```"):
            if inside:
                break
            inside = line.strip() in ("```sh", "```bash", "```shell")
            continue
        if inside and line.strip() and not line.lstrip().startswith("#"):
            found.append(line.strip())
    if len(found) != 2 or "nox -s main" not in found[0]:
        raise FreshError(
            f"{readme}:{start + 1}: {SECTION!r} must hold one sh block of two commands, the main "
            f"job (`nox -s main`) first; found {len(found)}: {found[:3]}",
            2,
        )
    return found[0], found[1]


def _pids(machine: Machine) -> list[int]:
    """The daemons running from the cache folder, by their command lines."""
    found = []
    for entry in sorted(machine.proc.glob("[0-9]*")):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if not argv or Path(argv[0].decode(errors="replace")).name not in DAEMONS:
            continue
        if any(str(machine.cache) in a.decode(errors="replace") for a in argv[1:]):
            found.append(int(entry.name))
    return found


def _installed(run: Runner) -> list[str]:
    _rc, out = run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\\n", *PACKAGES], None)
    # dpkg-query exits 1 when one is unknown; the lines it printed still say which are installed
    return [
        p
        for p, _, status in (ln.partition(" ") for ln in out.splitlines())
        if status == "installed" and p in PACKAGES
    ]


def _nox_packages(root: Path) -> list[str]:
    """The packages ``pip install -r locks/nox.txt`` put into the machine's python3."""
    text = (root / "locks" / "nox.txt").read_text(encoding="utf-8")
    return sorted({m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", text, re.M)})


def undo_plan(machine: Machine, run: Runner, root: Path = ROOT) -> list[Step]:
    """What to undo, as commands, from what this machine has now."""
    steps: list[Step] = []
    pids = [str(p) for p in _pids(machine)]
    if pids:
        steps.append(
            Step(name="stop the engines and registry", kind="undo", argv=("kill", "-TERM", *pids))
        )
        for pid in pids:  # each waited for: a data root is removed only once its daemon is gone
            wait = ("timeout", str(STOP_WAIT_S), "tail", f"--pid={pid}", "-f", "/dev/null")
            steps.append(Step(name=f"wait for pid {pid}", kind="undo", argv=wait))
    for entry in sorted(machine.binfmt.glob("qemu-*")):
        steps.append(
            Step(
                name=f"unregister {entry.name}",
                kind="undo",
                argv=("sh", "-c", f"echo -1 > {shlex.quote(str(entry))}"),
            )
        )
    if (machine.binfmt / "register").exists():
        steps.append(
            Step(name="unmount binfmt_misc", kind="undo", argv=("umount", str(machine.binfmt)))
        )
    if machine.cache.exists():
        mounts = _mounts_under(machine.cache, machine.proc)
        if mounts:
            # Read when the plan is made, before the engines stop: stopping dockerd unmounts its
            # own, so each is unmounted only if it is still a mount point when the step runs.
            only_mounted = (
                'for m in "$@"; do ! mountpoint -q "$m" || umount --lazy "$m" || exit 1; done'
            )
            steps.append(
                Step(
                    name="unmount in the cache",
                    kind="undo",
                    argv=("sh", "-c", only_mounted, "sh", *mounts),
                )
            )
        steps.append(
            Step(
                name="remove the cache",
                kind="undo",
                argv=("rm", "-rf", "--one-file-system", str(machine.cache)),
            )
        )
    steps.append(
        Step(
            name="uninstall nox (pip)",
            kind="undo",
            argv=(machine.python, "-m", "pip", "uninstall", "-q", "-y", *_nox_packages(root)),
        )
    )
    installed = _installed(run)
    if installed:
        steps.append(
            Step(
                name="purge the packages",
                kind="undo",
                argv=("apt-get", "purge", "-y", "-q", *installed),
            )
        )
        steps.append(
            Step(
                name="remove what they pulled in",
                kind="undo",
                argv=("apt-get", "autoremove", "--purge", "-y", "-q"),
            )
        )
    return steps


def _mounts_under(folder: Path, proc: Path) -> list[str]:
    try:
        text = (proc / "self" / "mountinfo").read_text()
    except OSError:
        return []
    prefix = str(folder)
    points = [ln.split()[4] for ln in text.splitlines() if len(ln.split()) > 4]
    return sorted(
        (p for p in points if p == prefix or p.startswith(prefix + "/")), key=len, reverse=True
    )


def run_plan(repo: Path, commit: str, work: Path, commands: tuple[str, str]) -> list[Step]:
    """The clone of ``commit`` into ``work`` and the README's commands there (main twice)."""
    clone = work / "twinbuild"
    main, tests = commands
    return [
        Step(
            name="clone",
            kind="clone",
            argv=("git", "clone", "--quiet", "--no-hardlinks", str(repo), str(clone)),
        ),
        Step(
            name="checkout",
            kind="clone",
            argv=("git", "-C", str(clone), "checkout", "--quiet", "--detach", commit),
        ),
        Step(name="main job, first run", kind="readme", argv=("bash", "-c", main), cwd=clone),
        Step(name="tests", kind="readme", argv=("bash", "-c", tests), cwd=clone),
        Step(name="main job, second run", kind="readme", argv=("bash", "-c", main), cwd=clone),
    ]


def execute(
    steps: Sequence[Step], run: Runner, clock: Clock, logs: Path, say: Callable[[str], None]
) -> list[Outcome]:
    """Each step in turn, timed, its output in ``logs``; stops at the first that fails."""
    done: list[Outcome] = []
    for i, step in enumerate(steps, 1):
        say(f"fresh-machine: {step.name}: {shlex.join(step.argv)}")
        start = clock()
        rc, out = run(step.argv, step.cwd)
        seconds = clock() - start
        (logs / f"{i:02d}-{re.sub(r'[^a-z0-9]+', '-', step.name)}.log").write_text(out)
        done.append(
            Outcome(
                name=step.name,
                kind=step.kind,
                command=shlex.join(step.argv),
                seconds=seconds,
                exit=rc,
                lines=len(out.splitlines()),
            )
        )
        say(f"fresh-machine: {step.name}: exit {rc} in {seconds:.1f}s")
        if rc != 0:
            break
    return done


def table(outcomes: Sequence[Outcome]) -> str:
    rows = ["| step | seconds | exit | output lines |", "|---|---:|---:|---:|"]
    rows += [f"| {o.name} | {o.seconds:.1f} | {o.exit} | {o.lines} |" for o in outcomes]
    return "\n".join(rows) + "\n"


def quiet_run(argv: Sequence[str], cwd: Path | None) -> tuple[int, str]:
    """Ask the machine something (git, dpkg-query): stdout alone, nothing shown."""
    ran = subprocess.run(
        list(argv), cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        errors="replace", check=False,
    )  # fmt: skip
    return ran.returncode, ran.stdout


def system_run(argv: Sequence[str], cwd: Path | None) -> tuple[int, str]:
    """Run one step, stdin closed, stdout and stderr together (also shown as they come)."""
    with subprocess.Popen(
        list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace",
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    ) as proc:  # fmt: skip
        out = []
        for line in proc.stdout or ():
            sys.stderr.write(line)
            out.append(line)
        return proc.wait(), "".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    commit: str
    repo: Path
    out: Path
    dry_run: bool
    keep: bool


def check(
    options: Options,
    *,
    run: Runner = system_run,
    ask: Runner = quiet_run,
    clock: Clock = time.monotonic,
    machine: Machine | None = None,
    is_root: Callable[[], bool] = lambda: os.geteuid() == 0,
    say: Callable[[str], None] = print,
) -> list[Outcome]:
    machine = machine or Machine()
    repo = str(options.repo)
    rc, sha = ask(
        ["git", "-C", repo, "rev-parse", "--verify", "-q", f"{options.commit}^{{commit}}"], None
    )
    if rc != 0:
        raise FreshError(f"{repo}: no commit {options.commit!r}; pass --commit REV", 2)
    sha = sha.strip()
    rc, readme = ask(["git", "-C", repo, "show", f"{sha}:README.md"], None)
    if rc != 0:
        raise FreshError(f"{repo}: commit {sha[:12]} has no README.md", 2)
    with tempfile.TemporaryDirectory(prefix="readme-") as tmp:
        (Path(tmp) / "README.md").write_text(readme)
        commands = readme_commands(Path(tmp) / "README.md")
    if not options.dry_run and not is_root():
        raise FreshError(
            "it removes packages, mounts and the cache, which needs root: run it as root "
            "(`sudo python3 -m tools.fresh_machine`), or pass --dry-run",
            2,
        )
    undo = undo_plan(machine, ask, options.repo)
    if options.dry_run:
        work = Path(tempfile.gettempdir()) / "twinbuild-fresh-XXXXXXXX"
        say(f"dry run: the commands of {sha[:12]}'s README.md; nothing was changed")
        for step in (*undo, *run_plan(options.repo, sha, work, commands)):
            verb = "undo" if step.kind == "undo" else "run"
            where = f" (in {step.cwd})" if step.cwd else ""
            say(f"would {verb}: {step.name}: {shlex.join(step.argv)}{where}")
        return []
    work = Path(tempfile.mkdtemp(prefix="twinbuild-fresh-"))
    steps = [*undo, *run_plan(options.repo, sha, work, commands)]
    logs = options.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        outcomes = execute(steps, run, clock, logs, say)
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    finished = len(outcomes) == len(steps) and all(o.exit == 0 for o in outcomes)
    report = {"commit": sha, "finished": finished, "steps": [asdict(o) for o in outcomes]}
    (options.out / "fresh.json").write_text(json.dumps(report, indent=2) + "\n")
    (options.out / "fresh.md").write_text(table(outcomes))
    say(table(outcomes).rstrip())
    failed = next((o for o in outcomes if o.exit != 0), None)
    if failed is not None:
        code = 1 if failed.kind == "readme" else 4
        raise FreshError(
            f"{failed.name}: `{failed.command}` exited {failed.exit}; its log is in {logs}", code
        )
    return outcomes


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m tools.fresh_machine", description=__doc__.splitlines()[0]
    )
    p.add_argument("--commit", default="HEAD", help="the commit to clone and check (default: HEAD)")
    p.add_argument(
        "--repo", default=str(ROOT), help="the repository to clone from (default: this one)"
    )
    p.add_argument(
        "--out",
        help="folder for fresh.md, fresh.json and the logs (default: <repo>/build/fresh-machine)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print what would be undone and run; change nothing"
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary clone")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    repo = Path(args.repo).resolve()
    out = Path(args.out) if args.out else repo / "build" / "fresh-machine"
    options = Options(commit=args.commit, repo=repo, out=out, dry_run=args.dry_run, keep=args.keep)
    try:
        check(options)
    except FreshError as exc:
        print(f"fresh-machine: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("fresh-machine: stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
