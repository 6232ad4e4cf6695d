"""The production recipes build like upstream's where it bites: job counts from the builder, forced
source builds, Megatron-LM with its dependencies, the router binding with vendored OpenSSL,
rccl-tests without submodules, cargo on ROCm from a pinned rustup. The scripts run for real."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

from tests.helpers import repo_image
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import render

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = load(ROOT / "pins/manifest.toml")
JOBS = ROOT / "images/common/jobs.sh"
CHECKOUT = ROOT / "images/common/checkout.sh"
#: The switch each compiled extension's setup.py reads before it downloads a prebuilt wheel from
#: GitHub instead of compiling (read in each sdist's / pinned commit's setup.py).
FORCE_BUILD = {
    "flash-attn": "FLASH_ATTENTION_FORCE_BUILD",
    "flash-attn-3": "FLASH_ATTENTION_FORCE_BUILD",  # hopper/setup.py reads the same switch
    "fast-hadamard-transform": "FAST_HADAMARD_TRANSFORM_FORCE_BUILD",
    "causal-conv1d": "CAUSAL_CONV1D_FORCE_BUILD",
    "mamba-ssm": "MAMBA_FORCE_BUILD",
    "transformer-engine-torch": "NVTE_PYTORCH_FORCE_BUILD",
}


def _runs(platform: str) -> list[str]:
    recipe = (ROOT / f"images/{platform}/Dockerfile").read_bytes()
    structure = DockerfileParser(fileobj=io.BytesIO(recipe)).structure
    return [str(i["value"]) for i in structure if str(i["instruction"]).upper() == "RUN"]


def _run_with(platform: str, needle: str) -> str:
    found = [r for r in _runs(platform) if needle in r]
    assert len(found) == 1, f"{platform}: {len(found)} RUN steps hold {needle!r}"
    return found[0]


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_compile_steps_take_their_job_count_from_the_builder(platform: str) -> None:
    recipe = (ROOT / f"images/{platform}/Dockerfile").read_text(encoding="utf-8")
    assert "ENV MAX_JOBS" not in recipe  # a fixed count overrides flash-attn's own memory cap
    layers = ["kernels.txt", "te.txt"] + (["apex.txt"] if platform == "cuda" else [])
    for layer in layers:
        step = _run_with(platform, f"/tmp/tb/{layer}")
        assert 'MAX_JOBS="$(bash /tmp/tb/jobs.sh ' in step, layer
        assert "source=images/common/jobs.sh,target=/tmp/tb/jobs.sh" in step, layer


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_every_compiled_extension_is_forced_to_build_from_source(platform: str) -> None:
    """Each switch is a build arg the recipe declares (so every RUN step has it in its
    environment) and the manifest sets to TRUE: `render --profile production` lists it."""
    recipe = (ROOT / f"images/{platform}/Dockerfile").read_text(encoding="utf-8")
    args = render(MANIFEST, repo_image(platform), "production").args
    wanted = [p.name for p in MANIFEST.resolve(repo_image(platform)) if p.layer == "kernels"]
    if platform == "cuda":
        wanted.append("transformer-engine-torch")
    for name in wanted:
        assert name in FORCE_BUILD, f"{name}: which switch stops its wheel download?"
        switch = FORCE_BUILD[name]
        assert f"\nARG {switch}\n" in recipe, switch
        assert args[switch] == "TRUE", switch


def test_jobs_is_bounded_by_memory_and_cores() -> None:
    def jobs(gb: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(JOBS), gb], capture_output=True, text=True,
                              check=False)  # fmt: skip

    one = jobs("1")
    assert one.returncode == 0, one.stderr
    assert 1 <= int(one.stdout) <= (os.cpu_count() or 1)
    assert jobs("100000").stdout.strip() == "1"  # never zero jobs
    assert jobs("").returncode != 0


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_megatron_is_installed_with_its_dependencies_and_submodules(platform: str) -> None:
    step = _run_with(platform, "/root/Megatron-LM &&")
    assert 'checkout.sh --submodules="${MEGATRON_SUBMODULES}" "${MEGATRON_LM_REPO}"' in step
    with_deps = step.split('"${MEGATRON_INSTALL_DEPS}" = 1', 1)[1].split("else", 1)[0]
    assert (
        "pip install --no-cache-dir -c /opt/twinbuild/constraints.txt -e /root/Megatron-LM"
        in with_deps
    )
    args = render(MANIFEST, repo_image(platform), "production").args
    assert (args["MEGATRON_SUBMODULES"], args["MEGATRON_INSTALL_DEPS"]) == ("1", "1")


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_the_router_binding_is_built_with_vendored_openssl_by_the_pinned_maturin(
    platform: str,
) -> None:
    step = _run_with(platform, "/opt/sgl-router/bindings/python")
    assert 'MATURIN_PEP517_ARGS="--features vendored-openssl"' in step
    assert "--no-build-isolation /opt/sgl-router/bindings/python" in step
    assert (
        "pip install --no-cache-dir -c /opt/twinbuild/constraints.txt -r /tmp/tb/router-build.txt"
        in step
    )
    files = render(MANIFEST, repo_image(platform), "production").files
    assert files[".twinbuild/pip/router-build.txt"].startswith("maturin==")


def test_rocm_gets_cargo_from_the_pinned_rustup() -> None:
    step = _run_with("rocm", "/opt/sgl-router/bindings/python")
    assert (
        'fetch-verified.sh "${RUST_URL}" "${RUST_SHA256}" /opt/twinbuild/downloads/rustup-init'
        in step
    )
    assert '--default-toolchain "${RUST_VERSION}"' in step
    assert 'grep -q "^cargo ${RUST_VERSION} "' in step
    args = render(MANIFEST, repo_image("rocm"), "production").args
    assert args["RUST_URL"].endswith("/rustup/archive/1.28.2/x86_64-unknown-linux-gnu/rustup-init")
    assert "RUST_URL" not in render(MANIFEST, repo_image("cuda"), "production").args


def test_rccl_tests_are_checked_out_without_submodules() -> None:
    step = _run_with("rocm", "projects/rccl-tests")
    assert 'checkout.sh --submodules="${COLLECTIVE_SUBMODULES}" "${COLLECTIVE_TESTS_REPO}"' in step
    assert render(MANIFEST, repo_image("rocm"), "production").args["COLLECTIVE_SUBMODULES"] == "0"


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "protocol.file.allow",
        "GIT_CONFIG_VALUE_0": "always", "GIT_CONFIG_KEY_1": "uploadpack.allowAnySHA1InWant",
        "GIT_CONFIG_VALUE_1": "true", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
    }  # fmt: skip
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def test_checkout_initialises_submodules_only_when_asked(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    _git("init", "-q", cwd=sub)
    (sub / "inside.txt").write_text("from the submodule\n")
    _git("add", ".", cwd=sub)
    _git("commit", "-qm", "sub", cwd=sub)
    top = tmp_path / "top"
    top.mkdir()
    _git("init", "-q", cwd=top)
    _git("submodule", "-q", "add", f"file://{sub}", "third_party/sub", cwd=top)
    _git("commit", "-qm", "top", cwd=top)
    commit = _git("rev-parse", "HEAD", cwd=top)

    def checkout(*flags: str, dest: Path) -> None:
        env = {**os.environ, "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "protocol.file.allow",
               "GIT_CONFIG_VALUE_0": "always", "GIT_CONFIG_KEY_1": "uploadpack.allowAnySHA1InWant",
               "GIT_CONFIG_VALUE_1": "true"}  # fmt: skip
        subprocess.run(["bash", str(CHECKOUT), *flags, f"file://{top}", commit, "", str(dest)],
                       env=env, check=True, capture_output=True)  # fmt: skip

    for flags, name in (((), "plain"), (("--submodules=0",), "none")):
        plain = tmp_path / name
        checkout(*flags, dest=plain)
        assert (plain / ".gitmodules").is_file()
        assert not (plain / "third_party/sub/inside.txt").exists()  # as upstream's rccl-tests
    with pytest.raises(subprocess.CalledProcessError) as bad:
        checkout("--submodules=yes", dest=tmp_path / "bad")
    assert bad.value.returncode == 2
    deep = tmp_path / "deep"
    checkout("--submodules=1", dest=deep)
    assert (deep / "third_party/sub/inside.txt").read_text() == "from the submodule\n"
