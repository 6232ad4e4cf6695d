"""`twinbuild push`: push each built image to the registry and name it by digest.

The build record (``build/<profile>/<platform>/image.json``) says which image the build made; it
is tagged ``REGISTRY/twinbuild-ci/<platform>:<profile>`` and pushed through the engine. That is
the CI namespace: release tags live in ``REGISTRY/twinbuild/<platform>``, which only `twinbuild
release` writes. The tag is only a handle (and the build cache of the next build outside CI, see
``twinbuild.builder.image``): what is printed, recorded and handed to the GPU job is
``REPOSITORY@sha256:DIGEST``, which cannot move.
A digest the registry already holds is pushed again at the cost of one manifest: the engine sends
no layer the registry has.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from twinbuild.builder.record import BuildRecord, PushRecord, record_path
from twinbuild.engine.api import EngineAPI
from twinbuild.engine.registry import cache_ref, ci_ref
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import PLATFORMS, Platform, Profile
from twinbuild.util.activity import Say


@dataclass(frozen=True, slots=True, kw_only=True)
class PushOptions:
    """What `twinbuild push` was asked for."""

    root: Path = Path()
    platform: Platform | None = None  # None: every platform
    profile: Profile = "local"
    registry: str | None = None  # --registry; None: TWINBUILD_REGISTRY, else the private one
    github_output: Path | None = None  # $GITHUB_OUTPUT inside Actions


@dataclass(frozen=True, slots=True, kw_only=True)
class PushResult:
    platform: Platform
    ref: str  # REPOSITORY@sha256:DIGEST
    image_id: str
    layers_sent: int
    layers_present: int

    def describe(self) -> str:
        moved = (
            "nothing transferred: the registry had every layer"
            if self.layers_sent == 0
            else f"{self.layers_sent} layers sent, {self.layers_present} already there"
        )
        return f"{self.platform}: {self.ref} ({moved})"


def _record(path: Path) -> BuildRecord:
    data = BuildRecord.load(path)
    if data is None:
        raise ConfigError(
            f"{path}: no build record; run `twinbuild build` first (push sends what it built)"
        )
    return data


def _push_base(engine: EngineAPI, registry: str, data: BuildRecord, say: Say) -> None:
    """The local profile's base goes too: a fresh engine pulls it instead of running mmdebstrap,
    and only the very same base keeps the registry build cache of the layers above it."""
    ref = data.base.ref if data.base is not None else ""
    if not ref.startswith("twinbuild/base:") or engine.inspect_image(ref) is None:
        return
    remote = ci_ref(registry, ref)
    engine.tag(ref, remote)
    pushed = engine.push(remote)
    if pushed.layers_sent:
        say(f"base: {ref} -> {pushed.ref}")


def push_images(options: PushOptions, say: Say = print) -> list[PushResult]:
    """`twinbuild push`: resolve the registry, connect to the engine, push."""
    from twinbuild.engine.client import connect
    from twinbuild.engine.registry import resolve

    registry = resolve(options.registry)
    with connect() as engine:
        return push(engine, options, registry, say)


def push(
    engine: EngineAPI, options: PushOptions, registry: str, say: Say = print
) -> list[PushResult]:
    """Push each platform's built image; record and print ``REPOSITORY@sha256:DIGEST``."""
    results: list[PushResult] = []
    for platform in [options.platform] if options.platform else list(PLATFORMS):
        path = record_path(options.root, options.profile, platform)
        data = _record(path)
        image_id = data.image_id
        if engine.inspect_image(image_id) is None:
            raise ConfigError(
                f"{path}: names {image_id}, which the engine at {engine.docker_host} lacks; "
                "rebuild it"
            )
        _push_base(engine, registry, data, say)
        tag = cache_ref(registry, platform, options.profile)
        engine.tag(image_id, tag)
        pushed = engine.push(tag)
        result = PushResult(
            platform=platform, ref=pushed.ref, image_id=image_id,
            layers_sent=pushed.layers_sent, layers_present=pushed.layers_present,
        )  # fmt: skip
        # Recorded only after the registry confirmed the digest: a failed push records nothing.
        at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        data.with_push(PushRecord(ref=pushed.ref, registry=registry, at=at)).save(path)
        results.append(result)  # the caller prints them: data, not progress
    if options.github_output is not None:
        from twinbuild.util.github import append_outputs

        append_outputs(options.github_output, {f"{r.platform}-image": r.ref for r in results})
    return results
