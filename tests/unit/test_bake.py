"""twinbuild.builder.bake: a bake file in bake's documented JSON shape, with staged contexts.

The production profile needs no engine: these run on the mini project and on this repository's
own recipes (whose bind mounts must all be in the staged contexts). Real buildx reads and builds
the files in tests/docker/test_bake.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import image as image_key
from tests.helpers import mini_project
from twinbuild.builder.bake import BakeOptions, bake, check_repository, definition, plan_images
from twinbuild.builder.bake_target import bake_entry, from_bake
from twinbuild.builder.build_record import BaseRef
from twinbuild.builder.inputs import builder_settings, inputs_hash
from twinbuild.engine.buildx_build import build_argv
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load
from twinbuild.manifest.rendered import render

ROOT = Path(__file__).resolve().parents[2]
# The attributes the Bake file reference documents.
TOP_LEVEL = {"group", "target", "variable", "function"}
GROUP_ATTRS = {"targets", "description"}
TARGET_ATTRS = {
    "args", "annotations", "attest", "cache-from", "cache-to", "call", "context", "contexts",
    "description", "dockerfile-inline", "dockerfile", "entitlements", "extra-hosts", "inherits",
    "labels", "matrix", "name", "network", "no-cache-filter", "no-cache", "output", "platforms",
    "pull", "secret", "shm-size", "ssh", "tags", "target", "ulimits",
}  # fmt: skip
#: What buildx 0.13 accepts in a target: `network` is not among them (an unknown bake key there).
BUILDX_013 = TARGET_ATTRS - {"network", "call", "entitlements", "extra-hosts", "description"}
REPO = "registry.example:5000/team/twinbuild"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return mini_project(tmp_path)


def _bake(root: Path, **options: object) -> object:
    return bake(load(root / "pins/manifest.toml"), BakeOptions(root=root, **options))  # type: ignore[arg-type]


def test_bake_file_uses_only_keys_buildx_013_accepts(root: Path) -> None:
    result = _bake(root, repository=REPO)
    data = json.loads((root / "docker-bake.json").read_text())
    assert data == result.definition  # type: ignore[attr-defined]
    assert set(data) <= TOP_LEVEL
    assert data["group"] == {
        "default": {"targets": ["cuda-amd64", "rocm-amd64"]},
        "cuda": {"targets": ["cuda-amd64"]},
        "rocm": {"targets": ["rocm-amd64"]},
    }
    for group in data["group"].values():
        assert set(group) <= GROUP_ATTRS
    for target in data["target"].values():
        assert set(target) <= BUILDX_013
        assert all(isinstance(v, str) for v in target["args"].values())
        assert all(isinstance(v, str) for v in target["labels"].values())
        for key in ("platforms", "tags", "cache-from", "cache-to"):
            assert all(isinstance(v, str) for v in target[key])


def test_a_target_is_what_twinbuild_build_of_it_receives_and_labels(root: Path) -> None:
    manifest = load(root / "pins/manifest.toml")
    image = next(i for i in plan_images(manifest, root, "production") if i.key.variant == "rocm")
    rendered = render(manifest, image_key("rocm"), "production")
    base = BaseRef(ref=manifest.variant("rocm").base.ref, id="sha256:" + "2" * 64)
    digest = inputs_hash(root, rendered, base_id=base.id, builder=builder_settings(rendered))
    target = definition([image], repository=REPO)["target"]["rocm-amd64"]
    expected = image.planned.labels(manifest, root, source=None, revision=None)
    created = "org.opencontainers.image.created"
    assert {k: v for k, v in target["labels"].items() if k != created} == {
        k: v for k, v in expected.items() if k != created
    }
    assert target["labels"]["org.twinbuild.inputs-hash"] == digest
    short = digest.removeprefix("sha256:")[:12]
    assert target["context"] == ".twinbuild/bake/rocm-amd64"
    assert target["dockerfile"] == "images/rocm/Dockerfile"
    assert target["args"] == {**rendered.args, "BUILDKIT_INLINE_CACHE": "1"}
    assert target["labels"]["org.twinbuild.left-out"] == ""
    assert target["platforms"] == ["linux/amd64"]
    assert target["tags"] == [f"{REPO}:rocm-amd64", f"{REPO}:rocm-amd64-{short}"]
    assert target["cache-from"] == [f"type=registry,ref={REPO}:buildcache-rocm-amd64"]
    assert target["cache-to"] == [f"type=registry,ref={REPO}:buildcache-rocm-amd64,mode=max"]


def test_without_a_repository_the_tags_are_twinbuild_builds_and_no_cache(root: Path) -> None:
    result = _bake(root)
    for platform in ("cuda", "rocm"):
        target = result.definition["target"][f"{platform}-amd64"]  # type: ignore[attr-defined]
        assert target["tags"] == [f"twinbuild/{platform}:production-amd64"]
        assert "cache-from" not in target
        assert "cache-to" not in target
    assert "OWNER" not in (root / "docker-bake.json").read_text()


def test_each_platform_gets_its_own_generated_files(root: Path) -> None:
    manifest = load(root / "pins/manifest.toml")
    (root / ".twinbuild/bake/cuda-amd64/stale.txt").parent.mkdir(parents=True)
    (root / ".twinbuild/bake/cuda-amd64/stale.txt").write_text("old")
    result = _bake(root, repository=REPO)
    for platform in ("cuda", "rocm"):
        context = result.contexts[f"{platform}-amd64"]  # type: ignore[attr-defined]
        assert context == root / ".twinbuild/bake" / f"{platform}-amd64"
        dockerfile = context / "images" / platform / "Dockerfile"
        assert dockerfile.read_text() == (root / "images" / platform / "Dockerfile").read_text()
        for name, body in render(manifest, image_key(platform), "production").files.items():
            assert (context / name).read_text() == body
    assert not (root / ".twinbuild/bake/cuda-amd64/stale.txt").exists()
    cuda_pins = (result.contexts["cuda-amd64"] / ".twinbuild/pip/pins.txt").read_text()  # type: ignore[attr-defined]
    rocm_pins = (result.contexts["rocm-amd64"] / ".twinbuild/pip/pins.txt").read_text()  # type: ignore[attr-defined]
    assert "numba==0.65.1" in rocm_pins
    assert "numba" not in cuda_pins


def test_the_staged_contexts_hold_everything_the_real_recipes_bind_mount(tmp_path: Path) -> None:
    """The bug: the production recipes bind-mount twinbuild/util/exact_pin.py, which the staged
    contexts lacked, so the bake file could not build."""
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False
    )
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    copy = tmp_path / "repo"
    for name in proc.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    result = bake(load(copy / "pins/manifest.toml"), BakeOptions(root=copy))
    for platform, image in (("cuda", "cu13-arm64"), ("rocm", "rocm720-mi35x-amd64")):
        recipe = (copy / f"images/{platform}/Dockerfile").read_text()
        mounted = set(re.findall(r"--mount=type=bind,source=([^,\s]+)", recipe))
        assert "twinbuild/util/exact_pin.py" in mounted
        context = result.contexts[image]
        missing = sorted(m for m in mounted if not (context / m).is_file())
        assert not missing, f"{platform}: the context lacks {missing}"


def test_out_path_and_report(root: Path) -> None:
    (root / "ci").mkdir()
    result = _bake(root, out=Path("ci/bake.json"))
    assert (root / "ci/bake.json").is_file()
    assert result.report() == (  # type: ignore[attr-defined]
        f"wrote {root}/ci/bake.json (production profile)\n"
        f"  cuda-amd64: target cuda-amd64; context {root}/.twinbuild/bake/cuda-amd64\n"
        f"  rocm-amd64: target rocm-amd64; context {root}/.twinbuild/bake/rocm-amd64\n"
        f"build: docker buildx bake -f {root}/ci/bake.json (from the repository root)\n"
    )


@pytest.mark.parametrize(
    "bad", ["registry.example/x/y:latest", "r.example/x@sha256:00", "Bad Name", ""]
)
def test_repository_is_checked(bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_repository(bad)
    assert str(caught.value) == (
        f"--repository '{bad}': not an image repository; pass one without tag or digest, "
        "e.g. registry.example:5000/team/twinbuild"
    )


def test_missing_recipe_writes_no_bake_file(root: Path) -> None:
    (root / "images/rocm/Dockerfile").unlink()
    with pytest.raises(ConfigError) as caught:
        _bake(root)
    assert str(caught.value) == f"images/rocm/Dockerfile: recipe not found under {root}"
    assert not (root / "docker-bake.json").exists()


def test_the_manifests_source_labels_the_bake_targets(root: Path) -> None:
    path = root / "pins/manifest.toml"
    path.write_text('source = "https://git.example.org/team/tb"\n' + path.read_text())
    manifest = load(path)
    labels = definition(plan_images(manifest, root, "production"))["target"]["cuda-amd64"]["labels"]
    assert labels["org.opencontainers.image.source"] == "https://git.example.org/team/tb"


def test_a_bake_target_read_back_is_the_target_build_builds(root: Path, tmp_path: Path) -> None:
    """One model feeds both: written to the file and read back (as ``bake --build`` reads what
    buildx resolved), a target gives buildx the same arguments, but for the cache it cannot
    export."""
    manifest = load(root / "pins/manifest.toml")
    for image in plan_images(manifest, root, "production"):
        for repository in (None, REPO):
            written = image.target(root, image.name, repository)
            entry = bake_entry(written, f".twinbuild/bake/{image.name}")
            back = from_bake(image.name, entry, root, image.planned.network)
            iid = tmp_path / "iid"
            assert build_argv("docker", back, iidfile=iid) == build_argv(
                "docker", written, iidfile=iid
            )
            assert back.cache_to == ()
            assert written.cache_to == (
                (f"type=registry,ref={REPO}:buildcache-{image.name},mode=max",)
                if repository
                else ()
            )


def test_a_target_buildx_would_build_otherwise_is_refused(root: Path) -> None:
    image = plan_images(load(root / "pins/manifest.toml"), root, "production")[0]
    entry = bake_entry(image.target(root, image.name, None), "ctx")
    with pytest.raises(ConfigError) as caught:
        from_bake("x", {**entry, "secret": ["id=a"]}, root, "host")
    assert str(caught.value) == "bake target 'x' has keys twinbuild does not build: secret"
    with pytest.raises(ConfigError) as caught:
        from_bake("x", {**entry, "platforms": ["linux/amd64", "linux/arm64"]}, root, "host")
    assert str(caught.value) == (
        "bake target 'x': platforms ['linux/amd64', 'linux/arm64']; each target is one of "
        "linux/amd64, linux/arm64"
    )
