"""The base image decisions with the shared fake engine and a fake command runner: no mmdebstrap
runs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fake_engine import FakeEngine
from tests.helpers import unscrubbed
from twinbuild.engine import base, binfmt
from twinbuild.engine.base import BaseInputs
from twinbuild.engine.host import run_command
from twinbuild.errors import BuildFailed, ConfigError, EngineError
from twinbuild.manifest.model import Arch
from twinbuild.util.process import ROOT_ENVIRONMENT

SUITE = "bookworm"
MIRROR = "http://debian-mirror.invalid/debian"
PACKAGES = ["python3", "python3-venv", "python3-pip", "git", "ca-certificates"]
INPUTS = BaseInputs(
    suite=SUITE,
    mirror=MIRROR,
    packages=tuple(PACKAGES),
    mmdebstrap_version="1.3.5",
    arch="linux/amd64",
)


@dataclass
class FakeRunner:
    """Answers dpkg queries; 'mmdebstrap' makes a tiny tree, 'tar' writes a marker file."""

    calls: list[list[str]] = field(default_factory=list)
    results: dict[str, tuple[int, str]] = field(default_factory=dict)

    envs: list[dict[str, str] | None] = field(default_factory=list)

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        env, argv = unscrubbed(argv)
        self.calls.append(argv)
        self.envs.append(env)
        if argv[0] in self.results:
            return self.results[argv[0]]
        if argv[0] == "dpkg-query":
            return 0, "1.3.5"
        if argv[0] == "dpkg":
            return 0, "amd64\n"
        if argv[0] == "mmdebstrap":
            # mmdebstrap [--options] SUITE TARGET [MIRROR]; an option taken for the target once
            # made a folder named "--include=..." in the checkout (removed, with this fence and
            # check)
            _suite, target, *_mirror = [a for a in argv[1:] if not a.startswith("--")]
            assert len(_mirror) <= 1, argv
            rootfs = Path(target)
            assert rootfs.is_absolute(), argv
            assert rootfs.name == "rootfs", argv
            (rootfs / "var/cache/apt/archives").mkdir(parents=True)
            (rootfs / "var/cache/apt/archives/git_1_amd64.deb").write_text("deb")
            (rootfs / "etc").mkdir()
            (rootfs / "etc/debian_version").write_text("12\n")
            return 0, "I: Base system installed successfully.\n"
        if argv[0] == "tar":
            Path(argv[argv.index("-cf") + 1]).write_bytes(b"TAR")
            return 0, ""
        return 0, ""

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


def _which(name: str) -> str | None:
    return f"/usr/sbin/{name}"


def _ensure(engine: FakeEngine, run: FakeRunner, cache: Path, **kw: Any) -> base.BaseResult:
    args: dict[str, Any] = {
        "suite": SUITE,
        "mirror": MIRROR,
        "packages": PACKAGES,
        "arch": "linux/amd64",
    }
    args.update(kw)
    return base.ensure_base(engine, cache=cache, run=run, which=_which, **args)


def test_first_call_builds_then_second_reuses(tmp_path: Path) -> None:
    engine, run = FakeEngine(), FakeRunner()
    first = _ensure(engine, run, tmp_path)
    digest = INPUTS.digest()
    assert first.built is True
    assert first.tag == f"twinbuild/base:{digest[:12]}"
    assert first.inputs_hash == digest
    assert run.names() == ["dpkg-query", "mmdebstrap", "tar"]
    mmdebstrap = run.calls[1]
    assert mmdebstrap[:7] == [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        "--format=directory",
        "--architectures=amd64",
        "--keyring=/usr/share/keyrings/debian-archive-keyring.gpg",
        "--include=python3,python3-venv,python3-pip,git,ca-certificates",
    ]
    assert mmdebstrap[7:13] == [f"--dpkgopt={option}" for option in base.SLIM]
    assert (mmdebstrap[13], mmdebstrap[15]) == (SUITE, MIRROR)
    assert set(run.envs[1] or ()) <= {*ROOT_ENVIRONMENT, "DEBIAN_FRONTEND", "LC_ALL"}
    assert engine.imported == [
        (
            b"TAR",
            {"org.twinbuild.base-inputs": digest, "org.twinbuild.base-suite": SUITE},
            ["linux/amd64", "/bin/bash"],
        )
    ]
    assert engine.tagged == [(first.image_id, first.tag)]
    assert not (tmp_path / "base-tmp").exists()  # work dir removed, and its empty parent

    run.calls.clear()
    second = _ensure(engine, run, tmp_path)
    assert second.built is False
    assert (second.tag, second.image_id) == (first.tag, first.image_id)
    assert "mmdebstrap" not in run.names()
    assert len(engine.imported) == 1
    assert second.describe() == f"{first.tag} is up to date (sha256:000000000000, 1 MiB)"


def test_no_mirror_leaves_mmdebstrap_its_own_default(tmp_path: Path) -> None:
    """``[local].mirror`` is optional: without one, mmdebstrap is given none (it uses Debian's
    own, with the updates and security suites of a stable release), and the base's hash records
    that it had none, so a base from an explicit mirror is not taken for it."""
    engine, run = FakeEngine(), FakeRunner()
    made = _ensure(engine, run, tmp_path, mirror="")
    mmdebstrap = run.calls[1]
    assert mmdebstrap[13:] == [SUITE, mmdebstrap[14]]  # SUITE TARGET, no MIRROR
    assert made.inputs_hash != INPUTS.digest()
    assert made.inputs_hash == BaseInputs(**{**_fields(INPUTS), "mirror": ""}).digest()


def test_a_fresh_engine_imports_the_saved_root_filesystem(tmp_path: Path) -> None:
    first = _ensure(FakeEngine(), FakeRunner(), tmp_path)
    saved = base.saved_rootfs(tmp_path, first.inputs_hash)
    assert saved.read_bytes() == b"TAR"  # the tar mmdebstrap's tree became, kept
    engine, run = FakeEngine(), FakeRunner()  # a new data root: no base image in it
    again = _ensure(engine, run, tmp_path)
    assert "mmdebstrap" not in run.names()
    assert (again.built, again.saved, again.tag) == (True, str(saved), first.tag)
    assert engine.imported == [
        (
            b"TAR",
            {"org.twinbuild.base-inputs": first.inputs_hash, "org.twinbuild.base-suite": SUITE},
            ["linux/amd64", "/bin/bash"],
        )
    ]
    assert engine.tagged == [(again.image_id, again.tag)]
    assert again.describe().startswith(f"imported {again.tag} (sha256:")
    assert again.describe().endswith(f"from {saved} in 0s (no mmdebstrap)")


def test_slim_drops_downloaded_debs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real_tar = FakeRunner.__call__

    def spy(self: FakeRunner, argv: Sequence[str]) -> tuple[int, str]:
        if argv[0] == "tar":
            rootfs = Path(argv[argv.index("-C") + 1])
            seen.append((rootfs / "var/cache/apt/archives/git_1_amd64.deb").exists())
        return real_tar(self, argv)

    monkeypatch.setattr(FakeRunner, "__call__", spy)
    _ensure(FakeEngine(), FakeRunner(), tmp_path)
    assert seen == [False]


def test_labelled_untagged_image_is_tagged_not_rebuilt(tmp_path: Path) -> None:
    digest = INPUTS.digest()
    doc = {"Id": "sha256:9", "Size": 5, "Config": {"Labels": {base.INPUTS_LABEL: digest}}}
    engine, run = FakeEngine(images={"sha256:9": doc}), FakeRunner()
    result = _ensure(engine, run, tmp_path)
    assert (result.built, result.image_id) == (False, "sha256:9")
    assert engine.tagged == [("sha256:9", INPUTS.tag)]
    assert "mmdebstrap" not in run.names()


def test_tag_with_foreign_label_is_rebuilt(tmp_path: Path) -> None:
    doc = {"Id": "sha256:8", "Size": 5, "Config": {"Labels": {base.INPUTS_LABEL: "other"}}}
    engine, run = FakeEngine(images={INPUTS.tag: doc}), FakeRunner()
    result = _ensure(engine, run, tmp_path)
    assert result.built is True
    assert engine.images[INPUTS.tag]["Id"] != "sha256:8"


def test_mmdebstrap_failure_keeps_log_and_no_tag(tmp_path: Path) -> None:
    engine = FakeEngine()
    run = FakeRunner(
        results={"mmdebstrap": (1, "I: Retrieving InRelease\nE: Failed getting release file")}
    )
    with pytest.raises(BuildFailed) as info:
        _ensure(engine, run, tmp_path)
    assert str(info.value) == (
        f"mmdebstrap bookworm from {MIRROR} failed (exit 1): I: Retrieving InRelease | "
        f"E: Failed getting release file; full log: {tmp_path}/base-mmdebstrap.log"
    )
    assert (tmp_path / "base-mmdebstrap.log").read_text().startswith("I: Retrieving InRelease")
    assert engine.tagged == []
    assert not (tmp_path / "base-tmp").exists()


def test_import_failure_leaves_no_tag_and_no_work_dir(tmp_path: Path) -> None:
    engine = FakeEngine(import_error=EngineError("import x: no space left on device"))
    with pytest.raises(EngineError, match="no space left"):
        _ensure(engine, FakeRunner(), tmp_path)
    assert engine.tagged == []
    assert engine.images == {}
    assert not (tmp_path / "base-tmp").exists()


def test_tar_failure_message(tmp_path: Path) -> None:
    run = FakeRunner(results={"tar": (2, "tar: ./dev/console: Cannot open\n")})
    with pytest.raises(BuildFailed) as info:
        _ensure(FakeEngine(), run, tmp_path)
    assert str(info.value).startswith("tar ")
    assert str(info.value).endswith("failed (exit 2): tar: ./dev/console: Cannot open")


TOOLS = ["mmdebstrap", "debian-archive-keyring"]  # the keyring for hosts that are not Debian
INSTALL = ["apt-get", "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=600"]


def test_missing_mmdebstrap_is_installed_with_apt(tmp_path: Path) -> None:
    run = FakeRunner()
    base.ensure_base(
        FakeEngine(),
        suite=SUITE,
        mirror=MIRROR,
        packages=PACKAGES,
        arch="linux/amd64",
        cache=tmp_path,
        run=run,
        which=lambda name: None if name == "mmdebstrap" else f"/usr/bin/{name}",
    )
    assert run.calls[:2] == [
        ["apt-get", "update"],
        [*INSTALL, *TOOLS],
    ]


def test_an_emulated_base_installs_arch_test_before_mmdebstrap_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mmdebstrap refuses a foreign architecture without arch-test ("install arch-test for
    foreign architecture support", exit 25: seen on a fresh machine), a package it only
    recommends; the host's own architecture needs none."""
    monkeypatch.setattr(binfmt, "require", lambda arch: None)
    monkeypatch.setattr(binfmt, "emulated", lambda arch: arch == "linux/arm64")
    cases: list[tuple[Arch, list[list[str]]]] = [
        ("linux/amd64", []),
        ("linux/arm64", [[*INSTALL, "arch-test"]]),
    ]
    for arch, wanted in cases:
        run = FakeRunner()
        base.ensure_base(
            FakeEngine(), suite=SUITE, mirror=MIRROR, packages=PACKAGES, arch=arch,
            cache=tmp_path / arch[6:], run=run,
            which=lambda name: None if name == "arch-test" else f"/usr/bin/{name}",
        )  # fmt: skip
        installs = [c for c in run.calls if c[:2] == ["apt-get", "install"]]
        assert installs == wanted
        if wanted:
            assert run.calls.index(wanted[0]) < run.names().index("mmdebstrap")


def test_building_needs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_is_root", lambda: False)
    run = FakeRunner()
    with pytest.raises(BuildFailed) as info:
        _ensure(FakeEngine(), run, tmp_path)
    assert str(info.value) == "twinbuild base runs mmdebstrap, which needs root; rerun it as root"
    assert "mmdebstrap" not in run.names()


def test_reuse_does_not_need_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FakeEngine()
    _ensure(engine, FakeRunner(), tmp_path)
    monkeypatch.setattr(base, "_is_root", lambda: False)
    assert _ensure(engine, FakeRunner(), tmp_path).built is False


def test_inputs_hash_covers_every_input() -> None:
    variants = [
        INPUTS,
        BaseInputs(**{**_fields(INPUTS), "suite": "trixie"}),
        BaseInputs(**{**_fields(INPUTS), "mirror": "http://ftp.de.debian.org/debian"}),
        BaseInputs(**{**_fields(INPUTS), "packages": ("python3",)}),
        BaseInputs(**{**_fields(INPUTS), "mmdebstrap_version": "1.3.6"}),
        BaseInputs(**{**_fields(INPUTS), "arch": "linux/arm64"}),
    ]
    assert len({v.digest() for v in variants}) == len(variants)
    shuffled = BaseInputs(**{**_fields(INPUTS), "packages": tuple(reversed(PACKAGES))})
    assert shuffled.digest() == INPUTS.digest()
    slash = BaseInputs(**{**_fields(INPUTS), "mirror": MIRROR + "/"})
    assert slash.digest() == INPUTS.digest()


def _fields(inputs: BaseInputs) -> dict[str, Any]:
    return {
        "suite": inputs.suite,
        "mirror": inputs.mirror,
        "packages": inputs.packages,
        "mmdebstrap_version": inputs.mmdebstrap_version,
        "arch": inputs.arch,
    }


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (
            {"suite": "Bookworm;rm"},
            "local.suite: 'Bookworm;rm' is not a Debian suite name, e.g. 'bookworm'",
        ),
        (
            {"mirror": "ftp://x"},
            "local.mirror: 'ftp://x' is not an http(s) URL, e.g. 'http://<mirror host>/debian'; "
            "or leave it out for mmdebstrap's default",
        ),
        ({"packages": ["git", "--foo"]}, "local.packages[1]: '--foo' is not a Debian package name"),
    ],
)
def test_bad_inputs_are_config_errors(tmp_path: Path, kw: dict[str, Any], message: str) -> None:
    run = FakeRunner()
    with pytest.raises(ConfigError) as info:
        _ensure(FakeEngine(), run, tmp_path, **kw)
    assert str(info.value) == message
    assert run.calls == []


def test_remove_tree_unmounts_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "w"
    (work / "rootfs/proc").mkdir(parents=True)
    mounted = [f"{work}/rootfs/proc"]
    monkeypatch.setattr(base, "_mounts_under", lambda root: list(mounted))
    run = FakeRunner()

    def umount(argv: Sequence[str]) -> tuple[int, str]:
        run.calls.append(list(argv))
        mounted.clear()
        return 0, ""

    base._remove_tree(work, umount)
    assert run.calls == [["umount", "--lazy", f"{work}/rootfs/proc"]]
    assert not work.exists()


def test_remove_tree_refuses_while_mounted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "w"
    (work / "rootfs/sys").mkdir(parents=True)
    monkeypatch.setattr(base, "_mounts_under", lambda root: [f"{work}/rootfs/sys"])
    with pytest.raises(BuildFailed) as info:
        base._remove_tree(work, lambda argv: (32, "umount: busy"))
    assert str(info.value) == (
        f"{work}: still mounted after umount: {work}/rootfs/sys; unmount and rm"
    )
    assert work.exists()


def test_mounts_under_reads_mountinfo(tmp_path: Path) -> None:
    assert base._mounts_under(tmp_path) == []
    assert "/proc" in base._mounts_under(Path("/proc"))


def test_describe_built() -> None:
    result = base.BaseResult(
        tag="twinbuild/base:abc",
        image_id="sha256:0123456789abcdef",
        inputs_hash="abc",
        built=True,
        size=300 * 2**20,
        mmdebstrap_s=44.3,
        import_s=3.2,
    )
    assert result.describe() == (
        "built twinbuild/base:abc (sha256:0123456789ab, 300 MiB): mmdebstrap 44s, import 3s"
    )


def test_mmdebstrap_runs_without_the_callers_python_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mmdebstrap hands its environment to every maintainer script in the new root: a caller's
    PYTHONPYCACHEPREFIX (nox's test session sets one) put py3compile's bytecode for the base's
    own Python under that host folder inside the image (seen: /work/wt/mirror/.nox/... in a saved
    base), and PYTHONPATH or VIRTUAL_ENV would point the root's Python at host folders. The real
    runner, a stand-in mmdebstrap that writes down what it was given."""
    tools = tmp_path / "bin"
    tools.mkdir()
    seen = tmp_path / "environment"
    script = tools / "mmdebstrap"
    script.write_text(f"#!/bin/sh\nenv > {seen}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    leaks = {
        "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"),
        "PYTHONPATH": str(tmp_path / "site"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "VIRTUAL_ENV": str(tmp_path / "venv"),
        "PIP_INDEX_URL": "http://registry.example/simple",
        "GITHUB_TOKEN": "ghp_secret",
    }
    for name, value in leaks.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    base._bootstrap(INPUTS, tmp_path / "rootfs", tmp_path, run_command)
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert not set(leaks) & set(env), env
    # what apt in the new root needs from here: a PATH to find mmdebstrap's helpers, the proxy
    # that reaches the mirror, the C locale and no prompts
    assert env["PATH"].startswith(f"{tools}:")
    assert env["http_proxy"] == "http://proxy.example:3128"
    assert (env["LC_ALL"], env["DEBIAN_FRONTEND"]) == ("C", "noninteractive")
