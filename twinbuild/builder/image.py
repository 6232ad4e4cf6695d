"""Build one image (a variant on one architecture) from the manifest, with buildx on the engine
(``submit.run_build``, the one function every build goes through), or say it is up to date.

The order of work is what makes a build safe to interrupt:
0. refuse what cannot build here: an architecture this host runs only under QEMU when QEMU's
   interpreter is not registered, a production image whose base or download is not pinned yet;
1. render the manifest and hash every input; an image with that inputs hash is up to date;
2. take the per-image lock (a second build of the same image waits), then look again;
3. assemble the build context in a fresh folder (recipe, copied files, generated pins, wheels);
4. build, streaming progress and keeping the whole log;
5. only a complete build is tagged (buildx names the image when it exports it, last) and
   recorded; a failure or a signal tags nothing, so the image the tag pointed at before stays as
   it was.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from twinbuild.builder import build_record, context, guard
from twinbuild.builder.build_options import BuildOptions, BuildRequest
from twinbuild.builder.build_record import BaseRef, BuildRecord, SkippedPin
from twinbuild.builder.inputs import builder_settings, inputs_hash
from twinbuild.builder.labels import LABEL, image_labels
from twinbuild.builder.submit import INLINE_CACHE, run_build
from twinbuild.builder.wheelhouse import prefetch_wheels
from twinbuild.engine.api import BuildTarget, EngineAPI, Network
from twinbuild.errors import ConfigError, EngineError, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import Arch, ImageKey, PinManifest, Profile
from twinbuild.manifest.rendered import Rendered, check_mirrors, render
from twinbuild.util import process
from twinbuild.util.activity import Say
from twinbuild.util.paths import cache_root

REPOSITORY = "twinbuild/{variant}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildResult:
    image: ImageKey
    profile: Profile
    image_id: str
    tag: str
    inputs_hash: str
    manifest_digest: str
    up_to_date: bool
    seconds: float
    base: BaseRef
    skipped: tuple[SkippedPin, ...]
    python: str
    log: str | None

    def describe(self, *, verbose: bool = False) -> str:
        """One line, and one more naming how many pins the profile leaves out (each with -v)."""
        state = "up to date" if self.up_to_date else f"built in {self.seconds:.1f}s"
        lines = [f"{self.tag}: {state} ({self.image_id[:19]}, inputs {self.inputs_hash[:19]})"]
        if self.skipped and verbose:
            lines += [
                f"  not in {self.profile} profile: {s.pin} ({s.reason})" for s in self.skipped
            ]
        elif self.skipped:
            lines.append(
                f"  {len(self.skipped)} pins not in the {self.profile} profile (`twinbuild "
                f"render {self.image.variant} --arch {self.image.arch} --profile {self.profile}` "
                "lists them and why; -v here)"
            )
        return "\n".join(lines)

    def record(self) -> BuildRecord:
        """What the build record keeps of this result."""
        return BuildRecord(
            variant=self.image.variant, arch=self.image.arch, profile=self.profile,
            image_id=self.image_id, tag=self.tag,
            inputs_hash=self.inputs_hash, manifest_digest=self.manifest_digest, base=self.base,
            skipped=self.skipped, python=self.python, log=self.log,
        )  # fmt: skip


def image_tag(image: ImageKey, profile: Profile) -> str:
    """``twinbuild/cu13:local-arm64``: the tag of one image of a variant."""
    return f"{REPOSITORY.format(variant=image.variant)}:{profile}-{image.short}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedImage:
    """One image as its build will make it: what it receives, its inputs hash and its base."""

    key: ImageKey
    profile: Profile
    rendered: Rendered = field(repr=False)
    inputs_hash: str
    base: BaseRef

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def tag(self) -> str:
        return image_tag(self.key, self.profile)

    @property
    def skipped(self) -> tuple[SkippedPin, ...]:
        return tuple(SkippedPin(pin=p.name, reason=r) for p, r in self.rendered.skipped)

    @property
    def network(self) -> Network:
        """The RUN steps' network: none for the local profile (everything is in the context),
        the host's where a production recipe downloads."""
        return "none" if self.profile == "local" else "host"

    @property
    def python(self) -> str:
        return "/opt/venv/bin/python" if self.profile == "local" else "python3"

    def labels(
        self, manifest: PinManifest, root: Path, *, source: str | None, revision: str | None
    ) -> dict[str, str]:
        return image_labels(
            manifest, self.key, profile=self.profile, inputs_hash=self.inputs_hash,
            base=self.base, left_out=[s.pin for s in self.skipped], root=root, source=source,
            revision=revision,
        )  # fmt: skip

    def target(
        self,
        context_dir: Path,
        labels: dict[str, str],
        *,
        tags: tuple[str, ...],
        cache_from: tuple[str, ...] = (),
        cache_to: tuple[str, ...] = (),
    ) -> BuildTarget:
        """What buildx builds for this image from ``context_dir``: ``twinbuild build`` and every
        target of the bake file are made here."""
        return BuildTarget(
            context=context_dir, dockerfile=self.rendered.recipe.as_posix(),
            args={**self.rendered.args, **INLINE_CACHE}, labels=labels,
            platform=self.key.arch, target=self.rendered.target,
            network=self.network, tags=tags,
            cache_from=cache_from, cache_to=cache_to,
        )  # fmt: skip

    def result(
        self, manifest: PinManifest, image_id: str, *, fresh: bool, seconds: float, log: Path | None
    ) -> BuildResult:
        return BuildResult(
            image=self.key, profile=self.profile, image_id=image_id, tag=self.tag,
            inputs_hash=self.inputs_hash, manifest_digest=manifest.digest(), up_to_date=not fresh,
            seconds=seconds, base=self.base, skipped=self.skipped, python=self.python,
            log=str(log) if log else None,
        )  # fmt: skip


def buildable(manifest: PinManifest, image: ImageKey, profile: Profile) -> None:
    """Refuse (exit 2) what cannot build here, before anything is built or tagged: an
    architecture whose QEMU interpreter is missing, a production image not pinned yet."""
    from twinbuild.engine import binfmt

    binfmt.require(image.arch)
    if profile == "production":
        blockers = render(manifest, image, "production").blockers
        if blockers:
            raise ConfigError(f"{image}: cannot build the production image yet: {blockers[0]}")


def plan_image(
    manifest: PinManifest,
    engine: EngineAPI | None,
    image: ImageKey,
    options: BuildOptions,
    say: Say,
) -> PlannedImage:
    """Render and hash; for the local profile make sure the embedded base exists first (in
    ``engine``: only the local profile needs one here)."""
    if options.profile == "local":
        from twinbuild.engine.base import ensure_base

        if engine is None:
            raise EngineError("the local profile's base lives in an engine; none was given")
        local = manifest.local
        base = ensure_base(
            engine, suite=local.suite, mirror=local.mirror, packages=local.packages,
            arch=image.arch, cache=options.cache, say=say,
            fetch=_base_fetcher(engine, options.registry, say),
        )  # fmt: skip
        if base.built:
            say(base.describe())
        rendered = render(manifest, image, "local", local_base=base.tag, mirrors=options.mirrors)
        base_info = BaseRef(ref=base.tag, id=base.image_id)
    else:
        rendered = render(manifest, image, "production")
        spec = manifest.variant(image.variant).base
        base_info = BaseRef(ref=spec.ref, id=spec.digest)
    digest = inputs_hash(
        options.root, rendered, base_id=base_info.id, builder=builder_settings(rendered)
    )
    return PlannedImage(
        key=image, profile=options.profile, rendered=rendered, inputs_hash=digest, base=base_info
    )


def _cache_from(options: BuildOptions, image: ImageKey) -> tuple[str, ...]:
    if options.registry is None:
        return ()
    from twinbuild.engine.registry_names import cache_ref

    return (cache_ref(options.registry, image, options.profile),)


def _base_fetcher(
    engine: EngineAPI, registry: str | None, say: Say
) -> Callable[[str], bool] | None:
    """Pull the local base from the registry `twinbuild push` put it in, if it is there."""
    if registry is None:
        return None

    def fetch(tag: str) -> bool:
        from twinbuild.engine.registry_names import ci_ref

        remote = ci_ref(registry, tag)
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
    engine: EngineAPI, image: ImageKey, profile: Profile, digest: str
) -> tuple[str, bool] | None:
    """An image built from exactly these inputs: (its id, whether the tag already names it).

    The tag is asked first (one inspect); listing images by label scans every image.
    """
    wanted = {
        f"{LABEL}.inputs-hash": digest,
        f"{LABEL}.variant": image.variant,
        f"{LABEL}.arch": image.arch,
        f"{LABEL}.profile": profile,
    }
    tagged = engine.inspect_image(image_tag(image, profile))
    if tagged is not None:
        labels = (tagged.get("Config") or {}).get("Labels") or {}
        if all(labels.get(k) == v for k, v in wanted.items()):
            return str(tagged["Id"]), True
    for summary in engine.images_by_label(f"{LABEL}.inputs-hash", digest):
        if all(summary.labels.get(k) == v for k, v in wanted.items()):
            return summary.id, False
    return None


def _up_to_date(
    engine: EngineAPI, image: ImageKey, options: BuildOptions, digest: str
) -> tuple[str, bool] | None:
    """`find_up_to_date`, and unless ``options.adopt``, only what this checkout's record names."""
    found = find_up_to_date(engine, image, options.profile, digest)
    if found is None or options.adopt:
        return found
    recorded = BuildRecord.load(build_record.record_path(options.root, options.profile, image))
    if recorded is not None and recorded.image_id == found[0] and recorded.inputs_hash == digest:
        return found
    return None


def _reuse(engine: EngineAPI, found: tuple[str, bool], tag: str) -> str:
    image_id, tagged = found
    if not tagged:
        engine.tag(image_id, tag)
    return image_id


def build_image(
    manifest: PinManifest,
    engine: EngineAPI,
    image: ImageKey,
    options: BuildOptions,
    say: Say = print,
    *,
    prefetch: tuple[ImageKey, ...] = (),
) -> BuildResult:
    """Build (or find up to date) ``image``; see the module docstring. ``prefetch``: the images
    of this run, whose missing wheels the first local build fetches in one round."""
    start = time.monotonic()
    buildable(manifest, image, options.profile)
    planned = plan_image(manifest, engine, image, options, say)
    folder = build_record.folder(options.root, options.profile, image)

    def result(image_id: str, *, fresh: bool, log: Path | None) -> BuildResult:
        built = planned.result(
            manifest, image_id, fresh=fresh, seconds=time.monotonic() - start, log=log
        )
        build_record.save_build(folder / build_record.NAME, built.record())
        return built

    digest = planned.inputs_hash
    if not options.force and (found := _up_to_date(engine, image, options, digest)):
        return result(_reuse(engine, found, planned.tag), fresh=False, log=None)
    folder.mkdir(parents=True, exist_ok=True)
    with guard.lock(folder / "build.lock", planned.tag, options.lock_timeout, say):
        if not options.force and (found := _up_to_date(engine, image, options, digest)):
            return result(_reuse(engine, found, planned.tag), fresh=False, log=None)
        labels = planned.labels(
            manifest, options.root, source=options.source, revision=options.revision
        )
        log_path = folder / "build.log"
        with context.workspace(folder) as work, guard.signals():
            locked = None
            if options.profile == "local":
                from twinbuild.builder.locked import locked_pins  # here: a no-op never needs it

                # Every image's missing wheels in one parallel round: the next images' builds
                # then find them all cached instead of starting pip again.
                renders = [
                    render(manifest, i, "local", mirrors=options.mirrors)
                    for i in (prefetch or (image,))
                ]
                lockeds = {r.image: locked_pins(manifest, options.root, r) for r in renders}
                prefetch_wheels(renders, options.cache or cache_root(), say, locked=lockeds)
                locked = locked_pins(manifest, options.root, planned.rendered)
            context.assemble(options, planned.rendered, work, say, locked)
            target = planned.target(
                work, labels, tags=(planned.tag,), cache_from=_cache_from(options, image)
            )
            built = run_build(
                engine, target, mirror=manifest.local.mirror, what=str(image),
                label=f"{image.name}/{options.profile}", log_path=log_path, say=say,
            )  # fmt: skip
        inspected = engine.inspect_image(built)
        if inspected is None:
            raise EngineError(f"{engine.docker_host}: built image {built} vanished before tagging")
        return result(str(inspected["Id"]), fresh=True, log=log_path)


def wanted_images(
    manifest: PinManifest,
    variant: str | None,
    arch: Arch | None,
    profile: Profile,
    *,
    emulated: bool = True,
) -> list[ImageKey]:
    """The images a build (or push) is asked for: one variant's (on ``arch``, or all of its
    architectures), else the local profile's variants or, in production, every variant.
    ``emulated`` False (``twinbuild build`` without ``--all-archs``): without ``arch``, only the
    images of the architecture this host runs natively, none that would run under QEMU."""
    if variant is not None:
        if arch is not None:
            return [manifest.image(variant, arch)]
        found = manifest.images((manifest.variant(variant).name,))
    else:
        names = manifest.local_variants() if profile == "local" else tuple(manifest.variants)
        found = [i for i in manifest.images(names) if arch is None or i.arch == arch]
    if arch is None and not emulated:
        from twinbuild.engine.binfmt import host_arch

        here = host_arch()
        found = [i for i in found if i.arch == here]
    return found


def no_images(manifest: PinManifest, variant: str | None, arch: Arch | None) -> ConfigError:
    """What a build, smoke or push asked for nothing says (one line, exit 2)."""
    if arch is not None:
        return ConfigError(f"{manifest.path}: no variant builds {arch}; pass another --arch")
    from twinbuild.engine.binfmt import host_arch

    return ConfigError(
        f"{manifest.path}: {variant or 'no variant'} has no image of this host's architecture "
        f"({host_arch()}); pass --all-archs (under QEMU) or --arch"
    )


def build_images(request: BuildRequest, say: Say = print) -> list[BuildResult]:
    """Build (or find up to date) every image ``request`` names, ``request.jobs`` at a time."""
    from twinbuild.engine.client import connect
    from twinbuild.engine.registry import cache_registry

    manifest = load(request.manifest)  # a bad manifest fails before the engine is asked
    check_mirrors(manifest, request.options.mirrors)
    profile = request.options.profile
    wanted = wanted_images(
        manifest, request.variant, request.arch, profile, emulated=request.all_archs
    )
    if not wanted:
        raise no_images(manifest, request.variant, request.arch)
    # Asked for (--all-archs, --arch): QEMU installed and registered here, as root, or one line.
    from twinbuild.engine import binfmt

    binfmt.ensure_for((i.arch for i in wanted), say=say)
    for image in wanted:  # what cannot build refuses before any build starts
        buildable(manifest, image, profile)
    registry = None if request.no_registry_cache else cache_registry(request.registry)
    in_ci = os.environ.get("GITHUB_ACTIONS") == "true"  # a shared engine: adopt nothing there
    adopt = request.options.adopt and not in_ci
    options = dataclasses.replace(request.options, registry=registry, adopt=adopt)
    with connect() as engine:

        def one(image: ImageKey) -> BuildResult:
            return build_image(manifest, engine, image, options, say, prefetch=tuple(wanted))

        if request.jobs > 1 and len(wanted) > 1:
            from concurrent.futures import ThreadPoolExecutor  # not on the usual path: logging

            with ThreadPoolExecutor(max_workers=request.jobs) as pool:
                try:
                    return list(pool.map(one, wanted))
                except KeyboardInterrupt:  # reaches this thread alone: stop the workers' builds
                    process.stop_streams()
                    raise
        return [one(i) for i in wanted]
