"""twinbuild.builder.bake: a docker buildx bake file in bake's documented JSON shape, with staged contexts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import mini_project
from twinbuild.builder.bake import bake, check_repository, definition
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load
from twinbuild.manifest.render import render

# The attributes the Bake file reference (docs.docker.com/build/bake/reference/) documents.
TOP_LEVEL = {"group", "target", "variable", "function"}
GROUP_ATTRS = {"targets", "description"}
TARGET_ATTRS = {
    "args", "annotations", "attest", "cache-from", "cache-to", "call", "context", "contexts",
    "description", "dockerfile-inline", "dockerfile", "entitlements", "extra-hosts", "inherits",
    "labels", "matrix", "name", "network", "no-cache-filter", "no-cache", "output", "platforms",
    "pull", "secret", "shm-size", "ssh", "tags", "target", "ulimits",
}  # fmt: skip
REPO = "ghcr.io/example/twinbuild"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return mini_project(tmp_path)


def test_bake_file_uses_only_documented_keys(root: Path) -> None:
    result = bake(load(root / "pins/manifest.toml"), root, repository=REPO)
    data = json.loads((root / "docker-bake.json").read_text())
    assert data == result.definition
    assert set(data) <= TOP_LEVEL
    assert data["group"] == {"default": {"targets": ["cuda", "rocm"]}}
    for group in data["group"].values():
        assert set(group) <= GROUP_ATTRS
    assert set(data["target"]) == {"cuda", "rocm"}
    for target in data["target"].values():
        assert set(target) <= TARGET_ATTRS
        assert all(isinstance(v, str) for v in target["args"].values())
        assert all(isinstance(v, str) for v in target["labels"].values())
        for key in ("platforms", "tags", "cache-from", "cache-to"):
            assert all(isinstance(v, str) for v in target[key])


def test_targets_carry_render_args_labels_and_cache(root: Path) -> None:
    manifest = load(root / "pins/manifest.toml")
    target = definition(manifest, repository=REPO)["target"]["rocm"]
    short = manifest.platform_digest("rocm").removeprefix("sha256:")[:12]
    assert target == {
        "context": ".twinbuild/bake/rocm",
        "dockerfile": "images/rocm/Dockerfile",
        "args": render(manifest, "rocm", "production").args,
        "labels": {
            "org.twinbuild.platform": "rocm",
            "org.twinbuild.profile": "production",
            "org.twinbuild.manifest-hash": manifest.digest(),
            "org.twinbuild.base-digest": "sha256:" + "2" * 64,
            "org.opencontainers.image.source": "https://github.com/example/twinbuild",
            "org.opencontainers.image.title": "twinbuild-rocm",
        },
        "platforms": ["linux/amd64"],
        "tags": [f"{REPO}:rocm", f"{REPO}:rocm-{short}"],
        "cache-from": [f"type=registry,ref={REPO}:buildcache-rocm"],
        "cache-to": [f"type=registry,ref={REPO}:buildcache-rocm,mode=max"],
    }
    assert target["args"]["BASE_IMAGE"] == ("rocm/sgl-dev:v0.5.6-rocm700-mi35x@sha256:" + "2" * 64)


def test_each_platform_gets_its_own_generated_files(root: Path) -> None:
    manifest = load(root / "pins/manifest.toml")
    (root / ".twinbuild/bake/cuda/stale.txt").parent.mkdir(parents=True)
    (root / ".twinbuild/bake/cuda/stale.txt").write_text("old")
    result = bake(manifest, root, repository=REPO)
    for platform in ("cuda", "rocm"):
        context = result.contexts[platform]
        assert context == root / ".twinbuild/bake" / platform
        dockerfile = context / "images" / platform / "Dockerfile"
        assert dockerfile.read_text() == (root / "images" / platform / "Dockerfile").read_text()
        for name, body in render(manifest, platform, "production").files.items():
            assert (context / name).read_text() == body
    assert not (root / ".twinbuild/bake/cuda/stale.txt").exists()
    cuda_pins = (result.contexts["cuda"] / ".twinbuild/pip/pins.txt").read_text()
    rocm_pins = (result.contexts["rocm"] / ".twinbuild/pip/pins.txt").read_text()
    assert "numba==0.65.1" in rocm_pins
    assert "numba" not in cuda_pins


def test_out_path_and_report(root: Path) -> None:
    (root / "ci").mkdir()
    result = bake(load(root / "pins/manifest.toml"), root, out=Path("ci/bake.json"))
    assert (root / "ci/bake.json").is_file()
    assert result.report() == (
        f"wrote {root}/ci/bake.json\n"
        f"  cuda: context {root}/.twinbuild/bake/cuda\n"
        f"  rocm: context {root}/.twinbuild/bake/rocm\n"
        f"build: docker buildx bake -f {root}/ci/bake.json (from the repository root)\n"
    )
    default = json.loads((root / "ci/bake.json").read_text())["target"]["cuda"]
    assert default["tags"][0] == "ghcr.io/owner/twinbuild:cuda"


@pytest.mark.parametrize("bad", ["ghcr.io/x/y:latest", "ghcr.io/x/y@sha256:00", "Bad Name", ""])
def test_repository_is_checked(bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_repository(bad)
    assert str(caught.value) == (
        f"--repository '{bad}': not an image repository; pass one without tag or digest, "
        "e.g. ghcr.io/owner/twinbuild"
    )


def test_missing_recipe_writes_no_bake_file(root: Path) -> None:
    (root / "images/rocm/Dockerfile").unlink()
    with pytest.raises(ConfigError) as caught:
        bake(load(root / "pins/manifest.toml"), root)
    assert str(caught.value) == f"images/rocm/Dockerfile: recipe not found under {root}"
    assert not (root / "docker-bake.json").exists()


def test_the_manifests_source_labels_the_bake_targets(root: Path) -> None:
    path = root / "pins/manifest.toml"
    path.write_text('source = "https://git.example.org/team/tb"\n' + path.read_text())
    labels = definition(load(path), repository=REPO)["target"]["cuda"]["labels"]
    assert labels["org.opencontainers.image.source"] == "https://git.example.org/team/tb"
