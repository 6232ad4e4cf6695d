"""The fresh-machine check (tools/fresh_machine.py): what it would undo, what it runs, in which
order, and its report, against a machine of the test's own (a cache folder, a binfmt_misc folder,
a /proc with two daemons) and a stand-in runner; nothing on this machine is undone here.
The README it reads is this checkout's, from a commit of a repository of the test's own."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit.gitrepos import commit_all, init, isolate_git, needs_git
from tools import fresh_machine as fm

REPO_ROOT = Path(__file__).resolve().parents[2]
MAIN = "python3 -m pip install -q --require-hashes -r locks/nox.txt && nox -s main"
TESTS = "python3 -m pip install -q --require-hashes -r locks/nox.txt && nox -s tests"


def test_the_readme_commands_are_the_two_of_the_readme() -> None:
    assert fm.readme_commands(REPO_ROOT / "README.md") == (MAIN, TESTS)


@pytest.mark.parametrize(
    "text",
    [
        "# x\n\nno section here\n",
        "## The two commands\n\n```sh\nnox -s main\n```\n",
        "## The two commands\n\n```sh\nnox -s tests\nnox -s main\n```\n",
        "## The two commands\n\n```sh\nnox -s main\nnox -s tests\nnox -s more\n```\n",
    ],
    ids=["no section", "one command", "tests first", "three commands"],
)
def test_a_readme_without_the_two_commands_is_one_line_exit_2(tmp_path: Path, text: str) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(text)
    with pytest.raises(fm.FreshError) as info:
        fm.readme_commands(readme)
    assert info.value.code == 2
    assert str(info.value).startswith(f"{readme}")
    assert "\n" not in str(info.value)


@dataclass
class StandIn:
    """The machine's programs as the check sees them: dpkg-query says what is installed, git is
    real (a repository of the test's), every other command is recorded and answers ``rc``."""

    installed: tuple[str, ...] = ("docker.io", "mmdebstrap", "runc")
    calls: list[tuple[tuple[str, ...], Path | None]] = field(default_factory=list)
    fail: str | None = None
    output: str = "one\ntwo\n"

    def __call__(self, argv: Sequence[str], cwd: Path | None) -> tuple[int, str]:
        if argv[0] == "dpkg-query":
            lines = [
                f"{p} {'installed' if p in self.installed else 'not-installed'}" for p in argv[3:]
            ]
            return 1, "\n".join(lines) + "\n"
        if argv[0] == "git" and argv[1] == "-C" and argv[3] in ("rev-parse", "show"):
            ran = subprocess.run(list(argv), capture_output=True, text=True, check=False)
            return ran.returncode, ran.stdout
        self.calls.append((tuple(argv), cwd))
        failing = self.fail is not None and self.fail in " ".join(argv)
        return (3 if failing else 0), self.output

    def commands(self) -> list[str]:
        return [" ".join(a[:2]) for a, _ in self.calls]


class Ticks:
    """A clock the test controls: each reading is 1.5 s after the one before."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.5
        return self.now


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    needs_git()
    isolate_git(monkeypatch, tmp_path / "home")
    root = tmp_path / "repo"
    (root / "locks").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "README.md", root / "README.md")
    shutil.copy(REPO_ROOT / "locks" / "nox.txt", root / "locks" / "nox.txt")
    init(root)
    commit_all(root, "a commit to check")
    return root


@pytest.fixture
def machine(tmp_path: Path) -> fm.Machine:
    cache = tmp_path / "cache"
    (cache / "engine").mkdir(parents=True)
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    for name in ("register", "status", "qemu-aarch64", "qemu-x86_64"):
        (binfmt / name).write_text("")
    proc = tmp_path / "proc"
    daemons = {
        "101": ["/usr/sbin/dockerd", f"--data-root={cache}/engine/data"],
        "102": ["/usr/bin/docker-registry", "serve", f"{cache}/registry/config.yml"],
        "103": ["/usr/sbin/dockerd", "--data-root=/var/lib/docker"],  # not ours: left alone
        "104": ["/bin/sh", f"{cache}/x"],  # not a daemon
    }
    for pid, argv in daemons.items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / "self").mkdir()
    (proc / "self" / "mountinfo").write_text(
        f"36 25 0:31 / {cache}/engine/data/overlay2/x/merged rw - overlay overlay rw\n"
        "37 25 0:32 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw\n"
    )
    return fm.Machine(cache=cache, binfmt=binfmt, proc=proc, python="python3")


def _options(repo: Path, tmp_path: Path, *, dry_run: bool = False) -> fm.Options:
    return fm.Options(commit="HEAD", repo=repo, out=tmp_path / "out", dry_run=dry_run, keep=False)


def test_the_dry_run_says_what_it_would_undo_and_run_and_runs_nothing(
    repo: Path, machine: fm.Machine, tmp_path: Path
) -> None:
    said: list[str] = []
    run = StandIn()
    fm.check(
        _options(repo, tmp_path, dry_run=True), run=run, ask=run, machine=machine,
        is_root=lambda: False, say=said.append,
    )  # fmt: skip
    assert run.calls == []
    assert not (tmp_path / "out").exists()
    cache = machine.cache
    assert said[1:10] == [
        "would undo: stop the engines and registry: kill -TERM 101 102",
        "would undo: wait for pid 101: timeout 60 tail --pid=101 -f /dev/null",
        "would undo: wait for pid 102: timeout 60 tail --pid=102 -f /dev/null",
        f"would undo: unregister qemu-aarch64: sh -c 'echo -1 > {machine.binfmt}/qemu-aarch64'",
        f"would undo: unregister qemu-x86_64: sh -c 'echo -1 > {machine.binfmt}/qemu-x86_64'",
        f"would undo: unmount binfmt_misc: umount {machine.binfmt}",
        'would undo: unmount in the cache: sh -c \'for m in "$@"; do ! mountpoint -q "$m" || '
        f'umount --lazy "$m" || exit 1; done\' sh {cache}/engine/data/overlay2/x/merged',
        f"would undo: remove the cache: rm -rf --one-file-system {cache}",
        "would undo: uninstall nox (pip): python3 -m pip uninstall -q -y argcomplete attrs "
        "colorlog dependency-groups distlib filelock humanize nox packaging platformdirs "
        "python-discovery virtualenv",
    ]
    assert said[10:12] == [
        "would undo: purge the packages: apt-get purge -y -q mmdebstrap docker.io runc",
        "would undo: remove what they pulled in: apt-get autoremove --purge -y -q",
    ]
    runs = [line for line in said if line.startswith("would run: ")]
    assert [line.split(":")[1].strip() for line in runs] == [
        "clone", "checkout", "main job, first run", "tests", "main job, second run",
    ]  # fmt: skip
    assert f"bash -c '{MAIN}'" in runs[2]
    assert f"bash -c '{TESTS}'" in runs[3]


def test_it_undoes_then_clones_then_runs_main_tests_and_main_again(
    repo: Path, machine: fm.Machine, tmp_path: Path
) -> None:
    run = StandIn()
    outcomes = fm.check(
        _options(repo, tmp_path), run=run, ask=run, machine=machine, clock=Ticks(),
        is_root=lambda: True, say=lambda _: None,
    )  # fmt: skip
    kinds = [o.kind for o in outcomes]
    assert kinds == sorted(kinds, key=["undo", "clone", "readme"].index)
    assert [o.name for o in outcomes][-3:] == [
        "main job, first run",
        "tests",
        "main job, second run",
    ]
    clone_dir = run.calls[kinds.index("clone")][0][-1]
    assert all(cwd == Path(clone_dir) for _, cwd in run.calls[-3:])
    assert not Path(clone_dir).exists()  # the temporary clone is gone (no --keep)
    assert all(o.seconds == 1.5 and o.lines == 2 for o in outcomes)
    report = json.loads((tmp_path / "out" / "fresh.json").read_text())
    assert report["finished"] is True
    assert len(report["steps"]) == len(outcomes)
    table = (tmp_path / "out" / "fresh.md").read_text()
    assert "| main job, second run | 1.5 | 0 | 2 |" in table
    assert len(list((tmp_path / "out" / "logs").iterdir())) == len(outcomes)


def test_a_readme_command_that_fails_is_exit_1_and_stops_there(
    repo: Path, machine: fm.Machine, tmp_path: Path
) -> None:
    run = StandIn(fail="nox -s main")
    with pytest.raises(fm.FreshError) as info:
        fm.check(
            _options(repo, tmp_path), run=run, ask=run, machine=machine, clock=Ticks(),
            is_root=lambda: True, say=lambda _: None,
        )  # fmt: skip
    assert info.value.code == 1
    assert str(info.value).startswith("main job, first run: `bash -c ")
    assert run.calls[-1][0][-1] == MAIN  # the tests never ran
    report = json.loads((tmp_path / "out" / "fresh.json").read_text())
    assert report["finished"] is False
    assert report["steps"][-1]["exit"] == 3


def test_an_undo_step_that_fails_is_exit_4(repo: Path, machine: fm.Machine, tmp_path: Path) -> None:
    run = StandIn(fail="apt-get purge")
    with pytest.raises(fm.FreshError) as info:
        fm.check(
            _options(repo, tmp_path), run=run, ask=run, machine=machine, clock=Ticks(),
            is_root=lambda: True, say=lambda _: None,
        )  # fmt: skip
    assert info.value.code == 4
    assert not [a for a, _ in run.calls if a[0] == "git"]  # nothing cloned


def test_not_root_is_one_line_exit_2_and_undoes_nothing(
    repo: Path, machine: fm.Machine, tmp_path: Path
) -> None:
    run = StandIn()
    with pytest.raises(fm.FreshError) as info:
        fm.check(
            _options(repo, tmp_path), run=run, ask=run, machine=machine, is_root=lambda: False,
            say=lambda _: None,
        )  # fmt: skip
    assert info.value.code == 2
    assert "run it as root" in str(info.value)
    assert run.calls == []


def test_an_unknown_commit_is_one_line_exit_2(
    repo: Path, machine: fm.Machine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fm.main(["--repo", str(repo), "--commit", "no-such-ref", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        f"fresh-machine: {repo}: no commit 'no-such-ref'; pass --commit REV\n"
    )
