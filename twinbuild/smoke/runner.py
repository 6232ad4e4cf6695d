"""``twinbuild smoke``: run the smoke suite against images (by id, never by tag) or this machine.

Each target's container starts with network ``none`` and is removed in ``finally`` whatever
happens; the packaged suite runs in a child pytest with testinfra's ``docker://<id>`` (or
``local://``) host (``suite_run``), from a spec of cases (``cases``) for a target (``targets``);
each run leaves its report (``report``), and the markdown of them all goes to the step summary.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from twinbuild.engine import client
from twinbuild.engine.api import EngineAPI, GpuAccess
from twinbuild.errors import ConfigError, EngineError, FindingsError, TwinbuildError
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, Arch, ImageKey, PinManifest, Profile
from twinbuild.smoke import cases, smoke_report, targets
from twinbuild.smoke.gpu import GpuInfo, access, detect
from twinbuild.smoke.smoke_report import SmokeReport
from twinbuild.smoke.suite_run import run_pytest
from twinbuild.smoke.targets import LABEL, Target
from twinbuild.util import github, output
from twinbuild.util.atomic import folder_to_write


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    summary: SmokeReport
    paths: dict[str, Path]
    seconds: float

    @property
    def failed(self) -> int:
        return self.summary.counts.failed

    def to_dict(self) -> dict[str, object]:
        """``smoke --format json``: one image's counts and where its reports are."""
        report = self.summary.to_json()
        return {
            "variant": self.summary.image_key.variant, "arch": self.summary.image_key.arch,
            "profile": self.summary.profile,
            "image": report["image"], "counts": report["counts"],
            "seconds": round(self.seconds, 1),
            "reports": {k: str(v) for k, v in self.paths.items()},
        }  # fmt: skip


def start_container(eng: EngineAPI, image_id: str, access: GpuAccess | None) -> str:
    """A container of ``image_id`` on network none, with the GPUs when ``access`` says how."""
    return eng.start_container(image_id, network="none", gpus=access)


def smoke_target(
    manifest: PinManifest,
    root: Path,
    target: Target,
    *,
    eng: EngineAPI | None,
    gpu: bool | None = None,
    rerun_failed_once: bool = False,
    report_dir: Path,
    echo: bool = True,
    verbose: bool = False,
    detect: Callable[[str], GpuInfo | None] = detect,
) -> Outcome:
    """Smoke one target; write its JSON summary and JUnit XML under ``report_dir``."""
    started = time.monotonic()
    if echo:
        output.say(targets.heading(target))
    vendor = manifest.variant(target.image.variant).vendor
    info = detect(vendor)
    if gpu is True and info is None:
        raise ConfigError(f"--gpu: no {vendor} GPU on this machine; drop --gpu")
    gcase = cases.gpu_case(manifest, target, info, gpu)
    if target.image_id is not None and shutil.which("docker") is None:
        raise EngineError("the docker CLI is not on PATH; testinfra's docker backend needs it")
    with tempfile.TemporaryDirectory(prefix="twinbuild-smoke-") as tmp:
        work = Path(tmp)
        results = work / "results.json"
        cid: str | None = None
        try:
            if target.image_id is not None:
                assert eng is not None  # noqa: S101 -- an image target always comes with an engine
                shm = manifest.variant(target.image.variant).shm_size
                given = None if gcase.skip else access(vendor, shm_size=shm)
                cid = start_container(eng, target.image_id, given)
                hostspec = f"docker://{cid}"
            else:
                hostspec = "local://"
            spec = cases.build_spec(
                eng, manifest, root, target, hostspec=hostspec, results=results, gpu=gcase,
                rerun_failed_once=rerun_failed_once,
            )  # fmt: skip
            spec.write(work / "spec.json")
            code, said = run_pytest(
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
            tail = "\n".join(said.strip().splitlines()[-15:])
            raise TwinbuildError(f"the smoke suite did not run (pytest exit {code}):\n{tail}")
        tests, holds = smoke_report.read_results(results)
    labels = targets.labels_of(target.inspect)
    digests = [str(d) for d in target.inspect.get("RepoDigests") or ()]
    data = smoke_report.summary(
        image_key=target.image,
        profile=target.profile,
        image=smoke_report.ImageRef(
            id=target.image_id,
            digest=targets.repo_digest(target, digests),
            inputs_hash=labels.get(LABEL + "inputs-hash"),
            base_digest=labels.get(LABEL + "base-digest"),
        ),
        manifest_digest=manifest.digest(),
        gpu=info if gcase.skip is None else None,
        tests=tests,
        holds=holds,
    )
    paths = data.save(report_dir, keyed=target.image_id is not None and target.record is None)
    return Outcome(summary=data, paths=paths, seconds=time.monotonic() - started)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeOptions:
    """What ``twinbuild smoke`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    variant: str | None = None  # None: the local profile's variants (every one in production)
    arch: Arch | None = None  # None: the host's architecture (every one with all_archs)
    all_archs: bool = False  # --all-archs: the emulated architectures' images too
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
    folder_to_write(options.report_dir)  # before anything runs: /dev/null is no folder
    return smoke(
        load(options.manifest), root=options.root, variant=options.variant, arch=options.arch,
        all_archs=options.all_archs, profile=options.profile, image=options.image,
        host=options.host, gpu=options.gpu, python=options.python,
        rerun_failed_once=options.rerun_failed_once, report_dir=options.report_dir,
        verbose=options.verbose,
    )  # fmt: skip


def smoke(
    manifest: PinManifest,
    *,
    root: Path,
    variant: str | None = None,
    arch: Arch | None = None,
    all_archs: bool = True,
    profile: Profile | None = None,
    image: str | None = None,
    host: bool = False,
    gpu: bool | None = None,
    python: str | None = None,
    rerun_failed_once: bool = False,
    report_dir: Path = Path("build/smoke"),
    echo: bool = True,
    verbose: bool = False,
    connect: Callable[[], EngineAPI] = client.connect,
) -> list[Outcome]:
    """``twinbuild smoke``: each built image (a variant's, on each architecture), ``--image REF``
    (by digest: one architecture's image), or ``--host``.

    Writes the markdown summary to ``report_dir/smoke.md`` (and appends it to
    ``$GITHUB_STEP_SUMMARY``); raises FindingsError naming the failures when any test failed.
    """
    if image is not None and host:
        raise ConfigError("--image and --host exclude each other; pick one")
    if python is not None and not host:
        raise ConfigError("--python names this machine's interpreter; it needs --host")
    outcomes: list[Outcome] = []
    if host:
        from twinbuild.engine.binfmt import host_arch

        here = arch or host_arch()
        names = [variant] if variant is not None else list(manifest.variants)
        hosts = [
            ImageKey(variant=manifest.variant(n).name, arch=here)
            for n in names
            if variant is not None or here in manifest.variant(n).archs
        ]
        for key in hosts:
            target = targets.host_target(key, profile or "production", python, gpu_only=gpu is True)
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
            if image is not None:  # variant, arch, profile: from flags, else its labels
                found = [targets.image_target(eng, root, image, manifest, variant, arch, profile)]
            else:
                from twinbuild.builder.image import wanted_images

                chosen = profile or "local"
                found = [
                    targets.built_target(eng, root, i, chosen)
                    for i in wanted_images(manifest, variant, arch, chosen, emulated=all_archs)
                ]
            for target in found:
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
    md = smoke_report.markdown([o.summary for o in outcomes])
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "smoke.md").write_text(
        smoke_report.markdown(smoke_report.collected(report_dir)), encoding="utf-8"
    )
    github.append_summary(github.step_summary(), md)
    failures = [
        f"{o.summary.image_key} ({o.summary.profile}): {t.message or t.id}"
        for o in outcomes
        for t in o.summary.failures
    ]
    if failures:
        raise FindingsError(
            f"smoke: {len(failures)} failed; first: {failures[0]} (reports in {report_dir})"
        )
    return outcomes
