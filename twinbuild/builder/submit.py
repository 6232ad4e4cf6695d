"""Send one build context to the engine: BuildKit where it has it, else the classic builder; the
stream of progress kept whole in the log; every way the build can end, one line that says so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from twinbuild.builder.build_options import BuilderChoice
from twinbuild.builder.context import tar_context
from twinbuild.builder.progress import BuildStream
from twinbuild.engine.api import Builder, BuilderUnavailable, EngineAPI
from twinbuild.errors import BuildFailed, DiskFull, EngineError, Interrupted
from twinbuild.manifest.rendered import Rendered
from twinbuild.util.activity import Say

LOG_TAIL = 20
# Every BuildKit image carries its cache metadata, so once pushed it is the registry build cache.
INLINE_CACHE = {"BUILDKIT_INLINE_CACHE": "1"}


def run_build(
    engine: EngineAPI,
    rendered: Rendered,
    context: Path,
    labels: Mapping[str, str],
    log_path: Path,
    say: Say,
    choice: BuilderChoice = "auto",
    *,
    cache_from: Sequence[str] = (),
) -> str:
    """Build ``context`` untagged; the image id, or BuildFailed/DiskFull/EngineError."""
    stream = BuildStream(log_path, say, label=f"{rendered.image.name}/{rendered.profile}")
    kinds: list[Builder] = ["buildkit", "classic"] if choice == "auto" else [choice]
    with tar_context(context) as tar:
        try:
            for kind in kinds:
                try:
                    chunks = engine.build(
                        tar, dockerfile=rendered.recipe.as_posix(),
                        buildargs={**rendered.args, **INLINE_CACHE} if kind == "buildkit"
                        else rendered.args,
                        labels=labels, target=rendered.target,
                        network="none" if rendered.profile == "local" else "host", builder=kind,
                        cache_from=cache_from if kind == "buildkit" else (),
                        platform=rendered.arch,
                    )  # fmt: skip
                    break
                except BuilderUnavailable:
                    if kind == kinds[-1]:
                        raise
                    say(f"[{stream.label}] no BuildKit in this engine: classic builder")
                    tar.seek(0)
            image_id = stream.consume(chunks)
        except EngineError:
            stream.close()
            raise
        except (BuildFailed, Interrupted):
            raise
        except Exception as exc:  # the SDK raises requests/docker errors when the engine goes away
            stream.close()
            raise EngineError(
                f"{engine.docker_host}: the engine went away during the build of "
                f"{rendered.image} ({type(exc).__name__}: {str(exc)[:160]}); nothing was tagged"
            ) from exc
    if image_id is None:
        tail = stream.tail(LOG_TAIL)
        if "no space left on device" in tail.lower():
            raise DiskFull(f"{rendered.image}: disk full during the build; see {log_path}")
        raise BuildFailed(
            f"{rendered.image}: build failed at {stream.failed_step or 'an unknown step'}; "
            f"nothing was tagged; whole log: {log_path}\n" + tail
        )
    return image_id
