"""`twinbuild import` and the scanner it shares with the lint: one minimal recipe per class of
mistake found on real CUDA/ROCm pairs (each was drafted wrong, or silently dropped, before)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.helpers import image
from twinbuild.errors import ConfigError
from twinbuild.importer import draft, drift_report, run
from twinbuild.manifest import loader
from twinbuild.manifest.rendered import render
from twinbuild.recipe import scan

ROCM = "FROM rocm/dev-ubuntu-22.04:6.3.1-complete\nRUN pip install numba==0.65.1\n"


def _pair(tmp_path: Path, cuda: str, rocm: str = ROCM) -> draft.Adoption:
    (tmp_path / "cuda").write_text(cuda)
    (tmp_path / "rocm").write_text(rocm)
    return draft.adopt(tmp_path / "cuda", tmp_path / "rocm")


def _deps(adoption: draft.Adoption) -> dict[str, draft.Dependency]:
    return {d.name: d for d in adoption.deps}


def _cuda(adoption: draft.Adoption, name: str) -> dict[str, str]:
    side = _deps(adoption)[name].cuda
    assert side is not None
    return dict(side.values)


def _unrecognised(adoption: draft.Adoption) -> list[tuple[int, str]]:
    return [(u.line, u.text) for u in adoption.unrecognised]


def test_git_url_pin_is_named_after_the_repository_and_renders(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\n"
              "RUN pip install git+https://github.com/ISEEKYAN/mbridge.git@" + "8" * 40 + "\n"
              'RUN pip install "torch_memory_saver @ git+https://github.com/fzyzcjy/'
              'torch_memory_saver@' + "f" * 40 + '"\n')  # fmt: skip
    assert _cuda(a, "mbridge") == {
        "kind": "git",
        "repo": "https://github.com/iseekyan/mbridge",
        "commit": "8" * 40,
    }  # fmt: skip  (no dist: the URL does not say which distribution it builds)
    assert _cuda(a, "torch-memory-saver")["dist"] == "torch-memory-saver"
    path = tmp_path / "m.toml"
    text = (
        draft.draft(a)
        .replace('"TODO"', '"x"')
        .replace('digest = "x"', 'digest = "sha256:' + "a" * 64 + '"')
    )
    path.write_text(text.replace('python = "x"', 'python = "3.12"'))
    for line in (
        render(loader.load(path), image("cuda"), "production")
        .files[".twinbuild/pip/pins.txt"]
        .splitlines()
    ):
        Requirement(line)  # every rendered requirement parses (a URL as dist did not)


@pytest.mark.parametrize(
    "run",
    [
        "pip -v install git+https://github.com/ISEEKYAN/mbridge.git@" + "8" * 40,
        "python3 -m pip -v install git+https://github.com/ISEEKYAN/mbridge.git@" + "8" * 40,
        "pip3 install --resume-retries 999 git+https://github.com/ISEEKYAN/mbridge.git@" + "8" * 40,
        "pip install --retries=3 -v --timeout 60 git+https://github.com/ISEEKYAN/mbridge.git@"
        + "8" * 40,
    ],
)
def test_pip_options_before_and_after_install(tmp_path: Path, run: str) -> None:
    a = _pair(tmp_path, f"FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\nRUN {run}\n")
    assert sorted(_deps(a)) == ["mbridge", "numba"]  # no pin '999' or '60', mbridge not dropped
    assert _unrecognised(a) == []


def test_editable_extras_is_a_local_folder_not_the_pypi_name_python(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\nWORKDIR /sgl\n"
              'RUN pip install -e "python[all]" --no-deps\n')  # fmt: skip
    assert "python" not in _deps(a)
    assert a.notes == [
        f'{tmp_path}/cuda:3: pip install "python[all]" installs a local path, not a pin'
    ]


def test_parent_stage_arg_redeclared_in_child_keeps_its_default(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04 AS base\n"
              'ARG RCCL_REPO="https://github.com/ROCm/rccl"\nARG RCCL_BRANCH="' + "6" * 40 + '"\n'
              "WORKDIR /app\nFROM base AS build_rccl\nARG RCCL_REPO\nARG RCCL_BRANCH\n"
              "RUN git clone ${RCCL_REPO} && cd rccl && git checkout ${RCCL_BRANCH}\n")  # fmt: skip
    values = _cuda(a, "rccl")
    assert (values["repo"], values["commit"], values["path"]) == (
        "https://github.com/rocm/rccl", "6" * 40, "/app/rccl",
    )  # fmt: skip


def test_arg_default_in_url_is_substituted_and_shell_computed_value_is_unrecognised(
    tmp_path: Path,
) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\nARG TAG=v1.2\n"
              "RUN curl -fsSLo /k https://example.org/rel/${TAG}/k\n"
              'RUN case "$(uname -m)" in x86_64) A=amd64 ;; *) A=arm64 ;; esac && '
              "curl -fsSLo /t https://example.org/t-$A\n"
              "RUN asset=tool.bin && curl -fsSLo /tool https://example.org/v2.0/$asset\n")  # fmt: skip
    assert _cuda(a, "k")["url"] == "https://example.org/rel/v1.2/k"
    assert _cuda(a, "tool-bin")["url"] == "https://example.org/v2.0/tool.bin"
    assert [line for line, _ in _unrecognised(a)] == [4]  # $A depends on the build machine
    assert "$A" in _unrecognised(a)[0][1]


def test_empty_conditional_arg_leaves_the_clones_branch(tmp_path: Path) -> None:
    a = _pair(
        tmp_path,
        'FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\nARG MEGATRON_COMMIT=""\n'
        "RUN git clone -b miles-main https://github.com/radixark/Megatron-LM.git /m && cd /m && "
        'if [ -n "$MEGATRON_COMMIT" ]; then git checkout ${MEGATRON_COMMIT}; fi\n',
        "FROM rocm/dev-ubuntu-22.04:6.3.1-complete\n"
        "RUN git clone -b miles-main https://github.com/radixark/Megatron-LM.git /m\n",
    )
    dep = _deps(a)["megatron-lm"]
    assert dep.verdict == "floating"  # same branch on both sides, no false "differs"
    assert _cuda(a, "megatron-lm")["ref"] == "miles-main"


def test_base_is_the_final_stages_base_through_aliases(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM rust:1.85 AS chef\nFROM chef AS builder\nRUN cargo build\n"
              "FROM nvidia/cuda:12.4.0-base-ubuntu22.04 AS base\nFROM base AS mid\nFROM mid\n"
              "COPY --from=builder /x /x\nRUN pip install einops==0.8.1\n")  # fmt: skip
    base = a.bases["cuda"]
    assert (base.repository, base.tag, base.where, base.toolkit) == (
        "nvidia/cuda", "12.4.0-base-ubuntu22.04", f"{tmp_path}/cuda:4", "12.4",
    )  # fmt: skip
    assert [line for line, _ in _unrecognised(a)] == [1]  # the builder image: not the base


def test_onbuild_is_a_note_not_a_pin(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\n"
              "ONBUILD RUN pip install einops==0.8.1\n")  # fmt: skip
    assert "einops" not in _deps(a)
    assert a.notes == [f"{tmp_path}/cuda:2: ONBUILD RUN pip install einops==0.8.1 runs only in "
                       "images and stages built FROM this stage, not here; its pins are not drafted"]  # fmt: skip


def test_add_checksum_is_the_pins_sha256_and_copy_from_image_is_listed(tmp_path: Path) -> None:
    sha = "c" * 64
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\n"
              f"ADD --checksum=sha256:{sha} https://dl.k8s.io/release/v1.31.2/bin/linux/amd64/"
              "kubectl /usr/local/bin/\n"
              "COPY --from=registry.example/astral-sh/uv:0.5.31 /uv /bin/\n")  # fmt: skip
    assert _cuda(a, "kubectl") == {
        "kind": "url", "url": "https://dl.k8s.io/release/v1.31.2/bin/linux/amd64/kubectl",
        "sha256": sha, "install": "file", "path": "/usr/local/bin/kubectl",
    }  # fmt: skip
    assert [line for line, _ in _unrecognised(a)] == [3]
    parsed = scan.parse(tmp_path / "cuda")
    image = [p for p in parsed.pins if p.source == "image"]
    assert [(p.name, p.tag, p.literal) for p in image] == [
        ("registry.example/astral-sh/uv", "0.5.31", True)
    ]


def test_unquoted_env_with_semicolon_is_one_value(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\nRUN pip install x==1\n",
              "FROM rocm/dev-ubuntu-22.04:6.3.1-complete\nARG ARCH=gfx90a;gfx942\n"
              "ENV PYTORCH_ROCM_ARCH=${ARCH}\nRUN pip install x==1\n")  # fmt: skip
    assert a.bases["rocm"].gpu_archs == ("gfx90a", "gfx942")


@pytest.mark.parametrize(
    ("ref", "kind"),
    [("v0.1.0", "tag"), ("0.4.2", "tag"), ("miles-main", "branch"), ("release_v2.10", "tag or branch"),
     ("HEAD", "default branch")],
)  # fmt: skip
def test_tags_and_branches_are_told_apart(ref: str, kind: str) -> None:
    assert drift_report.ref_kind(ref) == kind


def test_url_pins_never_float(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\n"
              "RUN wget -O /get-pip.py https://bootstrap.pypa.io/get-pip.py\n")  # fmt: skip
    text = draft.draft(a)
    table = text.split("[pins.get-pip-py]")[1].split("[pins.")[0]
    assert "floating" not in table
    assert 'sha256 = "TODO"' in table


def test_report_comes_before_a_refused_write(tmp_path: Path) -> None:
    (tmp_path / "cuda").write_text(
        "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\nRUN pip install x==1\n"
    )
    (tmp_path / "rocm").write_text(ROCM)
    out = tmp_path / "manifest.toml"
    out.write_text("mine\n")
    stream = io.StringIO()
    with pytest.raises(ConfigError):
        run.run(tmp_path / "cuda", tmp_path / "rocm", out=out, stream=stream)
    assert stream.getvalue().startswith("dependency")
    assert out.read_text() == "mine\n"


def test_recipes_already_adopted_are_said_to_be(tmp_path: Path) -> None:
    root = Path(__file__).parents[2]
    stream = io.StringIO()
    options = run.ImportOptions(
        cuda_dockerfile=root / "images/cuda/Dockerfile",
        rocm_dockerfile=root / "images/rocm/Dockerfile",
        out=tmp_path / "m.toml",
    )
    assert run.run_import(options, stream) == 0
    assert "already take every pin from a manifest" in stream.getvalue()
    assert not (tmp_path / "m.toml").exists()


def test_adopted_recipes_in_json(tmp_path: Path) -> None:
    root = Path(__file__).parents[2]
    stream = io.StringIO()
    options = run.ImportOptions(
        cuda_dockerfile=root / "images/cuda/Dockerfile",
        rocm_dockerfile=root / "images/rocm/Dockerfile",
        out=tmp_path / "m.toml",
        format="json",
    )
    assert run.run_import(options, stream) == 0
    assert json.loads(stream.getvalue())["adopted"] is True


def test_installed_twice_differently_keeps_the_later_and_says_so(tmp_path: Path) -> None:
    a = _pair(tmp_path, "FROM nvidia/cuda:12.9.1-devel-ubuntu22.04\n"
              "RUN if [ -n \"$X\" ]; then pip install git+https://github.com/NVIDIA/TransformerEngine"
              ".git@" + "c" * 40 + "; else pip install transformer_engine==2.16.1; fi\n")  # fmt: skip
    side = _deps(a)["transformerengine"].cuda
    assert side is not None
    assert dict(side.values) == {"kind": "pypi", "version": "2.16.1"}
    assert any("installs it again (version 2.16.1)" in n and "choose by hand" in n
               for n in side.notes)  # fmt: skip
