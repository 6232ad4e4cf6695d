"""``twinbuild bake --build``: every target of the bake file, built through the one build function.

buildx resolves the file first (``docker buildx bake --print``: the real front end reads what
twinbuild wrote), then each resolved target, read back as a
:class:`~twinbuild.engine.api.BuildTarget` (``bake_target.from_bake``), is built by
``submit.run_build``, as ``twinbuild build`` builds. Why not ``bake`` itself: with the engine's
bridge off (the private engine runs ``--bridge=none``) a RUN step needs a network mode, which
buildx 0.13's bake cannot set (``network`` is no bake key there), while ``buildx build --network
none`` can. The docker driver exports no registry cache, so ``cache-to`` is left to remote
builders (the file keeps it).

Each image built is recorded as ``twinbuild build`` records it, so ``twinbuild smoke`` and
``twinbuild push`` take it as they take a build's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twinbuild.builder import build_record, guard
from twinbuild.builder.bake_target import from_bake
from twinbuild.builder.image import BuildResult, PlannedImage
from twinbuild.builder.submit import run_build
from twinbuild.engine.api import EngineAPI
from twinbuild.engine.buildx_build import buildx_env, docker_cli
from twinbuild.errors import ConfigError, EngineError
from twinbuild.manifest.model import PinManifest
from twinbuild.util import process
from twinbuild.util.activity import Say

PRINT_TIMEOUT_S = 120


def resolve(docker: str, bake_file: Path, root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """``docker buildx bake --print -f FILE``: the file as buildx reads it."""
    proc = process.run(
        [docker, "buildx", "bake", "--print", "-f", str(bake_file)],
        cwd=root, env=env, timeout=PRINT_TIMEOUT_S,
    )  # fmt: skip
    if proc.code != 0:
        tail = " | ".join(proc.err.strip().splitlines()[-3:])
        raise ConfigError(f"{bake_file}: docker buildx bake --print refused it: {tail}")
    try:
        doc = json.loads(proc.out)
    except ValueError:
        raise EngineError(f"docker buildx bake --print: not JSON: {proc.out[:200]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("target"), dict):
        raise EngineError("docker buildx bake --print: no targets in its answer")
    return doc


def build_baked(
    bake_file: Path,
    planned: Mapping[str, PlannedImage],
    manifest: PinManifest,
    root: Path,
    *,
    engine: EngineAPI,
    say: Say,
) -> list[BuildResult]:
    """Resolve ``bake_file`` with buildx and build each of its targets (``planned``: target name
    -> the image bake wrote it for); see the module doc."""
    resolved = resolve(
        docker_cli(manifest.local.mirror, say), bake_file, root, buildx_env(engine.docker_host)
    )
    names = resolved.get("group", {}).get("default", {}).get("targets") or list(resolved["target"])
    built: list[BuildResult] = []
    for name in names:
        image = planned.get(name)
        if image is None:
            raise ConfigError(f"{bake_file}: buildx resolves a target {name!r} bake did not write")
        built.append(
            _build_target(name, resolved["target"][name], image, manifest, root,
                          engine=engine, say=say)
        )  # fmt: skip
    return built


def _build_target(
    name: str,
    entry: Mapping[str, Any],
    image: PlannedImage,
    manifest: PinManifest,
    root: Path,
    *,
    engine: EngineAPI,
    say: Say,
) -> BuildResult:
    start = time.monotonic()
    folder = build_record.folder(root, image.profile, image.key)
    folder.mkdir(parents=True, exist_ok=True)
    if entry.get("cache-to"):
        say(f"[{name}] cache-to left out: the docker driver exports no registry cache")
    target = from_bake(name, entry, root, image.network)
    log = folder / "build.log"
    with guard.lock(folder / "build.lock", image.tag, 1800.0, say), guard.signals():
        image_id = run_build(
            engine, target, mirror=manifest.local.mirror, what=str(image.key), label=name,
            log_path=log, say=say,
        )  # fmt: skip
    inspected = engine.inspect_image(image_id)
    if inspected is None:
        raise EngineError(f"{engine.docker_host}: buildx built {image_id}, the engine lacks it")
    if image.tag not in target.tags:  # a --repository file: build's own tag names it too
        engine.tag(str(inspected["Id"]), image.tag)
    made = image.result(
        manifest, str(inspected["Id"]), fresh=True, seconds=time.monotonic() - start, log=log
    )
    build_record.save_build(folder / build_record.NAME, made.record())
    return made
