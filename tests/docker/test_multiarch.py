"""A two-architecture variant, for real: build amd64 natively and arm64 under QEMU, push both,
push the OCI index naming them to a real registry, then smoke-test each architecture by its own
digest on an engine that no longer holds either image.

The project is the mini one with its ``cuda`` variant on ``linux/amd64`` and ``linux/arm64``. The
arm64 base is made by mmdebstrap under QEMU the first time on a machine (minutes; saved in the
user's cache after that, like the amd64 one), and every arm64 program, pip's included, runs
under ``qemu-aarch64`` through binfmt_misc, which ``twinbuild build --all-archs`` sets up itself
(root), as the README's main job asked for arm64 does. The
registry is Debian's docker-registry on 127.0.0.1, as in test_ship.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers import mini_project, run_twinbuild, with_arm64
from tests.session_registry import SessionRegistry
from twinbuild.engine import registry
from twinbuild.engine.client import Engine, connect
from twinbuild.errors import EngineError
from twinbuild.ship.oci import OCI_INDEX, Client, ImageRef
from twinbuild.ship.oci_index import children

pytestmark = pytest.mark.docker

ARCHS = ("amd64", "arm64")


@dataclass(slots=True)
class Duo:
    root: Path
    work: Path
    env: dict[str, str]
    address: str
    engine: Engine
    outputs: dict[str, str] = field(default_factory=dict)
    image_ids: dict[str, str] = field(default_factory=dict)
    pushed: str = ""

    def cli(
        self, *args: str, extra: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # an arm64 base made under QEMU the first time takes minutes
        return run_twinbuild(self.root, {**self.env, **(extra or {})}, *args, timeout=1800)


@pytest.fixture(scope="module")
def duo(
    tmp_path_factory: pytest.TempPathFactory, session_registry: SessionRegistry
) -> Iterator[Duo]:
    """Build the two-architecture ``cuda`` variant, push it with its index; drop the images."""
    if os.geteuid() != 0:
        pytest.skip("registers QEMU with binfmt_misc and starts a registry: needs root")
    work = tmp_path_factory.mktemp("duo")
    root = with_arm64(mini_project(work))
    address = session_registry.address
    engine = connect()
    env = {**os.environ, "DOCKER_HOST": engine.docker_host, registry.ENV_VAR: address}
    for var in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        env.pop(var, None)
    d = Duo(root=root, work=work, env=env, address=address, engine=engine)
    try:
        # --all-archs: the build installs and registers QEMU itself, as the README's main job
        # asked for arm64 does (no `twinbuild binfmt` first: that once hid a missing step, #37)
        built = d.cli("build", "--variant", "cuda", "--all-archs")
        assert built.returncode == 0, built.stderr[-3000:]
        for arch in ARCHS:
            record = json.loads((root / f"build/local/cuda/{arch}/image.json").read_text())
            d.image_ids[arch] = record["image_id"]
        out = work / "github_output"
        pushed = d.cli(
            "push", "--variant", "cuda", "--all-archs", extra={"GITHUB_OUTPUT": str(out)}
        )
        assert pushed.returncode == 0, pushed.stderr
        d.pushed = pushed.stdout
        d.outputs = dict(line.partition("=")[::2] for line in out.read_text().splitlines())
        for image_id in d.image_ids.values():  # a GPU runner of either kind has neither image
            engine.remove_image(image_id, force=True, prune=False)
        yield d
    finally:
        for image_id in d.image_ids.values():
            with contextlib.suppress(EngineError):
                engine.remove_image(image_id, force=True, prune=False)
        engine.close()


def test_each_architecture_is_its_own_image_of_its_own_architecture(duo: Duo) -> None:
    assert duo.image_ids["amd64"] != duo.image_ids["arm64"]
    client = Client(duo.address)
    for arch in ARCHS:
        ref = ImageRef.parse(duo.outputs[f"cuda-{arch}-image"])
        assert ref.repository == "twinbuild-ci/cuda"
        assert f"cuda-{arch}: {ref} (" in duo.pushed
        assert client.manifest(ref.repository, ref.digest) is not None


def test_the_index_names_both_digests_with_their_platforms(duo: Duo) -> None:
    index = ImageRef.parse(duo.outputs["cuda-image"])  # the variant's output is its index
    assert index.repository == "twinbuild-ci/cuda"
    client = Client(duo.address)
    found = client.manifest(index.repository, index.digest)
    assert found is not None
    assert found.media_type == OCI_INDEX
    assert json.loads(found.data)["annotations"] == {"org.twinbuild.variant": "cuda"}
    # Each entry read back from the registry: its config's architecture is the one it claims.
    entries = {e.arch: str(e.image) for e in children(client, index, found)}
    assert entries == {
        "linux/amd64": duo.outputs["cuda-amd64-image"],
        "linux/arm64": duo.outputs["cuda-arm64-image"],
    }
    tagged = client.manifest(index.repository, "local")  # the index's tag: <profile>
    assert tagged is not None
    assert tagged.digest == index.digest
    assert f"cuda: {index} (index of linux/amd64 " in duo.pushed


def test_the_index_joined_from_digests_alone_is_the_same_index(duo: Duo) -> None:
    """CI's path (validate.yml's index job): each digest pushed by a machine of its own, joined
    with ``push --index``, no engine asked. Against the same registry it makes the very index
    that one push of both made, byte for byte, and names it the same way."""
    joined = duo.cli(
        "push", "--variant", "cuda", "--index", duo.outputs["cuda-amd64-image"],
        "--index", duo.outputs["cuda-arm64-image"],
    )  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    index = duo.outputs["cuda-image"]
    assert joined.stdout.startswith(f"cuda: {index} (index of linux/amd64 ")


@pytest.mark.parametrize("arch", ARCHS)
def test_each_architecture_is_smoke_tested_by_its_own_digest(duo: Duo, arch: str) -> None:
    ref = duo.outputs[f"cuda-{arch}-image"]
    assert duo.engine.inspect_image(ref) is None  # pulled by digest, never rebuilt
    reports = duo.work / f"smoke-{arch}"
    smoked = duo.cli("smoke", "--image", ref, "--report-dir", str(reports))
    assert smoked.returncode == 0, smoked.stdout[-3000:] + smoked.stderr
    report = json.loads((reports / f"smoke-cuda-{arch}-local.json").read_text())
    assert report["image"]["digest"] == ref
    assert report["image"]["id"] == duo.image_ids[arch]  # the very bytes the build made
    assert report["arch"] == f"linux/{arch}"
    assert report["counts"]["failed"] == 0
    assert report["counts"]["passed"] > 0
    tests = {t["id"]: t for t in report["tests"]}
    # Its Python ran as that architecture (arm64: under QEMU), and its pins are what it claims.
    assert tests["test_platform.py::test_architecture"]["outcome"] == "passed"
    assert tests["test_conformance.py::test_pin[flash-linear-attention]"]["outcome"] == "passed"
    inspect = duo.engine.inspect_image(ref)
    assert inspect is not None
    assert inspect["Architecture"] == arch


def test_an_amd64_digest_cannot_be_smoke_tested_as_arm64(duo: Duo) -> None:
    ref = duo.outputs["cuda-amd64-image"]
    refused = duo.cli("smoke", "--image", ref, "--arch", "linux/arm64")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().endswith(
        "is a linux/amd64 image, not linux/arm64; pass that architecture's digest"
    )
