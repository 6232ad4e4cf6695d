"""What the rest of twinbuild knows of a Docker engine: the ``EngineAPI`` protocol everything
types against (build, smoke, ship; the unit tests' one fake in tests/fake_engine.py implements
it), the records its answers come in, and how an image reference splits. No ``docker`` here:
``client.py`` is the boundary that implements the protocol with the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import Arch
from twinbuild.util.activity import Say

Network = Literal["none", "host"]
NETWORKS: tuple[Network, ...] = get_args(Network)
RUN_TIMEOUT_S = 600


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineInfo:
    """What the daemon is and can do."""

    docker_host: str
    server_version: str
    api_version: str
    os_type: str
    arch: str
    storage_driver: str
    builder_version: str  # "2" when the daemon builds with BuildKit by default, else "1"

    @property
    def buildkit_default(self) -> bool:
        return self.builder_version == "2"


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildTarget:
    """One image to build: what ``docker buildx build`` is given, and what a target of the file
    ``twinbuild bake`` writes says (``twinbuild.builder.bake``): one model feeds both."""

    context: Path
    dockerfile: str  # relative to the context
    args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    platform: Arch
    target: str | None = None  # the recipe's stage
    network: Network = "none"  # RUN steps' network: bake 0.13 has no key for it
    tags: tuple[str, ...] = ()
    cache_from: tuple[str, ...] = ()  # images (or type=registry,ref=...) BuildKit may reuse
    cache_to: tuple[str, ...] = ()  # for remote builders: the docker driver exports none


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildOutcome:
    """How one build ended: buildx's exit status and, when it succeeded, the image it made."""

    exit_code: int
    image_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageSummary:
    id: str
    tags: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    size: int = 0
    created: int = 0  # seconds since the epoch


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    exit_code: int
    output: str  # stdout and stderr interleaved

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuAccess:
    """How a container is given the host's GPUs, and what multi-GPU work needs beside them:
    NCCL/RCCL share memory between processes through /dev/shm (Docker's default is 64 MB, and
    NCCL's init fails in ncclShmOpen there) and pin host memory (memlock)."""

    device_requests: Sequence[Mapping[str, Any]] = ()
    devices: Sequence[str] = ()
    group_add: Sequence[str] = ()
    ipc_mode: str | None = None  # "host": the host's IPC namespace and /dev/shm
    shm_size: str | None = None  # else a /dev/shm of this size ("32g")
    memlock_unlimited: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Pushed:
    """What one push did: the digest the registry holds and how many layers had to travel."""

    ref: str  # repository@sha256:..., what `twinbuild push` prints
    digest: str
    layers_sent: int
    layers_present: int  # already in the registry: nothing transferred for them


@dataclass(frozen=True, slots=True, kw_only=True)
class Credentials:
    """What `docker login REGISTRY` stored for a registry; twinbuild's own registry requests
    (``twinbuild.ship``) use the engine's login rather than a second one."""

    username: str
    password: str


def registry_of(ref: str) -> str:
    """The registry host of an image reference (``docker.io`` for a bare name)."""
    first, sep, _ = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def split_tag(ref: str) -> tuple[str, str]:
    """``repository:tag`` -> (repository, tag); a port's colon is not a tag's."""
    repository, sep, tag = ref.rpartition(":")
    if not sep or not repository or "/" in tag:
        raise ConfigError(
            f"image reference {ref!r} needs a repository and a tag, e.g. twinbuild/base:1"
        )
    return repository, tag


class EngineAPI(Protocol):
    """Every engine operation the rest of twinbuild uses: build, smoke and bench type against this,
    and the unit tests' one fake (tests/fake_engine.py) implements it."""

    @property
    def docker_host(self) -> str: ...
    def info(self) -> EngineInfo: ...
    def build(
        self, target: BuildTarget, *, line: Callable[[str], None], mirror: str, say: Say
    ) -> BuildOutcome: ...
    def inspect_image(self, ref: str) -> Mapping[str, Any] | None: ...
    def image_exists(self, ref: str) -> bool: ...
    def image_labels(self, ref: str) -> Mapping[str, str]: ...
    def images_by_label(
        self, key: str, value: str | None = None, *, intermediate: bool = False
    ) -> list[ImageSummary]: ...
    def import_rootfs(
        self,
        tar_path: Path,
        *,
        arch: Arch,
        labels: Mapping[str, str] | None = None,
        cmd: Sequence[str] = ("/bin/bash",),
    ) -> str: ...
    def tag(self, image: str, ref: str) -> None: ...
    def remove_image(self, ref: str, *, force: bool = False, prune: bool = True) -> None: ...
    def push(self, ref: str) -> Pushed: ...
    def pull(self, ref: str) -> str: ...
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
        timeout: int = RUN_TIMEOUT_S,
    ) -> RunResult: ...
    def start_container(
        self,
        image: str,
        *,
        network: Network = "none",
        command: Sequence[str] = ("sleep", "infinity"),
        gpus: GpuAccess | None = None,
    ) -> str: ...
    def exec(
        self, container: str, command: Sequence[str], *, user: str | None = None
    ) -> RunResult: ...
    def remove_container(self, container: str) -> None: ...
    def close(self) -> None: ...
