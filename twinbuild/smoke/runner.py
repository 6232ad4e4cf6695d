"""Run the smoke suite against one image (by id, never by tag) or against this machine.

The container starts with network ``none`` and is removed in ``finally`` whatever happens; pytest
runs the packaged suite in a subprocess with testinfra's ``docker://<id>`` (or ``local://``) host.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dockerfile_parse import DockerfileParser

import twinbuild
from twinbuild.builder.image import read_record, record_path
from twinbuild.engine import client as engine_mod
from twinbuild.errors import ConfigError, EngineError, FindingsError, TwinbuildError
from twinbuild.manifest.model import (
    DEFAULT_PATH,
    PLATFORMS,
    PROFILES,
    Manifest,
    Platform,
    Profile,
    load,
)
from twinbuild.manifest.render import RECIPES, local_skip_reason, render
from twinbuild.recipe.scan import parse as parse_recipe
from twinbuild.smoke import gpu as gpu_mod
from twinbuild.smoke import report
from twinbuild.smoke.spec import BaseCase, EnvCase, GpuCase, PinCase, SuiteSpec
from twinbuild.util import github

SUITE = Path(__file__).with_name("suite")
PYTEST_TIMEOUT_S = 3600
LOCAL_PYTHON = "/opt/venv/bin/python"
PRODUCTION_PYTHON = "python3"
NOT_PRODUCTION = "production contents: the local profile builds no {what}"
BARE_HOST = "bare GPU host (--host --gpu): checks this machine's GPUs, not an image's {what}"
LABEL = "org.twinbuild."


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One thing to smoke: an image (by id) or this machine (``image_id`` None)."""

    platform: Platform
    profile: Profile
    image_id: str | None
    python: str
    inspect: Mapping[str, Any] = field(default_factory=dict)
    record: Mapping[str, Any] | None = (
        None  # build/<profile>/<platform>/image.json, if it is this image
    )
    digest: str | None = None  # REPOSITORY@sha256:... this image was asked for (or pushed) as
    gpu_only: bool = False  # a bare GPU host (--host --gpu): its GPUs, not an image's contents


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    summary: dict[str, Any]
    paths: dict[str, Path]
    seconds: float

    @property
    def failed(self) -> int:
        return int(self.summary["counts"]["failed"])


# -- what to smoke ---------------------------------------------------------------------------------


def built_target(
    eng: engine_mod.EngineAPI, root: Path, platform: Platform, profile: Profile
) -> Target:
    """The image the last ``twinbuild build`` recorded for ``platform`` and ``profile``."""
    path = record_path(root, profile, platform)
    record = read_record(path)
    if record is None:
        raise ConfigError(
            f"{path}: no build record; run `twinbuild build --platform {platform} --profile "
            f"{profile}` first, or pass --image REF"
        )
    image_id = str(record["image_id"])
    inspect = eng.inspect_image(image_id)
    if inspect is None:
        raise ConfigError(
            f"{path}: names {image_id}, which the engine at {eng.docker_host} lacks; rebuild it"
        )
    return Target(
        platform=platform,
        profile=profile,
        image_id=str(inspect["Id"]),
        python=str(record.get("python") or _python(profile)),
        inspect=inspect,
        record=record,
    )


def image_target(
    eng: engine_mod.EngineAPI,
    root: Path,
    ref: str,
    platform: Platform | None,
    profile: Profile | None,
) -> Target:
    """Any image, resolved to its id first: platform and profile from flags, else its labels.

    A ``REPOSITORY@sha256:...`` the engine lacks is pulled by that digest (the GPU job of CI gets
    the image the build job pushed, never a rebuild), and the report names exactly that digest.
    """
    inspect = eng.inspect_image(ref)
    if inspect is None and "@sha256:" in ref:
        eng.pull(ref)  # a digest the registry lacks: ConfigError (exit 2)
        inspect = eng.inspect_image(ref)
    if inspect is None:
        raise ConfigError(f"--image {ref}: the engine at {eng.docker_host} has no such image")
    labels = _labels(inspect)
    plat = platform or labels.get(LABEL + "platform")
    if plat not in PLATFORMS:
        raise ConfigError(
            f"--image {ref}: no org.twinbuild.platform label; pass --platform cuda|rocm"
        )
    found = profile or labels.get(LABEL + "profile") or "production"
    if found not in PROFILES:
        raise ConfigError(
            f"--image {ref}: unknown profile {found!r}; pass --profile local|production"
        )
    prof: Profile = found
    record = read_record(record_path(root, prof, plat))
    if record is not None and record["image_id"] != inspect["Id"]:
        record = None  # the record describes another image
    python = str(record.get("python")) if record and record.get("python") else _python(prof)
    return Target(
        platform=plat,
        profile=prof,
        image_id=str(inspect["Id"]),
        python=python,
        inspect=inspect,
        record=record,
        digest=ref if "@sha256:" in ref else None,
    )


def repo_digest(target: Target, digests: list[str]) -> str | None:
    """The registry digest the report names: the one asked for, else the one last pushed.

    Only a digest the engine lists for this very image counts, so evidence subjects are always
    registry digests that pull this image.
    """
    pushed = (target.record or {}).get("pushed") or {}
    for wanted in (target.digest, pushed.get("ref") if isinstance(pushed, dict) else None):
        if wanted and wanted in digests:
            return str(wanted)
    if target.digest:
        raise ConfigError(
            f"--image {target.digest}: the engine lists {digests or 'no registry digest'} for "
            f"{target.image_id}; pull it by that digest again"
        )
    return digests[0] if digests else None


def _python(profile: str) -> str:
    return LOCAL_PYTHON if profile == "local" else PRODUCTION_PYTHON


def _labels(inspect: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((inspect.get("Config") or {}).get("Labels") or {}).items()}


# -- the spec ------------------------------------------------------------------------------------


def pin_cases(manifest: Manifest, target: Target) -> list[PinCase]:
    """Every pin of the platform; in the local profile, those it does not install skip with why."""
    pins = manifest.resolve(target.platform)
    if target.profile != "local":
        return [PinCase(pin=p) for p in pins]
    if target.record is not None:
        skipped = {str(s["pin"]): str(s["reason"]) for s in target.record.get("skipped") or []}
    else:  # no build record: assume every git pin was mirrored in, so only fixed reasons apply
        mirrors = {p.name: "" for p in pins if p.kind == "git"}
        skipped = {p.name: r for p in pins if (r := local_skip_reason(p, mirrors)) is not None}
    return [
        PinCase(
            pin=p,
            skip=f"not in local profile: {p.name} ({skipped[p.name]})"
            if p.name in skipped
            else None,
        )
        for p in pins
    ]


def stage_chain(recipe: Path, target: str | None) -> list[str]:
    """Stage names from the first ancestor down to ``target`` (the last stage when None)."""
    structure = DockerfileParser(fileobj=io.BytesIO(recipe.read_bytes())).structure
    parents: dict[str, str | None] = {}
    order: list[str] = []
    for item in structure:
        if str(item["instruction"]).upper() != "FROM":
            continue
        words = [w for w in str(item["value"]).split() if not w.startswith("--")]
        name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(order))
        parent = words[0] if words and words[0] in parents else None
        parents[name] = parent
        order.append(name)
    if not order:
        raise ConfigError(f"{recipe}: no FROM instruction")
    stage: str | None = target or order[-1]
    if stage not in parents:
        raise ConfigError(f"{recipe}: no stage {target!r}; stages: {', '.join(order)}")
    chain: list[str] = []
    while stage is not None:
        chain.append(stage)
        stage = parents[stage]
    return chain[::-1]


def recipe_env(
    recipe: Path, target: str | None, build_args: Mapping[str, str], *, shown: Path | None = None
) -> list[EnvCase]:
    """The ENV the recipe's target stage chain sets, last value of each key, build args filled in.

    ``shown`` is the path messages use (relative to the repository root).
    """
    envs = parse_recipe(recipe).envs
    out: dict[str, EnvCase] = {}
    for stage in stage_chain(recipe, target):
        for key, raw, line in envs.get(stage, []):
            value = raw
            for arg, arg_value in build_args.items():
                value = value.replace("${" + arg + "}", arg_value)
            out[key] = EnvCase(key=key, value=value, where=f"{shown or recipe}:{line}")
    return list(out.values())


def base_case(
    eng: engine_mod.EngineAPI, manifest: Manifest, target: Target
) -> tuple[BaseCase | None, str | None]:
    labels = _labels(target.inspect)
    layers = [str(x) for x in (target.inspect.get("RootFS") or {}).get("Layers") or []]
    if target.profile == "production":
        base = manifest.platforms[target.platform].base
        expected = base.digest
        found = eng.inspect_image(f"{base.repository}@{base.digest}")
    elif target.record is not None and (target.record.get("base") or {}).get("id"):
        expected = str(target.record["base"]["id"])
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
    manifest: Manifest, target: Target, info: gpu_mod.GpuInfo | None, wanted: bool | None
) -> GpuCase:
    platform = target.platform
    reason = gpu_mod.skip_reason(platform, info, wanted=wanted)
    if reason is None and target.profile == "local":
        reason = NOT_PRODUCTION.format(what="GPU stack (no torch, no torch_memory_saver)")
    binaries = manifest.platforms[platform].binaries
    perf = next((b for b in binaries if b.rsplit("/", 1)[-1] == "all_reduce_perf"), None)
    return GpuCase(
        skip=reason,
        vendor=gpu_mod.VENDOR[platform],
        perf_binary=perf,
        info=info.to_json() if info is not None else None,
        toolkit=manifest.platforms[platform].toolkit,
        archs=list(manifest.platforms[platform].gpu_archs),
    )


def build_spec(
    eng: engine_mod.EngineAPI | None,
    manifest: Manifest,
    root: Path,
    target: Target,
    *,
    hostspec: str,
    results: Path,
    gpu: GpuCase,
    rerun_failed_once: bool,
) -> SuiteSpec:
    spec_platform = manifest.platforms[target.platform]
    production = target.profile == "production"
    recipe = RECIPES[target.profile][target.platform]
    env: list[EnvCase] = []
    env_skip: str | None = None
    if target.image_id is None:
        env_skip = "host mode: the recipe's ENV applies to images only"
    elif not (root / recipe).is_file():
        env_skip = f"recipe {recipe} not found under {root}"
    else:
        args = render(manifest, target.platform, target.profile).args
        stage = target.platform if target.profile == "local" else None
        env = recipe_env(root / recipe, stage, args, shown=recipe)
    base: BaseCase | None = None
    base_skip: str | None = "host mode: no image to compare with the base"
    if eng is not None and target.image_id is not None:
        base, base_skip = base_case(eng, manifest, target)
    pins = pin_cases(manifest, target)
    binaries_skip = None if production else NOT_PRODUCTION.format(what="diagnostic binaries")
    imports = list(spec_platform.imports if production else manifest.local.imports)
    if target.gpu_only:
        pins = [PinCase(pin=c.pin, skip=BARE_HOST.format(what="pins")) for c in pins]
        binaries_skip = BARE_HOST.format(what="binaries (the GPU checks run all_reduce_perf)")
        imports = []
    return SuiteSpec(
        hostspec=hostspec,
        platform=target.platform,
        profile=target.profile,
        python=target.python,
        manifest=str(manifest.path),
        results=str(results),
        pins=pins,
        env=env,
        env_skip=env_skip,
        binaries=list(spec_platform.binaries),
        binaries_skip=binaries_skip,
        imports=imports,
        base=base,
        base_skip=base_skip,
        gpu=gpu,
        rerun_failed_once=rerun_failed_once,
    )


# -- running -------------------------------------------------------------------------------------


def heading(target: Target) -> str:
    """The line above each suite's output: which platform, and which image (id and tag)."""
    what = f"smoke {target.platform} ({target.profile})"
    if target.image_id is None:
        return f"== {what}: this machine =="
    tags = list(target.inspect.get("RepoTags") or [])
    if target.record is not None and target.record.get("tag"):
        tags = [str(target.record["tag"])]
    named = f" ({', '.join(tags[:2])})" if tags else ""
    return f"== {what}: image {target.image_id.removeprefix('sha256:')[:12]}{named} =="


def start_container(
    eng: engine_mod.EngineAPI, image_id: str, access: engine_mod.GpuAccess | None
) -> str:
    """A container of ``image_id`` on network none, with the GPUs when ``access`` says how."""
    return eng.start_container(image_id, network="none", gpus=access)


def run_pytest(
    spec_path: Path,
    workdir: Path,
    *,
    docker_host: str | None,
    echo: bool,
    verbose: bool = False,
    extra: Sequence[str] = (),
) -> tuple[int, str]:
    """Run the packaged suite in a subprocess; return its exit code and output.

    Quiet by default: no header (it named the temporary ini as ``../../../../tmp/...``), one
    progress line, failures and errors in full; ``verbose`` lists every skip with its reason.
    It runs from the package's smoke folder, so test paths read ``suite/test_....py``.
    """
    ini = workdir / "pytest.ini"
    ini.write_text("[pytest]\naddopts = --strict-markers\n", encoding="utf-8")
    argv = [
        sys.executable, "-m", "pytest", str(SUITE), "-c", str(ini), "--rootdir", str(SUITE),
        "-p", "no:cacheprovider", "-p", "no:testinfra", "-p", "no:xdist",
        "-o", "console_output_style=classic", "--no-header", "-q",
        "-rfEs" if verbose else "-rfE", f"--twinbuild-spec={spec_path}", *extra,
    ]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    package_parent = str(Path(twinbuild.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    if docker_host is not None:
        env["DOCKER_HOST"] = docker_host
    try:
        proc = subprocess.run(
            argv, env=env, cwd=SUITE.parent, capture_output=True, text=True,
            timeout=PYTEST_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise TwinbuildError(
            f"smoke suite still running after {PYTEST_TIMEOUT_S}s; stopped"
        ) from exc
    output = proc.stdout + proc.stderr
    if echo:
        sys.stdout.write(output)
        sys.stdout.flush()
    return proc.returncode, output


def smoke_target(
    manifest: Manifest,
    root: Path,
    target: Target,
    *,
    eng: engine_mod.EngineAPI | None,
    gpu: bool | None = None,
    rerun_failed_once: bool = False,
    report_dir: Path,
    echo: bool = True,
    verbose: bool = False,
    detect: Callable[[Platform], gpu_mod.GpuInfo | None] = gpu_mod.detect,
) -> Outcome:
    """Smoke one target; write its JSON summary and JUnit XML under ``report_dir``."""
    started = time.monotonic()
    if echo:
        print(heading(target), flush=True)
    info = detect(target.platform)
    if gpu is True and info is None:
        raise ConfigError(
            f"--gpu: no {gpu_mod.VENDOR[target.platform]} GPU on this machine; drop --gpu"
        )
    gcase = gpu_case(manifest, target, info, gpu)
    if target.image_id is not None and shutil.which("docker") is None:
        raise EngineError("the docker CLI is not on PATH; testinfra's docker backend needs it")
    with tempfile.TemporaryDirectory(prefix="twinbuild-smoke-") as tmp:
        work = Path(tmp)
        results = work / "results.json"
        cid: str | None = None
        try:
            if target.image_id is not None:
                assert eng is not None  # noqa: S101 -- an image target always comes with an engine
                access = gpu_mod.access(target.platform) if gcase.skip is None else None
                cid = start_container(eng, target.image_id, access)
                hostspec = f"docker://{cid}"
            else:
                hostspec = "local://"
            spec = build_spec(
                eng, manifest, root, target, hostspec=hostspec, results=results, gpu=gcase,
                rerun_failed_once=rerun_failed_once,
            )  # fmt: skip
            spec.write(work / "spec.json")
            code, output = run_pytest(
                work / "spec.json",
                work,
                docker_host=eng.docker_host if eng is not None else None,
                echo=echo,
                verbose=verbose,
            )
        finally:
            if cid is not None and eng is not None:
                eng.remove_container(cid)
        if not results.is_file() or code not in (0, 1):
            tail = "\n".join(output.strip().splitlines()[-15:])
            raise TwinbuildError(f"the smoke suite did not run (pytest exit {code}):\n{tail}")
        ran = json.loads(results.read_text(encoding="utf-8"))
    labels = _labels(target.inspect)
    digests = [str(d) for d in target.inspect.get("RepoDigests") or ()]
    data = report.summary(
        platform=target.platform,
        profile=target.profile,
        image=report.ImageRef(
            id=target.image_id,
            digest=repo_digest(target, digests),
            inputs_hash=labels.get(LABEL + "inputs-hash"),
            base_digest=labels.get(LABEL + "base-digest"),
        ),
        manifest_digest=manifest.digest(),
        gpu=gcase.info if gcase.skip is None else None,
        tests=ran["tests"],
        holds=ran["holds"],
    )
    paths = report.write(
        data, report_dir, keyed=target.image_id is not None and target.record is None
    )
    return Outcome(summary=data, paths=paths, seconds=time.monotonic() - started)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeOptions:
    """What ``twinbuild smoke`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    platform: Platform | None = None  # None: both
    profile: Profile | None = None  # None: local for built images, production for --image/--host
    image: str | None = None  # any image, resolved to its id first
    host: bool = False  # this machine, through testinfra's local backend
    gpu: bool | None = None  # None: GPU checks where a GPU is found; with host: a bare GPU host
    python: str | None = None  # with host: the interpreter holding torch and torch_memory_saver
    rerun_failed_once: bool = False
    report_dir: Path = Path("build/smoke")
    verbose: bool = False  # list every skip with its reason


def smoke_images(options: SmokeOptions) -> list[Outcome]:
    """Load the manifest and smoke what ``options`` names (see :func:`smoke`)."""
    return smoke(
        load(options.manifest), root=options.root, platform=options.platform,
        profile=options.profile, image=options.image, host=options.host, gpu=options.gpu,
        python=options.python, rerun_failed_once=options.rerun_failed_once,
        report_dir=options.report_dir, verbose=options.verbose,
    )  # fmt: skip


def smoke(
    manifest: Manifest,
    *,
    root: Path,
    platform: Platform | None = None,
    profile: Profile | None = None,
    image: str | None = None,
    host: bool = False,
    gpu: bool | None = None,
    python: str | None = None,
    rerun_failed_once: bool = False,
    report_dir: Path = Path("build/smoke"),
    echo: bool = True,
    verbose: bool = False,
    connect: Callable[[], engine_mod.EngineAPI] = engine_mod.connect,
) -> list[Outcome]:
    """``twinbuild smoke``: each platform's built image, ``--image REF``, or ``--host``.

    Writes the markdown summary to ``report_dir/smoke.md`` (and appends it to
    ``$GITHUB_STEP_SUMMARY``); raises FindingsError naming the failures when any test failed.
    """
    if image is not None and host:
        raise ConfigError("--image and --host exclude each other; pick one")
    if python is not None and not host:
        raise ConfigError("--python names this machine's interpreter; it needs --host")
    platforms = [platform] if platform is not None else list(PLATFORMS)
    outcomes: list[Outcome] = []
    if host:
        for plat in platforms:
            prof: Profile = profile or "production"
            target = Target(
                platform=plat,
                profile=prof,
                image_id=None,
                python=python or _python(prof),
                gpu_only=gpu is True,
            )
            outcomes.append(
                smoke_target(
                    manifest,
                    root,
                    target,
                    eng=None,
                    gpu=gpu,
                    rerun_failed_once=rerun_failed_once,
                    report_dir=report_dir,
                    echo=echo,
                    verbose=verbose,
                )
            )
    else:
        eng = connect()
        try:
            if image is not None:
                targets = [
                    image_target(eng, root, image, platform, profile)  # else its label says
                ]
            else:
                targets = [built_target(eng, root, p, profile or "local") for p in platforms]
            for target in targets:
                outcomes.append(
                    smoke_target(
                        manifest,
                        root,
                        target,
                        eng=eng,
                        gpu=gpu,
                        rerun_failed_once=rerun_failed_once,
                        report_dir=report_dir,
                        echo=echo,
                        verbose=verbose,
                    )
                )
        finally:
            eng.close()
    md = report.markdown([o.summary for o in outcomes])
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "smoke.md").write_text(
        report.markdown(report.collected(report_dir)), encoding="utf-8"
    )
    github.append_summary(github.step_summary(), md)
    failures = [
        f"{o.summary['platform']} ({o.summary['profile']}): {t['message'] or t['id']}"
        for o in outcomes
        for t in o.summary["tests"]
        if t["outcome"] == "failed"
    ]
    if failures:
        raise FindingsError(
            f"smoke: {len(failures)} failed; first: {failures[0]} (reports in {report_dir})"
        )
    return outcomes
