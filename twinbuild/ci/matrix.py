"""The workflows' job matrices, from the manifest: which images a job builds or GPU-tests, and
on which runner.

A workflow never lists variants itself (``twinbuild workflows check`` refuses a hand-written
matrix, TB-W009): a matrix job runs ``twinbuild variants --matrix build|gpu --for pr|nightly
--github-output`` and the build and GPU jobs read ``fromJSON(needs.<job>.outputs.matrix)``. Each
entry is one image (a variant on one architecture) with ``runner``: the variant's runner labels
for that job, and the architecture's own (``x64``, ``arm64``: the labels GitHub gives a
self-hosted runner). ``--for pr`` is what the gate requires: the variants the manifest gates,
and, with ``--required-by`` the default branch's manifest, those that one gates too (the gate
asks for both, ``evidence.merge_gate``). ``--for nightly`` is every variant whose production build
can run; the others are left out with a warning saying what to pin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from twinbuild.errors import ConfigError
from twinbuild.manifest.listing import VariantsOptions, variants
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest
from twinbuild.manifest.rendered import render
from twinbuild.util import github

Job = Literal["build", "gpu"]
Scope = Literal["pr", "nightly"]
#: The label GitHub gives a self-hosted runner of each architecture.
RUNNER_ARCH = {"linux/amd64": "x64", "linux/arm64": "arm64"}


@dataclass(frozen=True, slots=True, kw_only=True)
class MatrixOptions:
    """``twinbuild variants --matrix``: which job's matrix, for which run."""

    manifest: Path = DEFAULT_PATH
    job: Job | None = None  # None: no matrix was asked for (`variants` lists instead)
    scope: Scope = "pr"
    required_by: Path | None = None  # the default branch's manifest (validate-gpu.yml)
    github_output: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Matrix:
    entries: tuple[dict[str, object], ...]
    left_out: tuple[str, ...] = ()  # one line per image a nightly cannot build yet, and why

    def json(self) -> str:
        return json.dumps({"include": list(self.entries)}, separators=(",", ":"))

    def outputs(self) -> dict[str, str]:
        return {"matrix": self.json(), "any": str(bool(self.entries)).lower()}


def images_for(
    manifest: PinManifest, scope: Scope, required_by: PinManifest | None = None
) -> tuple[list[ImageKey], list[str]]:
    """The images a ``scope`` run builds and tests, and the ones left out with why."""
    if scope == "pr":
        gated = set(manifest.required()) | set(required_by.required() if required_by else ())
        return [i for i in manifest.images() if i.variant in gated], []
    chosen, left = [], []
    for image in manifest.images():
        blockers = render(manifest, image, "production").blockers
        if blockers:
            left.append(f"{image.name}: left out of the nightly: {blockers[0]}")
        else:
            chosen.append(image)
    return chosen, left


def matrix(
    manifest: PinManifest, job: Job, scope: Scope, required_by: PinManifest | None = None
) -> Matrix:
    images, left = images_for(manifest, scope, required_by)
    entries: list[dict[str, object]] = []
    for image in images:
        variant = manifest.variant(image.variant)
        labels = variant.runners.build if job == "build" else variant.runners.gpu
        if job == "gpu" and required_by is not None:
            labels = _trusted_gpu_labels(image.variant, labels, required_by)
        entries.append({
            "variant": image.variant, "arch": image.arch, "name": image.name,
            "runner": [*labels, RUNNER_ARCH[image.arch]],
        })  # fmt: skip
    return Matrix(entries=tuple(entries), left_out=tuple(left))


def _trusted_gpu_labels(name: str, asked: tuple[str, ...], trusted: PinManifest) -> tuple[str, ...]:
    """The GPU runner labels of variant ``name`` as the default branch's manifest gives them:
    the validated commit's manifest is the PR's, and the runner its image runs on is not the
    PR's to choose. A variant the default branch lacks may ask only for a label set one of the
    default branch's variants uses."""
    if name in trusted.variants:
        return trusted.variant(name).runners.gpu
    known = {v.runners.gpu for v in trusted.variants.values()}
    if asked not in known:
        raise ConfigError(
            f"variant {name}: GPU runner labels {list(asked)} are not a set the default branch's "
            "manifest uses; give the new variant one of those, or land the runner labels first"
        )
    return asked


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantsRequest:
    """What ``twinbuild variants`` was asked for: the listing, or with ``--matrix`` a job's."""

    listing: VariantsOptions
    matrix: MatrixOptions


def run_variants(request: VariantsRequest) -> str:
    """The listing (text or JSON), or the matrix ``--matrix`` asked for as one JSON line."""
    if request.matrix.job is None:
        return variants(request.listing)
    return matrix_for(request.matrix).json() + "\n"


def matrix_for(options: MatrixOptions) -> Matrix:
    """Load the manifests ``options`` names; write the outputs when asked."""
    if options.job is None:
        raise ConfigError("variants: --matrix build|gpu says which job's matrix")
    found = matrix(
        load(options.manifest), options.job, options.scope,
        load(options.required_by) if options.required_by is not None else None,
    )  # fmt: skip
    if options.github_output:
        github.write_outputs(found.outputs(), who="variants")
        for line in found.left_out:
            print(github.annotation("warning", line))
    return found
