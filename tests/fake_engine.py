"""The unit tests' one fake engine: images held in a dict, canned build output (real buildx output,
``tests/fixtures/buildx/``), every call recorded.

It implements :class:`twinbuild.engine.api.EngineAPI` and mypy checks that it does (see the end
of this file), so a method added to the Protocol must be added here too. It answers the way the
Docker engine does where the code under test depends on it: a build stores its image with its
labels, a tag needs an existing image, an imported image is untagged until tagged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinbuild.engine.api import (
    BuildOutcome,
    BuildTarget,
    EngineInfo,
    GpuAccess,
    ImageSummary,
    Network,
    Pushed,
    RunResult,
)
from twinbuild.engine.buildx_build import buildkit_missing
from twinbuild.errors import ConfigError, EngineError
from twinbuild.manifest.model import Arch
from twinbuild.util.activity import Say

HOST = "unix:///fake.sock"
BUILDX = Path(__file__).parent / "fixtures/buildx"
BUILT = "sha256:" + "b" * 64


def buildx_output(name: str) -> list[str]:
    """The lines real buildx printed for ``tests/fixtures/buildx/<name>.rawjson``."""
    return (BUILDX / f"{name}.rawjson").read_text(encoding="utf-8").splitlines()


def image_doc(
    image_id: str, labels: Mapping[str, str] | None = None, size: int = 0
) -> dict[str, Any]:
    """An inspect document as the engine returns it, with the fields twinbuild reads."""
    return {"Id": image_id, "Size": size, "Config": {"Labels": dict(labels or {})}}


@dataclass
class FakeEngine:
    """An engine in memory. ``images`` maps a tag or an id to its inspect document."""

    images: dict[str, dict[str, Any]] = field(default_factory=dict)
    build_lines: list[str] = field(default_factory=lambda: buildx_output("good"))  # buildx says
    build_exit: int = 0  # buildx's exit status after the lines
    build_id: str = BUILT  # the image a build that exits 0 makes
    buildkit: bool = True  # False: an engine without BuildKit, refused before buildx runs
    import_error: Exception | None = None
    run_result: RunResult = field(default_factory=lambda: RunResult(exit_code=0, output=""))
    exec_result: RunResult = field(default_factory=lambda: RunResult(exit_code=0, output=""))
    host: str = HOST

    calls: list[str] = field(default_factory=list)  # method names, in order
    builds: list[BuildTarget] = field(default_factory=list)  # what each build was given
    tagged: list[tuple[str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    imported: list[tuple[bytes, dict[str, str], list[str]]] = field(default_factory=list)
    ran: list[tuple[str, list[str]]] = field(default_factory=list)
    execs: list[tuple[str, list[str]]] = field(default_factory=list)
    containers: dict[str, str] = field(default_factory=dict)  # running container -> image
    registry: dict[str, str] = field(default_factory=dict)  # pushed repository@digest -> image id
    pushed: list[str] = field(default_factory=list)
    closed: bool = False

    @property
    def docker_host(self) -> str:
        return self.host

    def add_image(self, image_id: str, labels: Mapping[str, str], *tags: str) -> None:
        doc = image_doc(image_id, labels)
        for ref in (image_id, *tags):
            self.images[ref] = doc

    def info(self) -> EngineInfo:
        self.calls.append("info")
        return EngineInfo(
            docker_host=self.host, server_version="26.1.5", api_version="1.45", os_type="linux",
            arch="x86_64", storage_driver="overlay2", builder_version="2" if self.buildkit else "1",
        )  # fmt: skip

    def build(
        self, target: BuildTarget, *, line: Callable[[str], None], mirror: str, say: Say
    ) -> BuildOutcome:
        self.calls.append("build")
        if not self.buildkit:
            old = {"Version": "18.06.3-ce", "ApiVersion": "1.38", "Os": "linux"}
            raise EngineError(buildkit_missing(self.host, old) or "")
        self.builds.append(target)
        for text in self.build_lines:
            line(text)
        if self.build_exit != 0:
            return BuildOutcome(exit_code=self.build_exit, image_id=None)
        doc = image_doc(self.build_id, target.labels)  # kept with its labels, tagged by buildx
        for ref in (self.build_id, *target.tags):
            self.images[ref] = doc
        return BuildOutcome(exit_code=0, image_id=self.build_id)

    def inspect_image(self, ref: str) -> Mapping[str, Any] | None:
        self.calls.append("inspect_image")
        return self.images.get(ref)

    def image_exists(self, ref: str) -> bool:
        return self.inspect_image(ref) is not None

    def image_labels(self, ref: str) -> Mapping[str, str]:
        found = self.inspect_image(ref)
        if found is None:
            raise EngineError(f"image {ref} is not in the engine at {self.host}")
        labels: Mapping[str, str] = found["Config"]["Labels"]
        return labels

    def images_by_label(
        self, key: str, value: str | None = None, *, intermediate: bool = False
    ) -> list[ImageSummary]:
        self.calls.append("images_by_label")
        found: dict[str, ImageSummary] = {}
        for doc in self.images.values():
            labels = doc["Config"]["Labels"]
            if key in labels and (value is None or labels[key] == value):
                tags = tuple(r for r, d in self.images.items() if d is doc and r != doc["Id"])
                found[doc["Id"]] = ImageSummary(
                    id=doc["Id"], tags=tags, labels=labels, size=doc.get("Size", 0)
                )
        return list(found.values())

    def import_rootfs(
        self,
        tar_path: Path,
        *,
        arch: Arch,
        labels: Mapping[str, str] | None = None,
        cmd: Sequence[str] = ("/bin/bash",),
    ) -> str:
        self.calls.append("import_rootfs")
        if self.import_error is not None:
            raise self.import_error
        self.imported.append((tar_path.read_bytes(), dict(labels or {}), [arch, *cmd]))
        image_id = f"sha256:{len(self.imported):064d}"
        self.images[image_id] = image_doc(image_id, labels, size=2**20)
        return image_id

    def tag(self, image: str, ref: str) -> None:
        self.calls.append("tag")
        if image not in self.images:
            raise EngineError(f"tag {image} as {ref}: No such image: {image}")
        self.tagged.append((image, ref))
        self.images[ref] = self.images[image]

    def remove_image(self, ref: str, *, force: bool = False, prune: bool = True) -> None:
        self.calls.append("remove_image")
        doc = self.images.get(ref)
        if doc is None:
            raise EngineError(f"remove image {ref}: No such image: {ref}")
        self.removed.append(ref)
        if ref != doc["Id"]:  # a tag: untag only
            del self.images[ref]
            return
        for name in [r for r, d in self.images.items() if d is doc]:
            del self.images[name]

    def push(self, ref: str) -> Pushed:
        """A registry in memory: the digest hashes the image id, a second push sends nothing."""
        self.calls.append("push")
        self.pushed.append(ref)
        image_id = str(self.images[ref]["Id"])
        digest = "sha256:" + hashlib.sha256(image_id.encode()).hexdigest()
        name = f"{ref.rpartition(':')[0]}@{digest}"
        sent = 0 if name in self.registry else 1
        self.registry[name] = image_id
        return Pushed(ref=name, digest=digest, layers_sent=sent, layers_present=1 - sent)

    def pull(self, ref: str) -> str:
        self.calls.append("pull")
        if ref not in self.registry:
            raise ConfigError(f"pull {ref}: the registry has no such image")
        self.images[ref] = self.images.get(self.registry[ref]) or image_doc(self.registry[ref])
        self.images.setdefault(self.registry[ref], self.images[ref])  # by id too, as an engine
        return self.registry[ref]

    def run_container(
        self,
        image: str,
        command: Sequence[str],
        *,
        network: Network = "none",
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        workdir: str | None = None,
        binds: Mapping[str, str] | None = None,
        timeout: int = 600,
    ) -> RunResult:
        self.calls.append("run_container")
        self._need(image)
        self.ran.append((image, list(command)))
        return self.run_result

    def start_container(
        self,
        image: str,
        *,
        network: Network = "none",
        command: Sequence[str] = ("sleep", "infinity"),
        gpus: GpuAccess | None = None,
    ) -> str:
        self.calls.append("start_container")
        self._need(image)
        cid = f"{len(self.containers) + 1:064x}"
        self.containers[cid] = image
        return cid

    def exec(self, container: str, command: Sequence[str], *, user: str | None = None) -> RunResult:
        self.calls.append("exec")
        if container not in self.containers:
            raise EngineError(f"exec {list(command)} in {container[:12]}: No such container")
        self.execs.append((container, list(command)))
        return self.exec_result

    def remove_container(self, container: str) -> None:
        self.calls.append("remove_container")
        self.containers.pop(container, None)

    def close(self) -> None:
        self.closed = True

    def _need(self, image: str) -> None:
        if image not in self.images:
            raise EngineError(f"{image}: No such image")


if TYPE_CHECKING:  # mypy: the fake is an EngineAPI, so the code under test gets one
    from twinbuild.engine.api import EngineAPI

    _checked: EngineAPI = FakeEngine()
