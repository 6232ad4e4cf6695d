"""Build one image (a variant on one architecture) from the manifest, through the Engine API, or
say it is up to date.

The order of work is what makes a build safe to interrupt:
0. refuse what cannot build here: an architecture this host runs only under QEMU when QEMU's
   interpreter is not registered, a production image whose base or download is not pinned yet;
1. render the manifest and hash every input; an image with that inputs hash is up to date;
2. take the per-image lock (a second build of the same image waits), then look again;
3. assemble the build context in a fresh folder (recipe, copied files, generated pins, wheels);
4. build with no tag, streaming progress and keeping the whole log;
5. only a complete build is tagged and recorded; a failure or a signal tags nothing, so the image
   the tag pointed at before stays as it was.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from twinbuild import __version__
from twinbuild.builder import build_record, context, guard
from twinbuild.builder.build_options import BuildOptions, BuildRequest
from twinbuild.builder.build_record import BaseRef, BuildRecord, SkippedPin
from twinbuild.builder.inputs import builder_settings, inputs_hash
from twinbuild.builder.submit import run_build
from twinbuild.builder.wheelhouse import prefetch_wheels
from twinbuild.engine.api import EngineAPI
from twinbuild.errors import ConfigError, EngineError, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import Arch, ImageKey, PinManifest, Profile
from twinbuild.manifest.rendered import Rendered, check_mirrors, render
from twinbuild.util.activity import Say
from twinbuild.util.paths import cache_root

LABEL = "org.twinbuild"
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


def buildable(manifest: PinManifest, image: ImageKey, profile: Profile) -> None:
    """Refuse (exit 2) what cannot build here, before anything is built or tagged: an
    architecture whose QEMU interpreter is missing, a production image not pinned yet."""
    from twinbuild.engine import binfmt

    binfmt.require(image.arch)
    if profile == "production":
        blockers = render(manifest, image, "production").blockers
        if blockers:
            raise ConfigError(f"{image}: cannot build the production image yet: {blockers[0]}")


def plan_inputs(
    manifest: PinManifest,
    engine: EngineAPI | None,
    image: ImageKey,
    options: BuildOptions,
    say: Say,
) -> tuple[Rendered, str, BaseRef]:
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
    builder = builder_settings(rendered, options.builder)
    digest = inputs_hash(options.root, rendered, base_id=base_info.id, builder=builder)
    return rendered, digest, base_info


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
    rendered, digest, base_info = plan_inputs(manifest, engine, image, options, say)
    tag = image_tag(image, options.profile)
    skipped = tuple(SkippedPin(pin=p.name, reason=r) for p, r in rendered.skipped)
    python = "/opt/venv/bin/python" if options.profile == "local" else "python3"
    folder = build_record.folder(options.root, options.profile, image)

    def result(image_id: str, *, fresh: bool, log: Path | None) -> BuildResult:
        built = BuildResult(
            image=image, profile=options.profile, image_id=image_id, tag=tag,
            inputs_hash=digest, manifest_digest=manifest.digest(), up_to_date=not fresh,
            seconds=time.monotonic() - start, base=base_info, skipped=skipped, python=python,
            log=str(log) if log else None,
        )  # fmt: skip
        _save_record(folder / build_record.NAME, built.record())
        return built

    if not options.force and (found := _up_to_date(engine, image, options, digest)):
        return result(_reuse(engine, found, tag), fresh=False, log=None)
    folder.mkdir(parents=True, exist_ok=True)
    with guard.lock(folder / "build.lock", tag, options.lock_timeout, say):
        if not options.force and (found := _up_to_date(engine, image, options, digest)):
            return result(_reuse(engine, found, tag), fresh=False, log=None)
        labels = _labels(manifest, image, options, digest, base_info)
        log_path = folder / "build.log"
        with context.workspace(folder) as work, guard.signals():
            if options.profile == "local":
                # Every image's missing wheels in one parallel round: the next images' builds
                # then find them all cached instead of starting pip again.
                renders = [
                    render(manifest, i, "local", mirrors=options.mirrors)
                    for i in (prefetch or (image,))
                ]
                prefetch_wheels(renders, options.cache or cache_root(), say)
            context.assemble(options, rendered, work, say)
            built = run_build(
                engine, rendered, work, labels, log_path, say, options.builder,
                cache_from=_cache_from(options, image),
            )  # fmt: skip
        inspected = engine.inspect_image(built)
        if inspected is None:
            raise EngineError(f"{engine.docker_host}: built image {built} vanished before tagging")
        image_id = str(inspected["Id"])
        engine.tag(image_id, tag)  # only now: a failed or interrupted build never gets here
        return result(image_id, fresh=True, log=log_path)


def _save_record(path: Path, made: BuildRecord) -> None:
    """Save the record of this build, keeping what push recorded when the image is the same: a
    build that found its image up to date must not forget where that image was pushed."""
    try:
        previous = BuildRecord.load(path)
    except ConfigError:
        previous = None  # an unusable record is replaced, as it always was
    if previous is not None and previous.pushed is not None and previous.image_id == made.image_id:
        made = made.with_push(previous.pushed)
    made.save(path)


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
                return list(pool.map(one, wanted))
        return [one(i) for i in wanted]


def _labels(
    manifest: PinManifest,
    image: ImageKey,
    options: BuildOptions,
    digest: str,
    base_info: BaseRef,
) -> dict[str, str]:
    oci = "org.opencontainers.image"
    labels = {
        f"{LABEL}.inputs-hash": digest,
        f"{LABEL}.manifest-hash": manifest.digest(),
        f"{LABEL}.image-manifest-hash": manifest.image_digest(image, options.profile),
        f"{LABEL}.variant": image.variant,
        f"{LABEL}.arch": image.arch,
        f"{LABEL}.profile": options.profile,
        f"{LABEL}.base-digest": base_info.id,
        f"{LABEL}.base-ref": base_info.ref,
        f"{LABEL}.version": __version__,
        f"{oci}.title": f"twinbuild {image.variant} {image.arch} ({options.profile})",
        f"{oci}.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        f"{oci}.base.name": base_info.ref,
        f"{oci}.base.digest": base_info.id,
    }
    # Asked only here, when something is built: the no-op decision runs no git.
    from twinbuild.builder import provenance

    found = {
        "revision": options.revision or provenance.revision(options.root),
        "source": options.source or provenance.source(options.root, declared=manifest.source),
    }
    labels.update({f"{oci}.{key}": value for key, value in found.items() if value})
    return labels
