"""Build one platform's image from the manifest, through the Engine API, or say it is up to date.

The order of work is what makes a build safe to interrupt:
1. render the manifest and hash every input; an image with that inputs hash is up to date;
2. take the per-image lock (a second build of the same image waits), then look again;
3. assemble the build context in a fresh folder (recipe, copied files, generated pins, wheels);
4. build with no tag, streaming progress and keeping the whole log;
5. only a complete build is tagged and recorded; a failure or a signal tags nothing, so the image
   the tag pointed at before stays as it was.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from twinbuild import __version__
from twinbuild.builder.inputs import input_files, inputs_hash
from twinbuild.builder.progress import BuildStream
from twinbuild.builder.wheelhouse import copy_mirrors, download_wheels, prefetch_wheels
from twinbuild.engine.client import Builder, BuilderUnavailable, EngineAPI
from twinbuild.engine.daemon import cache_root
from twinbuild.errors import (
    BuildFailed,
    ConfigError,
    DiskFull,
    EngineError,
    Interrupted,
    LockBusy,
    TwinbuildError,
)
from twinbuild.manifest.model import DEFAULT_PATH, PLATFORMS, Manifest, Platform, Profile, load
from twinbuild.manifest.render import GENERATED, Rendered, render
from twinbuild.util.atomic import write_atomic

LABEL = "org.twinbuild"
REPOSITORY = "twinbuild/{platform}"
LOG_TAIL = 20
Say = Callable[[str], None]
BuilderChoice = Literal["auto", "buildkit", "classic"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildOptions:
    root: Path
    profile: Profile = "local"
    force: bool = False
    mirrors: Mapping[str, str] = field(default_factory=dict)
    out_dir: Path | None = None  # default: <root>/build
    cache: Path | None = None  # wheel cache; default: the engine cache folder
    lock_timeout: float = 1800.0
    builder: BuilderChoice = "auto"  # BuildKit where the engine has it, else the classic builder
    # The registry build cache: the image `twinbuild push` last pushed for the platform (and the
    # local base) are pulled or used as BuildKit inline cache, so a fresh engine rebuilds only what
    # changed. None: no registry, everything builds here.
    registry: str | None = None
    source: str | None = None  # default: the manifest's, else the run's or the git remote's
    revision: str | None = None  # default: GITHUB_SHA in Actions, else the checkout's HEAD


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildRequest:
    """What ``twinbuild build`` was asked for: which manifest and platforms, how many at once."""

    manifest: Path = DEFAULT_PATH
    platform: Platform | None = None  # None: every platform
    jobs: int = 1  # platforms built at once
    verbose: bool = False  # the summary lists each pin the profile leaves out, not just how many
    registry: str | None = None  # --registry; None: TWINBUILD_REGISTRY, else the private one
    no_registry_cache: bool = False
    options: BuildOptions


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildResult:
    platform: Platform
    profile: Profile
    image_id: str
    tag: str
    inputs_hash: str
    manifest_digest: str
    up_to_date: bool
    seconds: float
    base: dict[str, str]
    skipped: list[dict[str, str]]
    python: str
    log: str | None

    def describe(self, *, verbose: bool = False) -> str:
        """One line, and one more naming how many pins the profile leaves out (each with -v)."""
        state = "up to date" if self.up_to_date else f"built in {self.seconds:.1f}s"
        lines = [f"{self.tag}: {state} ({self.image_id[:19]}, inputs {self.inputs_hash[:19]})"]
        if self.skipped and verbose:
            lines += [
                f"  not in {self.profile} profile: {s['pin']} ({s['reason']})" for s in self.skipped
            ]
        elif self.skipped:
            lines.append(
                f"  {len(self.skipped)} pins not in the {self.profile} profile (`twinbuild "
                f"render {self.platform} --profile {self.profile}` lists them and why; -v here)"
            )
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("up_to_date")
        data.pop("seconds")
        return data


def out_dir(options: BuildOptions, platform: Platform) -> Path:
    return (options.out_dir or options.root / "build") / options.profile / platform


def image_tag(platform: Platform, profile: Profile) -> str:
    return f"{REPOSITORY.format(platform=platform)}:{profile}"


def builder_settings(rendered: Rendered, choice: BuilderChoice = "auto") -> dict[str, str]:
    """The builder part of the inputs hash; the evidence gate recomputes hashes with it too."""
    settings = {"builder": "engine-api", "target": rendered.target or ""}
    if choice != "auto":
        settings["kind"] = choice
    return settings


def plan_inputs(
    manifest: Manifest, engine: EngineAPI, platform: Platform, options: BuildOptions, say: Say
) -> tuple[Rendered, str, dict[str, str]]:
    """Render and hash; for the local profile make sure the embedded base exists first."""
    if options.profile == "local":
        from twinbuild.engine.base import ensure_base

        local = manifest.local
        base = ensure_base(
            engine, suite=local.suite, mirror=local.mirror, packages=local.packages,
            cache=options.cache, say=say, fetch=_base_fetcher(engine, options.registry, say),
        )  # fmt: skip
        if base.built:
            say(base.describe())
        rendered = render(manifest, platform, "local", local_base=base.tag, mirrors=options.mirrors)
        base_info = {"ref": base.tag, "id": base.image_id}
    else:
        rendered = render(manifest, platform, "production")
        spec = manifest.platforms[platform].base
        base_info = {"ref": spec.ref, "id": spec.digest}
    builder = builder_settings(rendered, options.builder)
    digest = inputs_hash(options.root, rendered, base_id=base_info["id"], builder=builder)
    return rendered, digest, base_info


# Every BuildKit image carries its cache metadata, so once pushed it is the registry build cache.
_INLINE_CACHE = {"BUILDKIT_INLINE_CACHE": "1"}


def _cache_from(options: BuildOptions, platform: Platform) -> tuple[str, ...]:
    if options.registry is None:
        return ()
    from twinbuild.ship.push import cache_ref

    return (cache_ref(options.registry, platform, options.profile),)


def _base_fetcher(
    engine: EngineAPI, registry: str | None, say: Say
) -> Callable[[str], bool] | None:
    """Pull the local base from the registry `twinbuild push` put it in, if it is there."""
    if registry is None:
        return None

    def fetch(tag: str) -> bool:
        remote = f"{registry}/{tag}"
        try:
            engine.pull(remote)
        except TwinbuildError as exc:  # not pushed yet, or the registry is away: mmdebstrap
            say(f"base: not taken from the registry ({str(exc)[:160]}); making it here")
            return False
        engine.tag(remote, tag)
        say(f"base: {tag} pulled from {remote}")
        return True

    return fetch


def find_up_to_date(
    engine: EngineAPI, platform: Platform, profile: Profile, digest: str
) -> tuple[str, bool] | None:
    """An image built from exactly these inputs: (its id, whether the tag already names it).

    The tag is asked first (one inspect); listing images by label scans every image.
    """
    wanted = {
        f"{LABEL}.inputs-hash": digest,
        f"{LABEL}.platform": platform,
        f"{LABEL}.profile": profile,
    }
    tagged = engine.inspect_image(image_tag(platform, profile))
    if tagged is not None:
        labels = (tagged.get("Config") or {}).get("Labels") or {}
        if all(labels.get(k) == v for k, v in wanted.items()):
            return str(tagged["Id"]), True
    for image in engine.images_by_label(f"{LABEL}.inputs-hash", digest):
        if all(image.labels.get(k) == v for k, v in wanted.items()):
            return image.id, False
    return None


def _reuse(engine: EngineAPI, found: tuple[str, bool], tag: str) -> str:
    image_id, tagged = found
    if not tagged:
        engine.tag(image_id, tag)
    return image_id


def build_image(
    manifest: Manifest,
    engine: EngineAPI,
    platform: Platform,
    options: BuildOptions,
    say: Say = print,
) -> BuildResult:
    """Build (or find up to date) the image of ``platform``; see the module docstring."""
    start = time.monotonic()
    rendered, digest, base_info = plan_inputs(manifest, engine, platform, options, say)
    tag = image_tag(platform, options.profile)
    skipped = [{"pin": p.name, "reason": r} for p, r in rendered.skipped]
    python = "/opt/venv/bin/python" if options.profile == "local" else "python3"

    def result(image_id: str, *, fresh: bool, log: Path | None) -> BuildResult:
        built = BuildResult(
            platform=platform, profile=options.profile, image_id=image_id, tag=tag,
            inputs_hash=digest, manifest_digest=manifest.digest(), up_to_date=not fresh,
            seconds=time.monotonic() - start, base=base_info, skipped=skipped, python=python,
            log=str(log) if log else None,
        )  # fmt: skip
        _write_record(out_dir(options, platform) / "image.json", built.record())
        return built

    if not options.force and (found := find_up_to_date(engine, platform, options.profile, digest)):
        return result(_reuse(engine, found, tag), fresh=False, log=None)
    folder = out_dir(options, platform)
    folder.mkdir(parents=True, exist_ok=True)
    with _lock(folder / "build.lock", tag, options.lock_timeout, say):
        if not options.force and (
            found := find_up_to_date(engine, platform, options.profile, digest)
        ):
            return result(_reuse(engine, found, tag), fresh=False, log=None)
        labels = _labels(manifest, platform, options, digest, base_info)
        log_path = folder / "build.log"
        with _context(folder) as context, _signals():
            if options.profile == "local":
                # Every platform's missing wheels in one parallel round: the other platform's
                # build (usually next) then finds them all cached instead of starting pip again.
                renders = [render(manifest, p, "local", mirrors=options.mirrors) for p in PLATFORMS]
                prefetch_wheels(renders, options.cache or cache_root(), say)
            _assemble(options, rendered, context, say)
            built = _run_build(
                engine, rendered, context, labels, log_path, say, options.builder,
                cache_from=_cache_from(options, platform),
            )  # fmt: skip
        inspected = engine.inspect_image(built)
        if inspected is None:
            raise EngineError(f"{engine.docker_host}: built image {built} vanished before tagging")
        image_id = str(inspected["Id"])
        engine.tag(image_id, tag)  # only now: a failed or interrupted build never gets here
        return result(image_id, fresh=True, log=log_path)


def build_images(request: BuildRequest, say: Say = print) -> list[BuildResult]:
    """Build (or find up to date) every platform ``request`` names, ``request.jobs`` at a time."""
    from twinbuild.engine.client import connect
    from twinbuild.engine.registry import cache_registry

    manifest = load(request.manifest)  # a bad manifest fails before the engine is asked
    wanted = [request.platform] if request.platform else list(PLATFORMS)
    registry = None if request.no_registry_cache else cache_registry(request.registry)
    options = dataclasses.replace(request.options, registry=registry)
    with connect() as engine:

        def one(platform: Platform) -> BuildResult:
            return build_image(manifest, engine, platform, options, say)

        if request.jobs > 1 and len(wanted) > 1:
            from concurrent.futures import ThreadPoolExecutor  # not on the usual path: logging

            with ThreadPoolExecutor(max_workers=request.jobs) as pool:
                return list(pool.map(one, wanted))
        return [one(p) for p in wanted]


def _labels(
    manifest: Manifest,
    platform: Platform,
    options: BuildOptions,
    digest: str,
    base_info: Mapping[str, str],
) -> dict[str, str]:
    oci = "org.opencontainers.image"
    labels = {
        f"{LABEL}.inputs-hash": digest,
        f"{LABEL}.manifest-hash": manifest.digest(),
        f"{LABEL}.platform-manifest-hash": manifest.platform_digest(platform, options.profile),
        f"{LABEL}.platform": platform,
        f"{LABEL}.profile": options.profile,
        f"{LABEL}.base-digest": base_info["id"],
        f"{LABEL}.base-ref": base_info["ref"],
        f"{LABEL}.version": __version__,
        f"{oci}.title": f"twinbuild {platform} ({options.profile})",
        f"{oci}.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        f"{oci}.base.name": base_info["ref"],
        f"{oci}.base.digest": base_info["id"],
    }
    # Asked only here, when something is built: the no-op decision runs no git.
    from twinbuild.builder import provenance

    found = {
        "revision": options.revision or provenance.revision(options.root),
        "source": options.source or provenance.source(options.root, declared=manifest.source),
    }
    labels.update({f"{oci}.{key}": value for key, value in found.items() if value})
    return labels


@contextmanager
def _lock(path: Path, tag: str, timeout: float, say: Say) -> Iterator[None]:
    import filelock  # here, not at the top: an up-to-date image never takes the lock

    lock = filelock.FileLock(path)
    try:
        lock.acquire(timeout=0.1)
    except filelock.Timeout:
        say(f"{tag}: another build of this image is running; waiting for it ({path})")
        try:
            lock.acquire(timeout=timeout)
        except filelock.Timeout:
            raise LockBusy(
                f"{tag}: still locked by another build after {timeout:.0f}s ({path}); "
                "wait for it or stop it"
            ) from None
    try:
        yield
    finally:
        lock.release()


@contextmanager
def _context(folder: Path) -> Iterator[Path]:
    work = Path(tempfile.mkdtemp(prefix="context-", dir=folder))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C: the build stops and nothing is tagged."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(f"stopped by {signal.Signals(signum).name}; nothing was tagged")

    if not _main_thread():
        yield
        return
    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _assemble(options: BuildOptions, rendered: Rendered, context: Path, say: Say) -> None:
    for entry in input_files(options.root, rendered.platform, rendered.profile):
        dest = context / entry.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(options.root / entry.path, dest)
    for name, body in rendered.files.items():
        path = context / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    (context / GENERATED / "mirrors").mkdir(parents=True, exist_ok=True)
    if rendered.profile == "local":
        cache = options.cache or cache_root()
        counts = download_wheels(rendered, context, cache, say)
        if counts:
            say(f"wheelhouse: {sum(counts.values())} pins in {len(counts)} layers")
        copy_mirrors(rendered, context, options.mirrors)


def _tar_context(context: Path) -> tempfile._TemporaryFileWrapper[bytes]:
    handle = tempfile.NamedTemporaryFile(suffix=".tar")  # noqa: SIM115 (closed by the caller)
    with tarfile.open(fileobj=handle, mode="w") as tar:
        for path in sorted(context.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(context).as_posix())
            info.mtime = 0  # the engine's cache keys must not depend on when we copied
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            # Git keeps one mode bit; the umask of a checkout must not change the image's bytes.
            info.mode = 0o755 if path.is_dir() or info.mode & 0o100 else 0o644
            if path.is_file():
                with path.open("rb") as data:
                    tar.addfile(info, data)
            else:
                tar.addfile(info)
    handle.seek(0)
    return handle


def _run_build(
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
    stream = BuildStream(log_path, say, label=f"{rendered.platform}/{rendered.profile}")
    kinds: list[Builder] = ["buildkit", "classic"] if choice == "auto" else [choice]
    with _tar_context(context) as tar:
        try:
            for kind in kinds:
                try:
                    chunks = engine.build(
                        tar, dockerfile=rendered.recipe.as_posix(),
                        buildargs={**rendered.args, **_INLINE_CACHE} if kind == "buildkit"
                        else rendered.args,
                        labels=labels, target=rendered.target,
                        network="none" if rendered.profile == "local" else "host", builder=kind,
                        cache_from=cache_from if kind == "buildkit" else (),
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
                f"{rendered.platform} ({type(exc).__name__}: {str(exc)[:160]}); nothing was tagged"
            ) from exc
    if image_id is None:
        tail = stream.tail(LOG_TAIL)
        if "no space left on device" in tail.lower():
            raise DiskFull(f"{rendered.platform}: disk full during the build; see {log_path}")
        raise BuildFailed(
            f"{rendered.platform}: build failed at {stream.failed_step or 'an unknown step'}; "
            f"nothing was tagged; whole log: {log_path}\n" + tail
        )
    return image_id


def _write_record(path: Path, data: Mapping[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    try:
        if path.read_text() == text:
            return  # the no-op build: the record already says this (and fsync costs it 10 ms)
    except OSError:
        pass
    write_atomic(path, text)


def record_path(root: Path, profile: Profile, platform: Platform) -> Path:
    """Where ``twinbuild build`` (default out dir) records the image it made."""
    return root / "build" / profile / platform / "image.json"


def read_record(path: Path) -> dict[str, Any] | None:
    """The build record at ``path``; None when there is none, ConfigError when it is unusable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable build record ({exc}); rebuild the image") from exc
    if not isinstance(data, dict) or not str(data.get("image_id", "")).startswith("sha256:"):
        raise ConfigError(f"{path}: no image_id in the build record; rebuild the image")
    return data
