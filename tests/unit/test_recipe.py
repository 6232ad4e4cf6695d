"""scan.parse finds every pin a recipe writes, with the line that holds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from twinbuild.errors import ConfigError
from twinbuild.recipe import scan

FIXTURES = Path(__file__).parent.parent / "fixtures" / "recipes"
Row = tuple[int, str, str, str, str, bool, bool, str | None]


def rows(r: scan.Recipe) -> list[Row]:
    return [
        (p.line, p.source, p.name, p.value, p.resolved, p.literal, p.floating, p.stage)
        for p in r.pins
    ]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return path


def test_cuda_recipe_pins() -> None:
    r = scan.parse(FIXTURES / "cuda.Dockerfile")
    mc = "3714d81d418c9f1bca4594fc35f9e8289f652862"
    tms = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"
    mb = "9c2b4a1e0f5d6c7b8a9e0d1c2b3a4f5e6d7c8b9a"
    kubectl = "https://dl.k8s.io/release/v1.31.2/bin/linux/{}/kubectl"
    kubectl_name = "https://dl.k8s.io/release/{{version}}/bin/linux/{}/kubectl"
    assert rows(r) == [
        (3, "arg", "MEGATRON_COMMIT", mc, mc, True, False, None),
        (
            5,
            "from",
            "lmsysorg/sglang",
            "v0.5.5-cu129-amd64",
            "lmsysorg/sglang:v0.5.5-cu129-amd64",
            False,
            True,
            "base",
        ),
        (13, "pip", "flash-linear-attention", "0.4.2", "0.4.2", True, False, "base"),
        (14, "pip", "numpy", "<2", "<2", True, True, "base"),
        (15, "pip", "ray", "2.47.1", "2.47.1", True, False, "base"),
        (16, "pip", "wandb", "", "", False, True, "base"),
        (18, "pip", "torch-memory-saver", tms, tms, True, False, "base"),
        (20, "git-clone", "https://github.com/nvidia/megatron-lm", "", "", False, False, "base"),
        (
            22,
            "git-checkout",
            "https://github.com/nvidia/megatron-lm",
            "${MEGATRON_COMMIT}",
            mc,
            False,
            False,
            "base",
        ),
        (23, "pip", "path:/root/Megatron-LM", "", "", False, False, "base"),
        (27, "pip", "megatron-bridge", mb, mb, True, False, "base"),
        (
            30,
            "curl",
            kubectl_name.format("amd64"),
            kubectl.format("amd64"),
            kubectl.format("amd64"),
            True,
            False,
            "base",
        ),
        (
            31,
            "curl",
            kubectl_name.format("arm64"),
            kubectl.format("arm64"),
            kubectl.format("arm64"),
            True,
            False,
            "base",
        ),
        (36, "apt", "libnuma-dev", "2.0.18-1", "2.0.18-1", True, False, "base"),
        (41, "pip", "transformer-engine", "2.17.0", "2.17.0", True, False, "final"),
    ]
    assert r.unrecognised == []
    assert r.stages == ["base", "final"]
    assert r.copies == [(40, "scripts/")]
    assert r.used_vars == {"BASE_IMAGE", "MEGATRON_COMMIT", "TARGETARCH"}
    assert r.envs == {
        "base": [("MAX_JOBS", "32", 8), ("TORCH_CUDA_ARCH_LIST", "9.0;10.0", 9)],
        "final": [],
    }
    assert [(a.line, a.name, a.default, a.stage) for a in r.args] == [
        (2, "BASE_IMAGE", "lmsysorg/sglang:v0.5.5-cu129-amd64", None),
        (3, "MEGATRON_COMMIT", mc, None),
        (6, "TARGETARCH", None, "base"),
        (7, "MEGATRON_COMMIT", None, "base"),
    ]
    tms_pin = r.pins[6]
    assert (tms_pin.repo, tms_pin.dist, tms_pin.text) == (
        "https://github.com/fzyzcjy/torch_memory_saver",
        "torch-memory-saver",
        f'"git+https://github.com/fzyzcjy/torch_memory_saver.git@{tms}#egg=torch_memory_saver"',
    )
    assert r.pins[1].vars == ("BASE_IMAGE",)
    assert (r.pins[1].tag, r.pins[1].digest) == ("v0.5.5-cu129-amd64", None)
    assert r.pins[7].dest == "/root/Megatron-LM"


def test_rocm_recipe_branch_fetch_and_clone_settled_by_checkout() -> None:
    r = scan.parse(FIXTURES / "rocm.Dockerfile")
    by = {(p.source, p.name): p for p in r.pins}
    bridge = by["pip", "megatron-bridge"]
    assert (bridge.value, bridge.floating, bridge.repo) == (
        "bridge",
        True,
        "https://github.com/nvidia-nemo/megatron-bridge",
    )
    fetch = by["git-fetch", "https://github.com/nvidia/megatron-lm"]
    assert (fetch.line, fetch.value, fetch.literal, fetch.floating) == (
        16,
        "${MEGATRON_COMMIT}",
        False,
        False,
    )
    assert ("git-checkout", "https://github.com/nvidia/megatron-lm") not in by  # FETCH_HEAD
    te = by["git-clone", "https://github.com/rocm/transformerengine"]
    assert (te.value, te.floating, te.dest) == ("release/v2.4_rocm", False, "/opt/te")
    base = by["from", "rocm/sgl-dev"]
    assert (base.tag, base.floating, base.literal) == ("v0.5.5-rocm700-mi35x", False, False)
    assert base.digest == "sha256:" + "4d5c0f3e" * 8


def test_heredocs_mounts_indexes_wheels_and_unrecognised() -> None:
    r = scan.parse(FIXTURES / "odd.Dockerfile")
    zero = "0" * 64
    etcd = (
        "https://github.com/etcd-io/etcd/releases/download/v3.5.21/etcd-v3.5.21-linux-amd64.tar.gz"
    )
    assert rows(r) == [
        (1, "arg", "CUDA_VERSION", "12.9.1", "12.9.1", True, False, None),
        (
            2,
            "from",
            "nvidia/cuda",
            f"12.9.1-devel-ubuntu24.04@sha256:{zero}",
            f"nvidia/cuda:12.9.1-devel-ubuntu24.04@sha256:{zero}",
            True,
            False,
            "build",
        ),
        (3, "arg", "FLA_BRANCH", "main", "main", True, True, "build"),
        (5, "pip", "path:/wheels/*.whl", "", "", False, False, "build"),
        (5, "pip", "flash-attn", "2.7.4.post1", "2.7.4.post1", True, False, "build"),
        (6, "pip", "requirements:requirements/base.txt", "", "", False, False, "build"),
        (6, "pip", "constraints:constraints.txt", "", "", False, False, "build"),
        (
            7,
            "pip",
            "index:https://download.pytorch.org/whl/cu129",
            "https://download.pytorch.org/whl/cu129",
            "https://download.pytorch.org/whl/cu129",
            True,
            False,
            "build",
        ),
        (8, "pip", "fla", "${FLA_BRANCH}", "main", False, True, "build"),
        (11, "pip", "triton", "3.4.0", "3.4.0", True, False, "build"),
        (12, "pip", "vllm", ">=0.9,<0.11", ">=0.9,<0.11", True, True, "build"),
        (15, "pip", "einops", "0.8.1", "0.8.1", True, False, "build"),
        (17, "git-clone", "https://github.com/deepseek-ai/deepep", "", "", False, True, "build"),
        (
            17,
            "git-checkout",
            "https://github.com/deepseek-ai/deepep",
            "v1.2.1",
            "v1.2.1",
            True,
            True,
            "build",
        ),
        (22, "curl", etcd.replace("v3.5.21", "{version}"), etcd, etcd, True, False, "1"),
    ]
    assert [(u.line, u.text) for u in r.unrecognised] == [
        (18, "conda ... cudnn==9.1.0"),
        (18, "npm ... pyright@1.1.400"),
        (19, 'pip install "torch>>2"'),
    ]
    assert r.copies == [(4, "wheels")]
    assert r.stages == ["build", "1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FROM a\nRUN echo 'x\n", "Dockerfile:2: does not parse: unterminated single quote"),
        ("FROM a\nRUN <<EOF\necho\n", "Dockerfile:2: does not parse: heredoc EOF is never closed"),
        (
            "FROM a\nRUN x \\\n\nfoo bar\n",
            "Dockerfile:4: does not parse: unknown instruction FOO;"
            " a heredoc or line continuation is probably broken",
        ),
        ("RUN echo\nFROM a\n", "Dockerfile:1: does not parse: RUN before the first FROM"),
        ("# nothing\n", "Dockerfile: does not parse: no FROM instruction; is this a Dockerfile?"),
    ],
)
def test_unparsable_recipes(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        scan.parse(write(tmp_path, text))
    assert str(err.value) == f"{tmp_path}/{message}"


def test_missing_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        scan.parse(tmp_path / "nope")
    assert str(err.value) == f"{tmp_path}/nope: recipe not found; pass a Dockerfile's path"
    (tmp_path / "bin").write_bytes(b"FROM \xff\n")
    with pytest.raises(ConfigError) as err:
        scan.parse(tmp_path / "bin")
    assert str(err.value) == f"{tmp_path}/bin:1: not UTF-8 (byte 0xff); save the recipe as UTF-8"


def test_twinbuild_style_recipe_has_no_literal_pin(tmp_path: Path) -> None:
    r = scan.parse(
        write(
            tmp_path,
            (
                "ARG BASE_IMAGE\n"
                "FROM ${BASE_IMAGE}\n"
                "ARG TORCH_MEMORY_SAVER_REPO\n"
                "ARG TORCH_MEMORY_SAVER_COMMIT\n"
                "COPY .twinbuild/pip/late.txt /tmp/late.txt\n"
                "RUN pip install --no-deps -r /tmp/late.txt \\\n"
                '  && pip install "git+${TORCH_MEMORY_SAVER_REPO}@${TORCH_MEMORY_SAVER_COMMIT}"\n'
            ),
        )
    )
    assert [p for p in r.pins if p.literal] == []
    assert [(p.line, p.source, p.name, p.value) for p in r.pins] == [
        (2, "from", "${BASE_IMAGE}", ""),
        (6, "pip", "requirements:/tmp/late.txt", ""),
        (7, "pip", "${TORCH_MEMORY_SAVER_REPO}", "${TORCH_MEMORY_SAVER_COMMIT}"),
    ]
    assert r.used_vars == {"BASE_IMAGE", "TORCH_MEMORY_SAVER_REPO", "TORCH_MEMORY_SAVER_COMMIT"}
    assert r.copies == [(5, ".twinbuild/pip/late.txt")]


def test_shell_forms(tmp_path: Path) -> None:
    r = scan.parse(
        write(
            tmp_path,
            (
                "FROM a AS s\n"
                "ENV TE_VERSION=2.4 OTHER=1\n"
                "RUN export DEEPEP_COMMIT=abcdef1 ; for x in a b; do echo $x; done; \\\n"
                "  if true; then sudo -E pip3 install 'x[y]==1.0; python_version >\"3\"' ;fi \\\n"
                "    | tee log 2>/dev/null; apt install -y curl=8.5.0-2ubuntu10 vim\n"
                "RUN pip install -e 'git+https://github.com/a/B.git@v1#egg=b&subdirectory=py' "
                "pkg @ https://h/p-1.0.tar.gz\n"
            ),
        )
    )
    assert [(p.line, p.source, p.name, p.value, p.floating) for p in r.pins] == [
        (1, "from", "a", "", True),
        (2, "env", "TE_VERSION", "2.4", False),
        (3, "env", "DEEPEP_COMMIT", "abcdef1", False),
        (4, "pip", "x", "1.0", False),
        (5, "apt", "curl", "8.5.0-2ubuntu10", False),
        (6, "pip", "b", "v1", True),
        (6, "pip", "pkg", "https://h/p-1.0.tar.gz", False),
    ]
    assert r.pins[5].subdirectory == "py"
    assert r.pins[5].repo == "https://github.com/a/b"


def test_normalize_repo() -> None:
    assert scan.normalize_repo("git+HTTPS://GitHub.com/NVIDIA/Megatron-LM.git/") == (
        "https://github.com/nvidia/megatron-lm"
    )
    assert scan.normalize_repo("git@github.com:ROCm/TE.git") == "https://github.com/rocm/te"
