"""Issue 29's classes of bad input, one root each: every test here failed on the code before the
fix (a traceback, a hang, a lost or half-written file, a write outside the repository, a wrong
exit code or an unclear message) and names the class it stands for.

Cases that used to hang, exhaust memory or die by a signal run the real command in a child
process with a timeout (and a memory limit), so a regression fails instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers import edit, mini_project
from tests.unit.gitrepos import commit_all, commit_file, git, init, isolate_git, needs_git
from twinbuild.cli.main import main

M = "pins/manifest.toml"
REPO = Path(__file__).resolve().parents[2]
HANG_TIMEOUT_S = 60
MEMORY_LIMIT = 2 * 1024**3  # the fuzz run's address-space bound, halved: a doubling hits it fast


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def child(
    argv: Sequence[str | bytes],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    prelude: str = "",
    unset: Sequence[str] = (),
    wrap: Sequence[str] = (),
) -> tuple[int, str]:
    """``python -m twinbuild ARGV`` in a child (memory-bound, timed): (exit code, stderr).

    ``prelude`` runs first in the child (it may arrange a signal mid-write); ``wrap`` is a command
    the interpreter runs under (setpriv, to drop root's permission override).
    """
    code = f"{prelude}\nfrom twinbuild.cli.main import main\nraise SystemExit(main())"
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    for name in unset:
        full.pop(name, None)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    proc = subprocess.run(
        [*wrap, sys.executable, "-c", code, *argv],
        cwd=cwd,
        env=full,
        capture_output=True,
        timeout=HANG_TIMEOUT_S,
        check=False,
        preexec_fn=limit,
    )
    return proc.returncode, proc.stderr.decode("utf-8", "backslashreplace")


def one_line(err: str) -> str:
    """The one ``twinbuild: `` line a refusal is, or a failure showing what came instead."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("twinbuild: "), err
    return lines[0]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return mini_project(tmp_path)


# -- quadratic and exponential work on small inputs ------------------------------------------------


def test_a_long_why_and_comment_index_in_linear_time(root: Path) -> None:
    """tomlpos scanned the rest of every key line with a backtracking regex: 60 kB took 20 s."""
    long = "x" * 400_000
    edit(root / M, 'why = "Qwen3-Next linear attention kernels"', f'why = "{long}"  # {long}')
    code, err = child(["lint"], cwd=root)
    assert code == 0
    assert all(line.startswith("note: ") for line in err.splitlines()), err


def test_pins_bump_with_a_long_why_in_linear_time(root: Path) -> None:
    code, err = child(["pins", "bump", "numba", "--version", "0.65.2", "--why", "y" * 100_000],
                      cwd=root)  # fmt: skip
    assert (code, err) == (0, "")
    assert "y" * 100_000 in (root / M).read_text()


def _recipes(root: Path, extra: str) -> None:
    for platform in ("cuda", "rocm"):
        path = root / f"images/{platform}/Dockerfile"
        path.write_text(path.read_text() + extra)


def test_arg_doubling_is_capped(root: Path) -> None:
    """Forty ``ARG XX=${XX}${XX}`` lines doubled a string forty times (MemoryError)."""
    _recipes(root, "ARG XX=ab\n" + "ARG XX=${XX}${XX}\n" * 40)
    code, err = child(["lint"], cwd=root)
    recipe = root / "images/cuda/Dockerfile"
    lines = recipe.read_text().splitlines()
    first = lines.index("ARG XX=${XX}${XX}") + 1
    line = one_line(err)
    assert code == 2
    shown = "images/cuda/Dockerfile"  # as lint names it, run in the repository
    assert line.startswith(f"twinbuild: {shown}:")
    number = int(line.removeprefix(f"twinbuild: {shown}:").partition(":")[0])
    assert first < number <= first + 40
    assert "expand" in line
    assert "ARG XX" in line


# -- recursion --------------------------------------------------------------------------------------


DEEP_COPY = "COPY " + "[" * 100_000 + "]" * 100_000 + "\n"


def test_copy_json_nested_100000_deep_in_lint(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _recipes(root, DEEP_COPY)
    code, _, err = run(["lint", "--root", str(root)], capsys)
    assert code == 2
    assert one_line(err).startswith(f"twinbuild: {root / 'images/cuda/Dockerfile'}:")
    assert "nested" in err


def test_copy_json_nested_100000_deep_in_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "cuda.Dockerfile"
    recipe.write_text("FROM debian:12\n" + DEEP_COPY)
    argv = ["import", str(recipe), str(recipe), "--out", str(tmp_path / "draft.toml")]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err).startswith(f"twinbuild: {recipe}:2: ")


@needs_git
def test_copy_json_nested_100000_deep_in_evidence_inputs(
    mini_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _recipes(mini_repo, DEEP_COPY)
    head = commit_all(mini_repo, "deep COPY")
    code, _, err = run(["evidence", "inputs", "--head", head, "--repo", str(mini_repo)], capsys)
    assert code == 2
    assert one_line(err).startswith("twinbuild: images/cuda/Dockerfile:10: does not parse: ")


# -- state files -------------------------------------------------------------------------------------


def _state(tmp_path: Path, name: str) -> tuple[Path, dict[str, str]]:
    cache = tmp_path / "cache"
    (cache / name).mkdir(parents=True)
    return cache / name, {"TWINBUILD_CACHE": str(cache)}


@pytest.mark.parametrize(
    ("command", "folder", "pidfile"),
    [("engine", "engine", "dockerd.pid"), ("registry", "registry", "registry.pid")],
)
def test_a_fifo_pidfile_is_refused_not_waited_on(
    tmp_path: Path, command: str, folder: str, pidfile: str
) -> None:
    state, env = _state(tmp_path, folder)
    os.mkfifo(state / pidfile)
    code, err = child([command, "status"], cwd=tmp_path, env=env, unset=["DOCKER_HOST"])
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: {state / pidfile}: is a FIFO (named pipe), not a regular file; it is "
        f"twinbuild's own state: remove it and re-run"
    )


@pytest.mark.parametrize(
    "content", [b"\xc2\xb2\n", b"1" * 23 + b"\n", b"\xff\xfe12\n", b"-5\n", b"0\n", b""]
)
def test_a_garbled_engine_pidfile_is_stale(
    tmp_path: Path,
    content: bytes,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``²`` (which isdigit() accepts and int() refuses), 23 digits, not UTF-8: each crashed."""
    state, env = _state(tmp_path, "engine")
    (state / "dockerd.pid").write_bytes(content)
    monkeypatch.setenv("TWINBUILD_CACHE", env["TWINBUILD_CACHE"])
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr("twinbuild.engine.daemon.DEFAULT_HOST", f"unix://{tmp_path}/none.sock")
    code, out, err = run(["engine", "status"], capsys)
    assert (code, out) == (3, "")
    assert err.startswith("twinbuild: no engine answers at unix://")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("content", [b"\xc2\xb2\n", b"9" * 23, b"\xff\n", b"99999\n"])
def test_a_garbled_registry_portfile_is_ignored(
    tmp_path: Path,
    content: bytes,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, env = _state(tmp_path, "registry")
    (state / "registry.port").write_bytes(content)
    monkeypatch.setenv("TWINBUILD_CACHE", env["TWINBUILD_CACHE"])
    monkeypatch.delenv("TWINBUILD_REGISTRY_PORT", raising=False)
    code, out, err = run(["registry", "env"], capsys)
    assert (code, out) == (3, "")
    assert "127.0.0.1:5000" in err
    assert len(err.splitlines()) == 1


# -- numbers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["\u00b2", "5000\n", "0", "65536", "1" * 30, " 5000", "+5000"])
def test_registry_port_variable_is_a_port(
    value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TWINBUILD_REGISTRY_PORT", value)
    code, _, err = run(["registry", "status"], capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: $TWINBUILD_REGISTRY_PORT: {value!r} is not a whole number from 1 to 65535; "
        "set a TCP port, e.g. 5000"
    )


def _trigger_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"id": 1}}))
    return {"GITHUB_EVENT_NAME": "workflow_run", "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": "o/r", **extra}  # fmt: skip


@pytest.mark.parametrize("value", ["\u00b2", "12\u00b3", "1" * 25, "-1"])
def test_repository_id_variable_is_a_number(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, v in _trigger_env(tmp_path, GITHUB_REPOSITORY_ID=value).items():
        monkeypatch.setenv(name, v)
    code, _, err = run(["evidence", "trigger"], capsys)
    assert code == 2
    assert one_line(err).startswith(
        f"twinbuild: $GITHUB_REPOSITORY_ID: {value!r} is not a whole number from 1 to "
    )


def _release(tmp_path: Path, *extra: str) -> list[str]:
    evidence = tmp_path / "cuda.dsse.json"
    evidence.write_text("{}")
    return ["release", "--variant", "cuda", "--image", "127.0.0.1:9/x@sha256:" + "a" * 64,
            "--tag", "v1", "--evidence", str(evidence), "--repository", "o/r",
            "--keys", str(tmp_path), *extra]  # fmt: skip


@pytest.mark.parametrize("value", ["\u00b2", "1\u00b2", "0x10"])
def test_release_repository_id_is_a_number(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(_release(tmp_path, "--repository-id", value), capsys)
    assert code == 2
    assert one_line(err).startswith(f"twinbuild: --repository-id: {value!r} is not a whole number")


@pytest.mark.parametrize("value", ["nan", "1e300", "inf", "-1", "0"])
def test_release_max_age_days_is_checked_like_the_gate(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(_release(tmp_path, "--repository-id", "7", "--max-age-days", value))
    assert exit_.value.code == 2
    assert f"argument --max-age-days: {value!r}: give a number over 0 and at most 3650" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("tcp://localhost:abc", "port 'abc' is not a whole number from 1 to 65535"),
        ("tcp://localhost:99999", "port '99999' is not a whole number from 1 to 65535"),
        ("tcp://[::1", "not an address"),
        ("ssh://host", "scheme 'ssh' is not supported"),
    ],
)
def test_docker_host_is_parsed_once(
    value: str, says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", value)
    code, _, err = run(["engine", "status"], capsys)
    assert code == 2
    line = one_line(err)
    assert line.startswith(f"twinbuild: $DOCKER_HOST: {value!r}: "), line
    assert says in line


def test_prune_keep_is_checked_before_the_engine(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["prune", "--keep", "-1"])
    assert exit_.value.code == 2
    assert "argument --keep: '-1' is not a whole number from 0 to" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["evidence", "gate", "--head", "a" * 40, "--base", "b" * 40, "--pr", "-5"],
        ["evidence", "record", "--variant", "cuda", "--arch", "linux/amd64", "--report-dir", ".", "--out", ".",
         "--commit", "a" * 40, "--pr", "-1"],
        ["evidence", "gate", "--head", "a" * 40, "--base", "b" * 40, "--pr", "\u00b2"],
    ],
)  # fmt: skip
def test_a_pr_number_is_positive(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert "argument --pr: " in capsys.readouterr().err


# -- text encodings ------------------------------------------------------------------------------------


def test_a_lone_surrogate_in_an_api_answer_writes_no_empty_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_json = tmp_path / "run.json"
    run_json.write_text(
        '{"id": 7, "path": ".github/workflows/nightly.yml", "status": "completed", '
        '"conclusion": "failure", "run_attempt": 1, "name": "\\ud800", '
        '"head_branch": "main\\udfff"}'
    )
    summary = tmp_path / "summary.md"
    argv = ["rerun-decision", "guard", "--run", str(run_json), "--summary", str(summary)]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err).startswith(f"twinbuild: {run_json}: ")
    assert "surrogate" in err
    assert not summary.exists()


def test_an_argument_that_is_not_utf8(root: Path) -> None:
    before = (root / M).read_bytes()
    argv = [b"pins", b"bump", b"numba", b"--version", b"0.65.2", b"--why", b"caf\xe9 fix"]
    code, err = child(argv, cwd=root)
    assert code == 2
    assert one_line(err) == (
        "twinbuild: --why: 'caf\\udce9 fix' is not UTF-8 (byte 0xe9); pass UTF-8 text"
    )
    assert (root / M).read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["lint", "--manifest", "pins/manifest.toml\n"], "--manifest"),
        (["pins", "diff", "HEAD\n"], "REV_A"),
        (["evidence", "inputs", "--head=" + "a" * 40 + "\n"], "--head"),
    ],
)
def test_a_trailing_newline_in_an_argument_is_one_line(
    root: Path, argv: list[str], option: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(root)
    code, _, err = run(argv, capsys)
    assert code == 2
    value = argv[-1].removeprefix("--head=")
    assert one_line(err) == (
        f"twinbuild: {option}: {value!r} holds a control character ('\\n'); pass it without "
        "(a newline from $(...) or a file?)"
    )


def test_an_environment_variable_that_is_not_utf8(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    env = {**_trigger_env(tmp_path, GITHUB_REPOSITORY_ID="7"), "GITHUB_OUTPUT": str(out)}
    env_bytes = {k: v for k, v in env.items() if k != "GITHUB_REPOSITORY"}
    code, err = child(
        ["evidence", "trigger", "--github-output"],
        cwd=tmp_path,
        env=env_bytes,
        prelude="import os; os.environb[b'GITHUB_REPOSITORY'] = b'o/r\\xff'",
    )
    assert code == 2
    assert one_line(err) == (
        "twinbuild: $GITHUB_REPOSITORY: 'o/r\\udcff' is not UTF-8 (byte 0xff); set it to UTF-8 text"
    )
    assert not out.exists()


@needs_git
def test_pins_diff_of_a_latin1_manifest_names_the_revision(
    mini_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = mini_repo / M
    manifest.write_bytes(manifest.read_bytes() + b"# caf\xe9\n")
    commit_all(mini_repo, "latin-1 comment")
    manifest.write_bytes(manifest.read_bytes().replace(b"caf\xe9", b"cafe"))
    monkeypatch.chdir(mini_repo)
    code, _, err = run(["pins", "diff"], capsys)
    lines = manifest.read_text().count("\n")
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: HEAD:pins/manifest.toml:{lines}: not UTF-8 (byte 0xe9); save the manifest "
        "as UTF-8"
    )


@needs_git
def test_bump_upstream_with_a_subject_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    upstream = init(tmp_path / "upstream")
    first = commit_file(upstream, "a.txt", "a\n", "first")
    tree = git(upstream, "rev-parse", "HEAD^{tree}")
    raw = (  # a commit whose subject is Latin-1 bytes with no encoding header, as old ones are
        f"tree {tree}\nparent {first}\nauthor T <t@e> 1700000000 +0000\n"
        "committer T <t@e> 1700000000 +0000\n\n"
    ).encode() + b"caf\xe9 fix\n"
    made = subprocess.run(
        ["git", "-C", str(upstream), "hash-object", "-t", "commit", "-w", "--stdin"],
        input=raw, capture_output=True, check=True,
    )  # fmt: skip
    head = made.stdout.decode().strip()
    git(upstream, "update-ref", "refs/heads/main", head)
    root = mini_project(tmp_path)
    argv = ["pins", "bump", "torch_memory_saver", "--commit", head, "--why", "caf fix",
            "--upstream", str(upstream), "--manifest", str(root / M)]  # fmt: skip
    code, out, err = run(argv, capsys)
    assert (code, err) == (0, "")
    assert "(caf\ufffd fix)" in out


@pytest.mark.parametrize("separator", ["\u0085", "\u2028", "\u2029"])
def test_line_numbers_count_toml_lines_only(
    root: Path, separator: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """str.splitlines() also breaks at U+0085, U+2028, ...: every later line number moved."""
    edit(root / M, "# A small manifest", f"# A small{separator} manifest")
    edit(root / M, 'version = "0.4.2"', 'version = "0.4.2.x"')
    expected = (root / M).read_text().split("\n").index('version = "0.4.2.x"') + 1
    code, out, _ = run(["lint", "--root", str(root)], capsys)
    assert code == 1
    assert f"{root / M}:{expected}: " in out


# -- keys and paths ------------------------------------------------------------------------------------


def _sm2(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl to make an SM2 key")
    private, public = tmp_path / "sm2.pem", tmp_path / "keys" / "sm2.pub"
    public.parent.mkdir(parents=True)
    made = subprocess.run(["openssl", "genpkey", "-algorithm", "SM2", "-out", str(private)],
                          capture_output=True, check=False)  # fmt: skip
    if made.returncode != 0:
        pytest.skip("this openssl cannot make SM2 keys")
    subprocess.run(["openssl", "pkey", "-in", str(private), "-pubout", "-out", str(public)],
                   capture_output=True, check=True)  # fmt: skip
    return private, public


def test_an_sm2_public_key_is_not_ed25519(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, public = _sm2(tmp_path)
    (tmp_path / "x.dsse.json").write_text("{}")
    code, _, err = run(["evidence", "verify", str(tmp_path), "--keys", str(public.parent)], capsys)
    assert code == 2
    assert one_line(err).startswith(f"twinbuild: {public}: not an ed25519 key")


def test_an_sm2_private_key_is_not_ed25519(
    mini_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, _ = _sm2(tmp_path / "outside")
    from twinbuild.errors import ConfigError
    from twinbuild.evidence.keys import load_private

    with pytest.raises(ConfigError) as refused:
        load_private(env={}, path=private)
    assert str(refused.value).startswith(f"{private}: not an ed25519 key")


def test_a_looping_private_key_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.pem"
    loop.symlink_to(loop)
    argv = ["evidence", "keygen", "--private", str(loop), "--public", str(tmp_path / "k.pub")]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: --private: {loop}: a symlink loop (too many levels of symbolic links); "
        "pass a path that leads to a file"
    )


def test_a_looping_signing_key_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from twinbuild.errors import ConfigError
    from twinbuild.evidence.keys import load_private

    loop = tmp_path / "loop.pem"
    loop.symlink_to(loop)
    with pytest.raises(ConfigError) as refused:
        load_private(env={}, path=loop)
    assert str(refused.value) == (
        f"--key: {loop}: a symlink loop (too many levels of symbolic links); pass a path that "
        "leads to a file"
    )


def _no_override() -> list[str]:
    """setpriv dropping root's permission override, so mode bits count as for anyone else."""
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv")
    caps = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


def test_an_unsearchable_pins_folder(root: Path) -> None:
    (root / "pins").chmod(0)
    try:
        code, err = child(["lint"], cwd=root, wrap=_no_override())
    finally:
        (root / "pins").chmod(0o755)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: {root / M}: cannot be looked at (permission denied); check the permissions "
        f"of {root / 'pins'}, or pass --root DIR (or --manifest PATH)"
    )


def test_a_folder_where_the_manifest_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / M).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["lint"], capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: {tmp_path / M}: is a directory, not the manifest; remove it or pass "
        "--manifest PATH"
    )


def test_smoke_report_dir_that_is_a_device(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["smoke", "--host", "--root", str(root), "--report-dir", os.devnull]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err) == (f"twinbuild: {os.devnull}: not a folder; pass a folder to write into")


# -- signals ---------------------------------------------------------------------------------------


def _signal_in_fsync(sig: signal.Signals, nth: int = 1) -> str:
    """A prelude that sends ``sig`` to the child itself in its ``nth`` fsync: mid-write."""
    return (
        "import os, signal\n"
        "_fsync, _n = os.fsync, [0]\n"
        "def _mid_write(fd):\n"
        "    _n[0] += 1\n"
        f"    if _n[0] == {nth}:\n"
        f"        os.kill(os.getpid(), signal.{sig.name})\n"
        "    return _fsync(fd)\n"
        "os.fsync = _mid_write\n"
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_bump_exits_130_and_leaves_no_temp_file(
    root: Path, sig: signal.Signals
) -> None:
    before = (root / M).read_bytes()
    code, err = child(["pins", "bump", "numba", "--version", "0.65.2", "--why", "fix"], cwd=root,
                      prelude=_signal_in_fsync(sig))  # fmt: skip
    assert code == 130
    assert one_line(err) == f"twinbuild: stopped by {sig.name}; nothing half-done was kept"
    assert (root / M).read_bytes() == before
    assert sorted(p.name for p in (root / "pins").iterdir()) == ["manifest.toml"]


def test_keygen_interrupted_between_its_keys_keeps_neither(tmp_path: Path) -> None:
    private, public = tmp_path / "keys" / "ev.pem", tmp_path / "keys" / "ev.pub"
    private.parent.mkdir()
    argv = ["evidence", "keygen", "--private", str(private), "--public", str(public)]
    # the 2nd fsync is the public key's temporary file: the private one is written, not linked
    code, err = child(argv, cwd=tmp_path, prelude=_signal_in_fsync(signal.SIGINT, nth=2))
    assert code == 130, err
    assert sorted(p.name for p in private.parent.iterdir()) == []
    code, err = child(argv, cwd=tmp_path)
    assert (code, err) == (0, "")
    assert private.is_file()
    assert public.is_file()


# -- writes outside the repository, late and missing checks ----------------------------------------


def test_bake_out_outside_the_repository(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bake", "--root", str(root), "--out", "../x.json"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: --out ../x.json: resolves to {root.parent / 'x.json'}, outside the "
        f"repository {root}; pass a path inside it"
    )
    assert not (root.parent / "x.json").exists()
    assert not (root / ".twinbuild").exists()


@pytest.mark.parametrize("named", [M, "images/cuda/Dockerfile", "README.md"])
def test_bake_out_naming_a_file_that_is_no_bake_file(
    root: Path, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the CLI fuzz suite's deep mode: ``bake --out=pins/manifest.toml`` replaced the
    manifest with the bake file (exit 0)."""
    target = root / named
    if not target.exists():
        target.write_text("# a file of the repository\n")
    before = target.read_bytes()
    code, _, err = run(["bake", "--root", str(root), "--out", named], capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: --out {named}: {target} exists and is not a bake file; nothing was "
        "written; pass a new path (or the bake file twinbuild wrote before)"
    )
    assert target.read_bytes() == before
    assert not (root / ".twinbuild").exists()


def test_bake_out_replaces_its_own_bake_file(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        code, _, _ = run(["bake", "--root", str(root), "--out", "x.json"], capsys)
        assert code == 0
    assert "target" in json.loads((root / "x.json").read_text())


def test_render_mirror_of_no_pin(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["render", "cuda", "--manifest", str(root / M), "--mirror", "nosuchpin=/tmp"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err) == (
        "twinbuild: --mirror nosuchpin=/tmp: no git pin named 'nosuchpin' in "
        f"{root / M}; git pins: megatron-bridge, megatron-lm, torch_memory_saver"
    )


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--repository", "Registry.example/X/Y"],
            "--repository 'Registry.example/X/Y': not an image repository",
        ),
        (
            ["--source", "https://user:pw@github.com/o/r"],
            "--source 'https://user:pw@github.com/o/r'",
        ),
        (["--source", "https://github.com/o/r\n"], "--source: 'https://github.com/o/r\\n' holds"),
    ],
)
def test_bake_checks_repository_and_source_before_writing(
    root: Path, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["bake", "--root", str(root), *argv], capsys)
    assert code == 2
    assert one_line(err).startswith(f"twinbuild: {says}")
    assert not (root / "docker-bake.json").exists()
    assert not (root / ".twinbuild").exists()


def test_bake_out_in_a_missing_folder(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["bake", "--root", str(root), "--out", "nope/bake.json"], capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: {root / 'nope/bake.json'}: folder {root / 'nope'} does not exist; nothing "
        "was written; create it or pass a path in an existing folder"
    )
    assert not (root / "nope").exists()


def test_import_out_naming_its_own_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cuda, rocm = tmp_path / "cuda.Dockerfile", tmp_path / "rocm.Dockerfile"
    cuda.write_text("FROM debian:12\nRUN pip install numpy==1.26.4\n")
    rocm.write_text("FROM debian:12\nRUN pip install numpy==1.26.3\n")
    before = rocm.read_text()
    argv = ["import", str(cuda), str(rocm), "--out", str(rocm), "--force"]
    code, _, err = run(argv, capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: --out {rocm}: is the ROCm recipe this import reads; pass another path "
        "for the draft"
    )
    assert rocm.read_text() == before


# -- unclear messages ----------------------------------------------------------------------------------


def test_a_key_that_is_a_folder_says_key_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keys" / "a.pub").mkdir(parents=True)
    (tmp_path / "x.dsse.json").write_text("{}")
    keys = tmp_path / "keys"
    code, _, err = run(["evidence", "verify", str(tmp_path / "x.dsse.json"), "--keys", str(keys)],
                       capsys)  # fmt: skip
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: {keys / 'a.pub'}: is a directory, not a regular file; pass the key file itself"
    )


def test_the_event_payload_is_called_that(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, v in _trigger_env(tmp_path, GITHUB_REPOSITORY_ID="7").items():
        monkeypatch.setenv(name, v)
    monkeypatch.setenv("GITHUB_EVENT_PATH", os.devnull)
    code, _, err = run(["evidence", "trigger"], capsys)
    assert code == 2
    assert one_line(err) == (
        f"twinbuild: $GITHUB_EVENT_PATH {os.devnull}: is a character device, not a regular "
        "file; pass the GitHub event payload file itself"
    )


def test_keys_folder_named_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "trusted"
    keys.mkdir()
    evidence = tmp_path / "x.dsse.json"
    evidence.write_text(json.dumps({"payload": "e30=", "payloadType": "application/vnd.in-toto+json",
                                    "signatures": [{"keyid": "a" * 64, "sig": "AA=="}]}))  # fmt: skip
    code, _, err = run(["evidence", "verify", str(evidence), "--keys", str(keys)], capsys)
    assert code != 0
    assert "evidence/keys" not in err
    assert str(keys) in err


def test_a_huge_number_in_the_manifest_gives_no_python_advice(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(root / M, "schema = 2", "schema = " + "1" * 5000)
    code, _, err = run(["lint", "--root", str(root)], capsys)
    assert code == 2
    assert "set_int_max_str_digits" not in err
    assert one_line(err).startswith(f"twinbuild: {root / M}:")
    assert "a number with over 4300 digits" in err
