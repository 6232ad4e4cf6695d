"""The JSON spec the runner writes and the suite reads: what to check in one image, and where.

The runner knows the manifest, the recipe, the engine and the GPUs; the suite knows only this spec
and the testinfra host, so it runs the same against a container and against the local machine.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twinbuild.manifest.model import BandwidthFloor, ImageKey, ResolvedPin, Values

SCHEMA = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class PinCase:
    pin: ResolvedPin
    skip: str | None = None  # "not in local profile: NAME (reason)"


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvCase:
    key: str
    value: str  # as the recipe sets it, ARG defaults substituted; $VAR left for the base's value
    where: str  # "images/local/Dockerfile:13"


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseCase:
    expected: str  # pinned base digest (production) or the local base's image id
    labels: Mapping[str, str]
    layers: list[str]  # the image's RootFS layers
    base_layers: list[str] | None  # the base's RootFS layers when the engine has the base


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuCase:
    skip: str | None  # why GPU checks do not run; None when the container has the GPUs
    vendor: str  # "nvidia" | "amd"
    perf_binary: str | None  # the all-reduce perf binary (Variant.binaries), if any
    info: Mapping[str, Any] | None = None
    toolkit: str = ""  # variants.<v>.toolkit: the CUDA or ROCm release the image is built on
    archs: list[str] = field(default_factory=list)  # variants.<v>.gpu_archs
    kernel_modules: list[str] = field(default_factory=list)  # none on a bare host
    floors: list[BandwidthFloor] = field(default_factory=list)  # variants.<v>.all_reduce_floors


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteSpec:
    hostspec: str  # "docker://<container id>" or "local://"
    variant: str
    arch: str  # linux/amd64 | linux/arm64
    profile: str
    python: str
    manifest: str
    results: str  # where the suite writes its records
    pins: list[PinCase] = field(default_factory=list)
    env: list[EnvCase] = field(default_factory=list)
    env_skip: str | None = None
    binaries: list[str] = field(default_factory=list)
    binaries_skip: str | None = None
    imports: list[str] = field(default_factory=list)
    base: BaseCase | None = None
    base_skip: str | None = None
    gpu: GpuCase | None = None
    rerun_failed_once: bool = False
    #: The image's lock (pins/lock/<image>.toml) the closure check holds it to, or why none.
    lock: str | None = None
    lock_skip: str | None = None
    #: A local image's embedded base: its capture (in the cache), whose distributions the lock
    #: takes as the base's (``smoke/closure.py``, :func:`held_to`).
    base_capture: str | None = None

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, **dataclasses.asdict(self)}, indent=1, sort_keys=True)

    def write(self, path: Path) -> Path:
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> SuiteSpec:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.pop("schema", None) != SCHEMA:
            raise ValueError(f"{path}: not a schema {SCHEMA} smoke spec")
        base = data.pop("base")
        gpu = data.pop("gpu")
        return cls(
            pins=[PinCase(pin=_pin(c["pin"]), skip=c["skip"]) for c in data.pop("pins")],
            env=[EnvCase(**e) for e in data.pop("env")],
            base=BaseCase(**base) if base is not None else None,
            gpu=GpuCase(**{**gpu, "floors": [BandwidthFloor(**f) for f in gpu.get("floors", [])]})
            if gpu is not None
            else None,
            **data,
        )


def _pin(data: dict[str, Any]) -> ResolvedPin:
    return ResolvedPin(
        **{**data, "values": Values(**data["values"]), "image": ImageKey(**data["image"])}
    )
