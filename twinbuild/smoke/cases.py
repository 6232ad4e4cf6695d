"""The spec of one smoke run: every case the suite checks, assembled from the manifest, the
recipe, the build record and the engine (the suite itself reads only the spec)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from twinbuild.builder.labels import left_out
from twinbuild.engine.api import EngineAPI
from twinbuild.errors import ConfigError
from twinbuild.manifest.model import PinManifest, ResolvedPin
from twinbuild.manifest.rendered import local_skip_reason, render
from twinbuild.recipe import scan
from twinbuild.smoke import gpu
from twinbuild.smoke.spec import BaseCase, EnvCase, GpuCase, PinCase, SuiteSpec
from twinbuild.smoke.targets import LABEL, Target, labels_of

NOT_PRODUCTION = "production contents: the local profile builds no {what}"
BARE_HOST = "bare GPU host (--host --gpu): checks this machine's GPUs, not an image's {what}"


def pin_cases(manifest: PinManifest, target: Target) -> list[PinCase]:
    """Every pin of the image; in the local profile, those it does not install skip with why."""
    pins = manifest.resolve(target.image)
    if target.profile != "local":
        return [PinCase(pin=p) for p in pins]
    skipped = _left_out(pins, target)
    return [
        PinCase(
            pin=p,
            skip=f"not in local profile: {p.name} ({skipped[p.name]})"
            if p.name in skipped
            else None,
        )
        for p in pins
    ]


def _left_out(pins: list[ResolvedPin], target: Target) -> dict[str, str]:
    """The pins the image's build left out, and why: from the image's own label, whichever way
    it was built (an image cannot excuse a pin the local profile always installs), else from its
    build record, else (an image older than the label) every git pin taken as mirrored in."""
    named = left_out(labels_of(target.inspect))
    if named is not None:
        may = {p.name: r for p in pins if (r := local_skip_reason(p, {})) is not None}
        return {name: may[name] for name in named if name in may}
    if target.record is not None:
        return {s.pin: s.reason for s in target.record.skipped}
    mirrors = {p.name: "" for p in pins if p.kind == "git"}
    return {p.name: r for p in pins if (r := local_skip_reason(p, mirrors)) is not None}


def stage_chain(recipe: Path, target: str | None) -> list[str]:
    """Stage names from the first ancestor down to ``target`` (the last stage when None)."""
    return _chain(scan.parse(recipe), target)


def _chain(parsed: scan.Recipe, target: str | None) -> list[str]:
    stage = target or parsed.stages[-1]
    if stage not in parsed.stages:
        raise ConfigError(f"{parsed.path}: no stage {target!r}; stages: {', '.join(parsed.stages)}")
    return parsed.stage_chain(stage)[::-1]


def recipe_env(
    recipe: Path, target: str | None, build_args: Mapping[str, str], *, shown: Path | None = None
) -> list[EnvCase]:
    """The ENV the recipe's target stage chain sets, last value of each key, build args filled in.

    ``shown`` is the path messages use (relative to the repository root).
    """
    parsed = scan.parse(recipe)
    out: dict[str, EnvCase] = {}
    for stage in _chain(parsed, target):
        for key, raw, line in parsed.envs.get(stage, []):
            value = raw
            for arg, arg_value in build_args.items():
                value = value.replace("${" + arg + "}", arg_value)
            out[key] = EnvCase(key=key, value=value, where=f"{shown or recipe}:{line}")
    return list(out.values())


def base_case(
    eng: EngineAPI, manifest: PinManifest, target: Target
) -> tuple[BaseCase | None, str | None]:
    labels = labels_of(target.inspect)
    layers = [str(x) for x in (target.inspect.get("RootFS") or {}).get("Layers") or []]
    recorded = target.record.base if target.record is not None else None
    if target.profile == "production":
        base = manifest.variant(target.image.variant).base
        expected = base.digest
        found = eng.inspect_image(f"{base.repository}@{base.digest}")
    elif recorded is not None and recorded.id:
        expected = recorded.id
        found = eng.inspect_image(expected)
    elif LABEL + "base-digest" in labels:
        return None, "local profile without a build record: nothing names the base to compare"
    else:
        return None, "local profile without a build record or base label: the base is unknown"
    base_layers = None
    if found is not None:
        base_layers = [str(x) for x in (found.get("RootFS") or {}).get("Layers") or []]
    return BaseCase(expected=expected, labels=labels, layers=layers, base_layers=base_layers), None


def gpu_case(
    manifest: PinManifest, target: Target, info: gpu.GpuInfo | None, wanted: bool | None
) -> GpuCase:
    spec = manifest.variant(target.image.variant)
    reason = gpu.skip_reason(spec.vendor, info, wanted=wanted)
    if reason is None and target.profile == "local":
        reason = NOT_PRODUCTION.format(what="GPU stack (no torch, no torch_memory_saver)")
    perf = next((b for b in spec.binaries if b.rsplit("/", 1)[-1] == "all_reduce_perf"), None)
    return GpuCase(
        skip=reason,
        vendor=spec.vendor,
        perf_binary=perf,
        info=info.to_json() if info is not None else None,
        toolkit=spec.toolkit,
        archs=list(spec.gpu_archs),
        kernel_modules=[] if target.image_id is None else list(spec.kernel_modules),
        floors=list(spec.all_reduce_floors),
    )


def closure_lock(root: Path, target: Target) -> tuple[str | None, str | None]:
    """The lock the closure check holds the image to, or why there is none (a local image's:
    ``pins/lock/local/<image>.toml``)."""
    from twinbuild.closure.lockfile import LOCK_DIR, lock_path

    if target.image_id is None:
        return None, "host mode: no image closure to compare with a lock"
    if target.profile == "local" and not (root / LOCK_DIR).is_dir():
        return None, f"no {LOCK_DIR}/ under {root}: this project keeps no locks"
    path = lock_path(root, target.image.name, target.profile)
    if not path.is_file():
        return None, f"no lock {path}: run `twinbuild lock` and commit it"
    return str(path.resolve()), None  # the suite runs in a folder of its own


def embedded_base_capture(eng: EngineAPI | None, target: Target) -> tuple[str | None, str | None]:
    """A local image's embedded base's capture (made now where the cache lacks it), or why
    there is none: the base is this machine's own, so its capture lives in the cache."""
    recorded = target.record.base if target.record is not None else None
    # the build record's base, else the label every twinbuild image carries (smoke --image)
    base = recorded.id if recorded is not None else ""
    base = base or labels_of(target.inspect).get(LABEL + "base-digest", "")
    if eng is None or not base:
        return None, (
            "local profile without a build record or base label: the embedded base, whose "
            "capture the closure check needs, is unknown"
        )
    from twinbuild.engine.base_capture import embedded_capture, embedded_path
    from twinbuild.util.paths import cache_root

    embedded_capture(eng, base, cache_root())
    return str(embedded_path(cache_root(), base)), None


def build_spec(
    eng: EngineAPI | None,
    manifest: PinManifest,
    root: Path,
    target: Target,
    *,
    hostspec: str,
    results: Path,
    gpu: GpuCase,
    rerun_failed_once: bool,
) -> SuiteSpec:
    variant = manifest.variant(target.image.variant)
    production = target.profile == "production"
    rendered = render(manifest, target.image, target.profile)
    recipe = rendered.recipe
    env: list[EnvCase] = []
    env_skip: str | None = None
    if target.image_id is None:
        env_skip = "host mode: the recipe's ENV applies to images only"
    elif not (root / recipe).is_file():
        env_skip = f"recipe {recipe} not found under {root}"
    else:
        env = recipe_env(root / recipe, rendered.target, rendered.args, shown=recipe)
    base: BaseCase | None = None
    base_skip: str | None = "host mode: no image to compare with the base"
    if eng is not None and target.image_id is not None:
        base, base_skip = base_case(eng, manifest, target)
    pins = pin_cases(manifest, target)
    binaries_skip = None if production else NOT_PRODUCTION.format(what="diagnostic binaries")
    imports = list(variant.imports if production else manifest.local.imports)
    if target.gpu_only:
        pins = [PinCase(pin=c.pin, skip=BARE_HOST.format(what="pins")) for c in pins]
        binaries_skip = BARE_HOST.format(what="binaries (the GPU checks run all_reduce_perf)")
        imports = []
    lock, lock_skip = closure_lock(root, target)
    capture: str | None = None
    if lock is not None and target.profile == "local":
        capture, lock_skip = embedded_base_capture(eng, target)
        lock = lock if capture is not None else None
    return SuiteSpec(
        lock=lock,
        lock_skip=lock_skip,
        base_capture=capture,
        hostspec=hostspec,
        variant=target.image.variant,
        arch=target.image.arch,
        profile=target.profile,
        python=target.python,
        manifest=str(manifest.path),
        results=str(results),
        pins=pins,
        env=env,
        env_skip=env_skip,
        binaries=list(variant.binaries),
        binaries_skip=binaries_skip,
        imports=imports,
        base=base,
        base_skip=base_skip,
        gpu=gpu,
        rerun_failed_once=rerun_failed_once,
    )
