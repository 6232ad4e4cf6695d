"""``twinbuild bake --build``: every target of the bake file, built by buildx on the engine.

buildx resolves the file first (``docker buildx bake --print``: the real front end reads what
twinbuild wrote), then each resolved target is built with ``docker buildx build`` from exactly
that definition, through buildx's ``docker`` driver on the engine ``DOCKER_HOST`` names. Why not
``bake`` itself: with the engine's bridge off (the private engine runs ``--bridge=none``) a RUN
step needs a network mode, which buildx 0.13's bake cannot set (``network`` is no bake key
there) and the engine's built-in Dockerfile frontend cannot either (no ``RUN --network``), while
``buildx build --network none`` can. The docker driver exports no registry cache, so
``cache-to`` is left to remote builders (the file keeps it).

Each image built is recorded and tagged as ``twinbuild build`` records and tags it, with the
same labels (the bake file's), so ``twinbuild smoke`` and ``twinbuild push`` take it as they
take a build's.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from twinbuild.builder import build_record, guard
from twinbuild.builder.bake import BakeResult, Image
from twinbuild.builder.build_record import SkippedPin
from twinbuild.builder.image import BuildResult, _save_record, image_tag
from twinbuild.engine.api import EngineAPI
from twinbuild.errors import BuildFailed, ConfigError, EngineError
from twinbuild.manifest.model import PinManifest
from twinbuild.util.activity import Say, step
from twinbuild.util.paths import cache_root

LOG_TAIL = 20
PRINT_TIMEOUT_S = 120
BUILD_TIMEOUT_S = 6 * 3600
#: What a target may say, and what buildx build takes for it (``context`` comes last).
_LIST_FLAGS = {"tags": "--tag", "cache-from": "--cache-from"}
_KNOWN = {
    "context", "dockerfile", "args", "labels", "platforms", "tags", "target", "cache-from",
    "cache-to",
}  # fmt: skip


def buildx_env(docker_host: str) -> dict[str, str]:
    """The docker CLI's environment: the engine, and buildx's state under the cache."""
    return {
        **os.environ, "DOCKER_HOST": docker_host,
        "BUILDX_CONFIG": str(cache_root() / "buildx-config"),
    }  # fmt: skip


def resolve(docker: str, bake_file: Path, root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """``docker buildx bake --print -f FILE``: the file as buildx reads it."""
    proc = subprocess.run(
        [docker, "buildx", "bake", "--print", "-f", str(bake_file)],
        cwd=root, env=dict(env), capture_output=True, text=True, timeout=PRINT_TIMEOUT_S,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise ConfigError(f"{bake_file}: docker buildx bake --print refused it: {tail}")
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise EngineError(f"docker buildx bake --print: not JSON: {proc.stdout[:200]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("target"), dict):
        raise EngineError("docker buildx bake --print: no targets in its answer")
    return doc


def build_argv(docker: str, target: Mapping[str, Any], *, network: str, iidfile: Path) -> list[str]:
    """``docker buildx build`` for one resolved target: every key of it, nothing else."""
    unknown = set(target) - _KNOWN
    if unknown:
        raise ConfigError(
            f"bake target has keys buildx build is not given here: {', '.join(sorted(unknown))}"
        )
    context = str(target["context"])
    dockerfile = str(target.get("dockerfile", "Dockerfile"))
    if not Path(dockerfile).is_absolute():  # bake reads it relative to the context; build here
        dockerfile = (Path(context) / dockerfile).as_posix()
    argv = [
        docker, "buildx", "build", "--progress", "plain", "--load", "--network", network,
        "--iidfile", str(iidfile), "--file", dockerfile,
    ]  # fmt: skip
    for name, value in sorted(target.get("args", {}).items()):
        argv += ["--build-arg", f"{name}={value}"]
    for name, value in sorted(target.get("labels", {}).items()):
        argv += ["--label", f"{name}={value}"]
    if target.get("platforms"):
        argv += ["--platform", ",".join(target["platforms"])]
    if target.get("target"):
        argv += ["--target", str(target["target"])]
    for key, flag in _LIST_FLAGS.items():
        for item in target.get(key, []):
            argv += [flag, str(item)]
    return [*argv, context]


def build_baked(
    result: BakeResult,
    manifest: PinManifest,
    root: Path,
    *,
    engine: EngineAPI,
    say: Say,
) -> list[BuildResult]:
    """Resolve the bake file with buildx and build each of its targets; see the module doc."""
    from twinbuild.engine.buildx import ensure_buildx

    buildx = ensure_buildx(mirror=manifest.local.mirror, say=say)
    if buildx.installed:
        say(buildx.describe())
    env = buildx_env(engine.docker_host)
    resolved = resolve(buildx.docker, result.out, root, env)
    by_target = {name: image for image in result.images for name in image.targets()}
    names = resolved.get("group", {}).get("default", {}).get("targets") or list(resolved["target"])
    built: list[BuildResult] = []
    for name in names:
        image = by_target.get(name)
        if image is None:
            raise ConfigError(f"{result.out}: buildx resolves a target {name!r} bake did not write")
        built.append(
            _build_target(name, resolved["target"][name], image, manifest, root, buildx.docker,
                          env=env, engine=engine, say=say)
        )  # fmt: skip
    return built


def _build_target(
    name: str,
    target: Mapping[str, Any],
    image: Image,
    manifest: PinManifest,
    root: Path,
    docker: str,
    *,
    env: Mapping[str, str],
    engine: EngineAPI,
    say: Say,
) -> BuildResult:
    start = time.monotonic()
    folder = build_record.folder(root, image.profile, image.key)
    folder.mkdir(parents=True, exist_ok=True)
    tag = image_tag(image.key, image.profile)
    if target.get("cache-to"):
        say(f"[{name}] cache-to left out: the docker driver exports no registry cache")
    target = {k: v for k, v in target.items() if k != "cache-to"}
    network = "none" if image.profile == "local" else "host"
    log = folder / "bake.log"
    with (
        guard.lock(folder / "build.lock", tag, 1800.0, say),
        guard.signals(),
        tempfile.TemporaryDirectory(dir=folder) as work,
    ):
        iidfile = Path(work) / "iid"
        argv = build_argv(docker, target, network=network, iidfile=iidfile)
        with step(f"[{name}] docker buildx build", say):
            _run(argv, root, env, log, name)
        image_id = iidfile.read_text(encoding="utf-8").strip()
    inspected = engine.inspect_image(image_id)
    if inspected is None:
        raise EngineError(f"{engine.docker_host}: buildx built {image_id}, the engine lacks it")
    image_id = str(inspected["Id"])
    engine.tag(image_id, tag)
    skipped = tuple(SkippedPin(pin=p.name, reason=r) for p, r in image.rendered.skipped)
    made = BuildResult(
        image=image.key, profile=image.profile, image_id=image_id, tag=tag,
        inputs_hash=image.inputs_hash, manifest_digest=manifest.digest(), up_to_date=False,
        seconds=time.monotonic() - start, base=image.base, skipped=skipped,
        python="/opt/venv/bin/python" if image.profile == "local" else "python3", log=str(log),
    )  # fmt: skip
    _save_record(folder / build_record.NAME, made.record())
    return made


def _run(argv: Sequence[str], root: Path, env: Mapping[str, str], log: Path, name: str) -> None:
    with log.open("w", encoding="utf-8") as out:
        try:
            proc = subprocess.run(
                list(argv), cwd=root, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                timeout=BUILD_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except FileNotFoundError:
            raise EngineError(f"{argv[0]}: not found") from None
    if proc.returncode != 0:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        tail = "\n".join(lines[-LOG_TAIL:])
        raise BuildFailed(
            f"[{name}] docker buildx build failed (exit {proc.returncode}); nothing was tagged; "
            f"whole log: {log}\n{tail}"
        )
