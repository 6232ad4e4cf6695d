"""``docker buildx build``: the one way an image is built, on the engine ``DOCKER_HOST`` names.

buildx's ``docker`` driver hands the build to the engine's own BuildKit, so the image lands in
the engine's image store with no export step. Its progress comes as ``--progress=rawjson``:
BuildKit's solve status (vertexes, statuses, logs) as indented JSON objects on stderr, one after
another, with buildx's own closing ``ERROR: ...`` line as plain text
(:mod:`twinbuild.builder.progress` reads it). The image id comes from ``--iidfile``. Nothing is
tagged until the whole build succeeded: buildx names the image only when it exports it, last.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from twinbuild.engine.api import BuildOutcome, BuildTarget
from twinbuild.engine.buildx import ensure_buildx
from twinbuild.errors import EngineError
from twinbuild.util import process
from twinbuild.util.activity import Say
from twinbuild.util.paths import cache_root

#: Engine API 1.39 is Docker 18.09, the first engine with BuildKit (buildx's docker driver).
BUILDKIT_API = (1, 39)
STOP_GRACE_S = 10

_found: dict[str, str] = {}
_finding = threading.Lock()


def docker_cli(mirror: str, say: Say) -> str:
    """The docker CLI with buildx (installed from the Debian ``mirror`` where missing), asked once
    a process and only when something is built: the up-to-date decision runs no docker CLI."""
    with _finding:
        if mirror not in _found:
            buildx = ensure_buildx(mirror=mirror, say=say)
            if buildx.installed:
                say(buildx.describe())
            _found[mirror] = buildx.docker
        return _found[mirror]


def buildx_env(docker_host: str) -> dict[str, str]:
    """The docker CLI's environment: the engine, and buildx's own state under the cache."""
    return {
        **os.environ, "DOCKER_HOST": docker_host,
        "BUILDX_CONFIG": str(cache_root() / "buildx-config"),
    }  # fmt: skip


def build_argv(docker: str, target: BuildTarget, *, iidfile: Path) -> list[str]:
    """``docker buildx build`` for ``target``: every field of it, nothing else."""
    context = target.context.as_posix()
    dockerfile = (target.context / target.dockerfile).as_posix()
    argv = [
        docker, "buildx", "build", "--progress", "rawjson", "--network", target.network,
        "--iidfile", str(iidfile), "--file", dockerfile, "--platform", target.platform,
    ]  # fmt: skip
    for name, value in sorted(target.args.items()):
        argv += ["--build-arg", f"{name}={value}"]
    for name, value in sorted(target.labels.items()):
        argv += ["--label", f"{name}={value}"]
    if target.target:
        argv += ["--target", target.target]
    for tag in target.tags:
        argv += ["--tag", tag]
    for cache in target.cache_from:
        argv += ["--cache-from", cache]
    return [*argv, context]


def buildkit_missing(docker_host: str, version: Mapping[str, Any]) -> str | None:
    """The one line that says an engine (its ``GET /version`` answer) has no BuildKit, or None."""
    api = str(version.get("ApiVersion", ""))
    try:
        found = tuple(int(part) for part in api.split(".")[:2])
    except ValueError:
        found = ()
    if len(found) == 2 and found >= BUILDKIT_API and version.get("Os", "linux") == "linux":
        return None
    return (
        f"{docker_host}: the engine has no BuildKit (Docker {version.get('Version', '?')}, API "
        f"{api or '?'}, {version.get('Os', '?')}); twinbuild builds with buildx, which needs a "
        "Linux engine of Docker 18.09 or newer: `twinbuild engine up` starts Debian's docker.io"
    )


def run(
    docker: str, docker_host: str, target: BuildTarget, line: Callable[[str], None]
) -> BuildOutcome:
    """Run the build; hand each line buildx prints to ``line`` as it comes. An exception from
    ``line`` (Ctrl-C, SIGTERM) stops buildx, which cancels the build: nothing is tagged."""
    with tempfile.TemporaryDirectory(prefix="buildx-") as work:
        iidfile = Path(work) / "iid"
        try:
            code = process.stream(
                build_argv(docker, target, iidfile=iidfile), on_line=line,
                stop_grace=STOP_GRACE_S, env=buildx_env(docker_host),
            )  # fmt: skip
        except process.CommandMissing as exc:
            raise EngineError(f"{docker}: cannot run buildx ({exc})") from None
        built = iidfile.read_text(encoding="utf-8").strip() if iidfile.is_file() else ""
    return BuildOutcome(exit_code=code, image_id=built if code == 0 and built else None)
