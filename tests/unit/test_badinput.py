"""Issue 16's fuzz findings, one test each: the exact line and exit code, and nothing lost.

Every case here once crashed (a traceback, exit 1), hung, lost or corrupted a file, exited with
the wrong code or said something unclear. Cases that used to hang run the real command in a
child process with a timeout, so a regression fails instead of stalling the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import edit, mini_project
from twinbuild.cli.main import main

M = "pins/manifest.toml"
HANG_TIMEOUT_S = 60


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def child(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``python -m twinbuild ARGV`` in a child process: (exit code, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-m", "twinbuild", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), **(env or {})},
        capture_output=True,
        text=True,
        timeout=HANG_TIMEOUT_S,
        check=False,
    )
    return proc.returncode, proc.stderr


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return mini_project(tmp_path)


# -- crashes ---------------------------------------------------------------------------------------


def test_manifest_nested_thousands_deep(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / M).write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {root / M}: tables or arrays nested more than 16 deep; a manifest nests a "
        "few levels (pins.NAME.VARIANT.KEY), fix the file\n"
    )


def test_manifest_integer_past_64_bits(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / M).write_text("[pins.x]\nsize = " + "9" * 30 + "\n")
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {root / M}: the integer at 'pins.x.size' does not fit in 64 bits "
        "(over 9223372036854775807); a manifest holds no such number\n"
    )


def test_workflow_nested_thousands_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wf = tmp_path / "deep.yml"
    wf.write_text("on: " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = run(["workflows", "check", str(wf)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {wf}: nested too deeply to read (a workflow needs at most 32 levels); "
        "is this the right file?\n"
    )


def test_binary_workflow_in_the_folder(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = root / ".github" / "workflows"
    folder.mkdir(parents=True)
    (folder / "bin.yml").write_bytes(b"on: push\n\xb4\x00\x9f")
    code, _, err = run(["workflows", "check", str(folder)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {folder / 'bin.yml'}:2: not UTF-8 (byte 0xb4); save the workflow as UTF-8\n"
    )


def _guard_run(tmp_path: Path) -> Path:
    run_json = tmp_path / "run.json"
    run_json.write_text(
        '{"id": 7, "path": ".github/workflows/nightly.yml", "status": "completed", '
        '"conclusion": "failure", "run_attempt": 1}'
    )
    return run_json


def test_summary_naming_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["rerun-decision", "guard", "--run", str(_guard_run(tmp_path)), "--summary"]
    code, _, err = run([*argv, str(tmp_path)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {tmp_path}: is a directory, not a regular file; pass a file for the "
        "step summary\n"
    )


def test_summary_in_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["rerun-decision", "guard", "--run", str(_guard_run(tmp_path)), "--summary"]
    target = tmp_path / "nope" / "summary.md"
    code, _, err = run([*argv, str(target)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {target}: folder {tmp_path / 'nope'} does not exist; create it or pass a "
        "file in an existing folder for the step summary\n"
    )
    assert not (tmp_path / "nope").exists()


def test_github_output_naming_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = tmp_path / "jobs.json"
    jobs.write_text('{"jobs": [{"name": "cuda", "status": "completed", "conclusion": "success"}]}')
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path))
    argv = ["rerun-decision", "report", "--attempt", "1", "--current", str(jobs)]
    code, _, err = run([*argv, "--github-output"], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {tmp_path}: is a directory, not a regular file; pass a file for the "
        "step outputs ($GITHUB_OUTPUT)\n"
    )


def _unshare_works(*options: str) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", *options, "true"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


needs_userns = pytest.mark.skipif(
    not _unshare_works("-Urm"),
    reason="needs unshare and unprivileged user namespaces (a private mount)",
)


@pytest.mark.skipif(
    not _unshare_works("--map-user=54321", "--map-group=54321"),
    reason="needs unshare --map-user (util-linux 2.38) and unprivileged user namespaces",
)
def test_home_unset_and_no_passwd_entry(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "TWINBUILD_CACHE")}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    unmapped = ["unshare", "--map-user=54321", "--map-group=54321"]  # a uid with no passwd entry
    proc = subprocess.run(
        [*unmapped, sys.executable, "-m", "twinbuild", "engine", "status"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "twinbuild: no cache folder: $HOME is unset and user id 54321 has no passwd entry; "
        "set TWINBUILD_CACHE=/path/to/cache (or HOME)\n"
    )


def _bake_in_a_small_fs(root: Path, setup: str) -> subprocess.CompletedProcess[str]:
    """Bake the project on a 1 MiB tmpfs of its own (private mount namespace), after ``setup``."""
    mnt = root.parent / "mnt"
    mnt.mkdir()
    script = (
        f"mount -t tmpfs -o size=1m tmpfs {mnt} && cp -r {root}/. {mnt}/ && {setup} && "
        f"{sys.executable} -m twinbuild bake --root {mnt} --manifest {mnt}/{M}; "
        f"echo rc=$?; find {mnt} -path '*/.twinbuild*' | sort"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script],
        env=env, capture_output=True, text=True, timeout=HANG_TIMEOUT_S, check=False,
    )  # fmt: skip


@needs_userns
def test_bake_on_a_full_disk_keeps_nothing_half_copied(root: Path) -> None:
    mnt = root.parent / "mnt"
    fill = f"(dd if=/dev/zero of={mnt}/fill bs=4k 2>/dev/null; true)"
    proc = _bake_in_a_small_fs(root, fill)
    assert proc.stdout == f"rc=6\n{mnt}/.twinbuild\n{mnt}/.twinbuild/bake\n", proc.stderr
    assert proc.stderr == (
        f"twinbuild: {mnt}/.twinbuild/bake: disk full while staging the bake contexts; "
        "nothing was kept, free space, re-run\n"
    )


@needs_userns
def test_bake_in_a_read_only_tree(root: Path) -> None:
    mnt = root.parent / "mnt"
    proc = _bake_in_a_small_fs(root, f"mount -o remount,ro {mnt}")
    assert proc.stdout == "rc=2\n", proc.stderr
    assert proc.stderr == (
        f"twinbuild: {mnt}/.twinbuild: cannot stage the bake contexts: Read-only file system; "
        "nothing was kept; run bake where the repository is writable\n"
    )


# -- hangs -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_manifest_linked_to_an_endless_device(root: Path, device: str) -> None:
    link = root / "linked.toml"
    link.symlink_to(device)
    code, err = child(["lint", "--manifest", str(link)], cwd=root)
    assert code == 2
    assert err == (
        f"twinbuild: {link}: is a link to {device}, a character device, not a regular file; "
        "pass the manifest file itself\n"
    )


def test_manifest_that_is_a_fifo(root: Path) -> None:
    fifo = root / "fifo.toml"
    os.mkfifo(fifo)
    code, err = child(["lint", "--manifest", str(fifo)], cwd=root)
    assert code == 2
    assert err == (
        f"twinbuild: {fifo}: is a FIFO (named pipe), not a regular file; "
        "pass the manifest file itself\n"
    )


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["import", "/dev/zero", "/dev/zero", "--out", "draft.toml"], "recipe"),
        (["workflows", "check", "/dev/zero"], "workflow"),
        (
            ["rerun-decision", "report", "--attempt", "1", "--current", "/dev/zero"],
            "GitHub API answer",
        ),
    ],
)
def test_dev_zero_as_any_input(tmp_path: Path, argv: list[str], what: str) -> None:
    code, err = child(argv, cwd=tmp_path)
    assert code == 2
    assert err == (
        f"twinbuild: /dev/zero: is a character device, not a regular file; pass the {what} "
        "file itself\n"
    )
    assert list(tmp_path.iterdir()) == []


# -- data lost or corrupted ----------------------------------------------------------------------


def test_keygen_never_overwrites_a_file_that_is_not_our_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# the project\n")
    private = tmp_path.parent / f"{tmp_path.name}-key.pem"  # outside any work tree
    code, _, err = run(
        ["evidence", "keygen", "--private", str(private), "--public", str(readme)], capsys
    )
    assert code == 2
    assert err == (
        f"twinbuild: {readme}: exists and is not an ed25519 public key; keygen replaces only a "
        "public key it wrote: pass a new path, e.g. evidence/keys/NAME.pub\n"
    )
    assert readme.read_text() == "# the project\n"
    assert not private.exists()


def test_keygen_refuses_one_path_for_both_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "key"
    code, _, err = run(
        ["evidence", "keygen", "--private", str(both), "--public", str(both)], capsys
    )
    assert code == 2
    assert err == (
        f"twinbuild: --private and --public are the same file ({both}); the public key would "
        "overwrite the private one: pass two different paths\n"
    )
    assert not both.exists()


def test_keygen_may_replace_its_own_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, public = tmp_path / "a.pem", tmp_path / "b.pem", tmp_path / "k.pub"
    assert main(["evidence", "keygen", "--private", str(first), "--public", str(public)]) == 0
    old = public.read_text()
    assert main(["evidence", "keygen", "--private", str(second), "--public", str(public)]) == 0
    assert public.read_text() != old
    assert "BEGIN PUBLIC KEY" in public.read_text()


def test_pins_bump_through_a_symlinked_manifest_edits_the_real_one(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = root / M
    link = root / "linked.toml"
    link.symlink_to(real)
    argv = ["pins", "bump", "numba", "--version", "0.66.0", "--why", "numba 0.66 for numpy 2"]
    code, _, _ = run([*argv, "--manifest", str(link)], capsys)
    assert code == 0
    assert link.is_symlink()
    assert link.readlink() == real
    assert 'version = "0.66.0"' in real.read_text()
    assert sorted(p.name for p in (root / "pins").iterdir()) == ["manifest.toml"]


@pytest.mark.parametrize("layer", ["../../../../tmp/x", "a/b", "..", "Late"])
def test_layer_that_is_a_path(root: Path, layer: str, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root / M, 'layer = "late"', f'layer = "{layer}"')
    for command in ("lint", "bake"):
        code, _, err = run([command, "--root", str(root), "--manifest", str(root / M)], capsys)
        assert code == 2
        assert err == (
            f"twinbuild: {root / M}:33: pins.torch_memory_saver.layer: {layer!r} is not a layer "
            "name (lower-case letters, digits, '-' and '_'; no '/' or '..'); "
            'e.g. layer = "late"\n'
        )
    assert sorted(p.name for p in root.iterdir()) == ["images", "pins"]


# -- wrong exit codes ----------------------------------------------------------------------------


def test_literal_pin_on_a_continued_last_line(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = root / "images" / "cuda" / "Dockerfile"
    lines = recipe.read_text().count("\n")
    recipe.write_text(recipe.read_text() + "RUN pip install foo==1.0 \\")
    code, out, _ = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 1
    assert out.splitlines()[0] == (
        f"images/cuda/Dockerfile:{lines + 1}: TB101 literal pin 'foo==1.0' (pip); move it into "
        "pins/ and read it from a build arg or .twinbuild/pip/<layer>.txt"
    )


def test_import_keeps_a_pin_on_a_continued_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipes = Path(__file__).parents[1] / "fixtures" / "recipes"
    for name in ("cuda.Dockerfile", "rocm.Dockerfile"):
        text = (recipes / name).read_text()
        (tmp_path / name).write_text(text + "RUN pip install foo-lib==1.0 \\")
    draft = tmp_path / "draft.toml"
    argv = ["import", str(tmp_path / "cuda.Dockerfile"), str(tmp_path / "rocm.Dockerfile")]
    code, _, _ = run([*argv, "--out", str(draft)], capsys)
    assert code == 0
    cuda_line = (recipes / "cuda.Dockerfile").read_text().count("\n") + 1
    rocm_line = (recipes / "rocm.Dockerfile").read_text().count("\n") + 1
    assert (
        f"[pins.foo-lib]\n# from {tmp_path}/cuda.Dockerfile:{cuda_line}, "
        f"{tmp_path}/rocm.Dockerfile:{rocm_line}\n"
        'kind = "pypi"\nversion = "1.0"\n'
    ) in draft.read_text()


def test_control_character_before_an_instruction(tmp_path: Path) -> None:
    # found by TWINBUILD_FUZZ=deep: dockerfile-parse sees ARG, str.split sees only blanks
    from twinbuild.errors import ConfigError
    from twinbuild.recipe.scan import parse

    recipe = tmp_path / "Dockerfile"
    recipe.write_bytes(b"\x1eARG BASE\nFROM ${BASE}\n")
    with pytest.raises(ConfigError) as err:
        parse(recipe)
    assert str(err.value) == (
        f"{recipe}:1: does not parse: a control character around the instruction's keyword; "
        "retype the line"
    )


@pytest.mark.parametrize("reason", ["n/a", "none", "-", "...", "TODO later", "numba", "N/A"])
def test_placeholder_reasons(root: Path, reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    edit(
        root / M,
        'asymmetry = "the ROCm base ships an older numba that breaks with numpy<2"',
        f'asymmetry = "{reason}"',
    )
    code, out, _ = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 1
    assert out.splitlines()[0] == (
        f"{root / M}:52: TB007 pins.numba.asymmetry: '{reason}' is a placeholder; "
        "write the real reason"
    )


@pytest.mark.parametrize("tag", ["v0.5.6 cu129", "v0.5.6|cu129", "v0.5.6\\ncu129"])
def test_base_tag_with_spaces_or_a_pipe(
    root: Path, tag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(root / M, 'tag = "v0.5.6-cu129"', f'tag = "{tag}"')
    code, _, err = run(["pins", "table", "--manifest", str(root / M)], capsys)
    assert code == 2
    shown = repr(tag.replace("\\n", "\n"))  # a newline shows escaped, the message stays one line
    assert err == (
        f"twinbuild: {root / M}:8: variants.cuda.base.tag: {shown} is not a Docker tag "
        "(letters, digits, '_', '.', '-'; no spaces or '|'); e.g. 'v0.5.6-cu129'\n"
    )


def test_guard_on_an_empty_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "run.json"
    empty.write_text("{}")
    code, out, err = run(["rerun-decision", "guard", "--run", str(empty)], capsys)
    assert code == 2
    assert out == ""
    assert err == (
        f"twinbuild: {empty}: not a GitHub workflow run object (no 'id', 'path', 'status'); "
        "save the runs API answer: gh api repos/OWNER/REPO/actions/runs/RUN_ID > FILE\n"
    )


# -- unclear messages ----------------------------------------------------------------------------


def test_byte_order_mark_is_named(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / M).write_bytes(b"\xef\xbb\xbf" + (root / M).read_bytes())
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {root / M}:1: starts with a UTF-8 byte order mark (BOM, bytes ef bb bf); "
        "save the manifest as UTF-8 without BOM\n"
    )


def test_upper_case_hex_is_called_that(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sha = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"
    edit(root / M, sha, sha.upper())
    code, out, _ = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 1
    assert out.splitlines()[0] == (
        f"{root / M}:32: TB004 pins.torch_memory_saver.commit: '{sha.upper()}' has upper-case "
        f"hex; git names commits in lower case: write '{sha}'"
    )


def test_look_alike_letter_in_a_quoted_pin_name(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(root / M, "[pins.numba]", '[pins."numb\u0430"]')
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {root / M}:48: pins.numb\u0430: '\u0430' (U+0430 CYRILLIC SMALL LETTER A) is "
        "not ASCII (a look-alike letter?); pin names are lower-case ASCII letters, digits, "
        "'-' and '_'\n"
    )


def test_look_alike_letter_in_a_bare_pin_name(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(root / M, "[pins.numba]", "[pins.numb\u0430]")
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {root / M}:48:11: invalid TOML: Expected ']' at the end of a table "
        "declaration; '\u0430' (U+0430 CYRILLIC SMALL LETTER A) is not ASCII, bare keys are "
        "ASCII letters, digits, '-' and '_'\n"
    )


def test_a_missing_table_has_no_line_zero(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (root / M).read_text()
    start = text.index("[variants.cuda]")
    (root / M).write_text(text[:start] + text[text.index("[local]") :])
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err.splitlines()[0] == (
        f"twinbuild: {root / M}: variants: missing; declare each image as [variants.NAME] "
        "(docs/manifest.md)"
    )


def test_one_line_per_missing_key(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (root / M).read_text()
    base = text[text.index("base = {") : text.index("\n", text.index("base = {")) + 1]
    text = text.replace(base, "", 1).replace(
        'kind = "pypi"\nversion = "0.4.2"', 'version = "0.4.2"'
    )
    (root / M).write_text(text)
    code, _, err = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: {root / M}:4: variants.cuda.base: missing; set base = "
        "{ repository = ..., tag = ..., digest = ... }\n"
        f"twinbuild: {root / M}:42: pins.flash-linear-attention.kind: missing; set kind to one "
        "of pypi, git, url, apt\n"
    )


def test_a_newline_in_a_value_cannot_forge_an_annotation(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    edit(root / M, 'version = "0.4.2"', 'version = "0.4.2\\n::error file=x::forged %0A"')
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, _ = run(["lint", "--root", str(root), "--manifest", str(root / M)], capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[:2] == [
        f"{root / M}:45: TB006 pins.flash-linear-attention.version: '0.4.2\\n::error "
        "file=x::forged %0A' is not a PEP 440 version",
        f"::error file={root / M},line=45,title=TB006::pins.flash-linear-attention.version: "
        "'0.4.2%0A::error file=x::forged %250A' is not a PEP 440 version",
    ]
    assert not any(line.startswith("::error file=x") for line in lines)


def test_pins_diff_outside_a_git_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["pins", "diff", "HEAD~1", "HEAD", "--root", str(tmp_path)], capsys)
    assert code == 2
    assert err == (
        f"twinbuild: pins diff: {tmp_path} is not in a git repository; run it in a clone of the "
        "repository or pass --root PATH to one\n"
    )


def test_the_exit_code_table_lists_every_error_class() -> None:
    import inspect

    from twinbuild import errors

    classes = {
        (cls.exit_code, name)
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.TwinbuildError) and cls is not errors.TwinbuildError
    }
    table = (Path(__file__).parents[2] / "docs" / "errors.md").read_text()
    rows = {
        (int(cells[1]), cells[2].strip("`"))
        for line in table.splitlines()
        if line.startswith("| ")
        and (cells := [c.strip() for c in line.split("|")])[1].isdigit()
        and cells[2]
    }
    assert rows == classes
