"""Builders for evidence tests: smoke reports, GitHub environments, keys and signed envelopes.

Keys are generated at test time; no private key is ever stored in the repository.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from tests.helpers import mini_project
from twinbuild.evidence import dsse, record, save, sign
from twinbuild.evidence.head import CommitInputs
from twinbuild.evidence.keys import keyid
from twinbuild.evidence.statement import Validated
from twinbuild.manifest.model import Arch, ImageKey, Vendor
from twinbuild.ship.merged import Checkout, checkout_at
from twinbuild.util import strictjson

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
REPO = "twinbuild/twinbuild"
REPO_ID = 700001
HEAD = "0123456789abcdef0123456789abcdef01234567"
MAIN = "fedcba9876543210fedcba9876543210fedcba98"  # the default branch: its workflow signs
PR = 42
WORKFLOW_REF = f"{REPO}/.github/workflows/validate-gpu.yml@refs/heads/main"
MANIFEST = "sha256:" + "a" * 64
AMD64: Arch = "linux/amd64"
#: The variants of these tests (the mini project's): one image each, on amd64.
VENDORS: dict[str, Vendor] = {"cuda": "nvidia", "rocm": "amd"}
INPUTS: dict[str, str] = {"cuda": "sha256:" + "c" * 64, "rocm": "sha256:" + "d" * 64}
IMAGE_IDS: dict[str, str] = {"cuda": "sha256:" + "1" * 64, "rocm": "sha256:" + "2" * 64}
IMAGE_REFS: dict[str, str] = {
    "cuda": "registry.example/twinbuild/cuda@sha256:" + "3" * 64,
    "rocm": "registry.example/twinbuild/rocm@sha256:" + "4" * 64,
}
GPUS: dict[str, dict[str, Any]] = {
    "cuda": {
        "vendor": "nvidia",
        "model": "NVIDIA H200",
        "driver": "570.86",
        "runtime": "12.9",
        "count": 1,
    },
    "rocm": {
        "vendor": "amd",
        "model": "AMD Instinct MI300X",
        "driver": "6.10.5",
        "runtime": "6.4.1",
        "count": 8,
    },
}


def entry(
    name: str, outcome: str = "passed", *, gpu: bool = True, attempts: int = 1, flaky: bool = False
) -> dict[str, Any]:
    return {
        "id": f"tests/smoke/test_gpu.py::{name}",
        "outcome": outcome,
        "attempts": attempts,
        "flaky": flaky,
        "duration_s": 0.5,
        "markers": ["gpu"] if gpu else [],
    }


def image(variant: str) -> ImageKey:
    """The one image of a test variant."""
    return ImageKey(variant=variant, arch=AMD64)


#: The images a PR of these tests needs evidence for, and their inputs hashes at its head.
REQUIRED: tuple[ImageKey, ...] = (image("cuda"), image("rocm"))
HEAD_INPUTS: dict[ImageKey, str] = {image(v): h for v, h in INPUTS.items()}


def smoke_report(platform: str = "cuda", **overrides: Any) -> dict[str, Any]:
    """A passing smoke report in the smoke module's JSON shape of the variant ``platform`` (on
    amd64); ``overrides`` replace top keys."""
    tests = overrides.pop("tests", None)
    if tests is None:
        tests = [entry("test_matmul[torch]"), entry("test_import[numpy]", gpu=False)]
    report: dict[str, Any] = {
        "schema": 2,
        "variant": platform,
        "arch": AMD64,
        "profile": "production",
        "image": {
            "id": IMAGE_IDS[platform],
            "digest": IMAGE_REFS[platform],
            "inputs_hash": INPUTS[platform],
            "base_digest": "sha256:" + "b" * 64,
        },
        "manifest_digest": MANIFEST,
        "gpu": dict(GPUS[platform]),
        "tests": tests,
        "counts": counts_of(tests),
    }
    report.update(overrides)
    return report


def counts_of(tests: list[dict[str, Any]]) -> dict[str, int]:
    outcomes = [t["outcome"] for t in tests]
    return {
        "passed": outcomes.count("passed"),
        "failed": outcomes.count("failed"),
        "skipped": outcomes.count("skipped"),
        "flaky": sum(1 for t in tests if t["flaky"]),
    }


def github_env(**overrides: str) -> dict[str, str]:
    """The variables the default branch's validation run sees: validate-gpu.yml, started by
    workflow_run once the build of validate/pr-42 finished (so GITHUB_SHA and GITHUB_REF are the
    default branch's; the validated commit comes from the trigger check)."""
    env = {
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_REPOSITORY_ID": str(REPO_ID),
        "GITHUB_SHA": MAIN,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_WORKFLOW_REF": WORKFLOW_REF,
        "GITHUB_RUN_ID": "9001",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_ACTOR": "maintainer",
        "RUNNER_NAME": "gpu-h200-1",
        "RUNNER_ENVIRONMENT": "self-hosted",
    }
    env.update(overrides)
    return env


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True, kw_only=True)
class Signer:
    key: Ed25519PrivateKey

    @property
    def public(self) -> Ed25519PublicKey:
        return self.key.public_key()

    @property
    def keyid(self) -> str:
        return keyid(self.public)

    @property
    def trusted(self) -> dict[str, Ed25519PublicKey]:
        return {self.keyid: self.public}

    @classmethod
    def new(cls) -> Signer:
        return cls(key=Ed25519PrivateKey.generate())


def validated(report: dict[str, Any], *, commit: str = HEAD, pr: int = PR) -> Validated:
    """What the validation workflow's own code computed for ``commit``: here, what the report's
    image label and manifest digest say, so that a test states each value once."""
    inputs = {image(v): h for v, h in INPUTS.items()}
    inputs[ImageKey(variant=report["variant"], arch=report["arch"])] = report["image"][
        "inputs_hash"
    ]
    return Validated(
        commit=commit, pr=pr, inputs=inputs, vendors=dict(VENDORS),
        manifest_digest=report["manifest_digest"],
    )  # fmt: skip


def evidence(
    tmp_path: Path,
    signer: Signer,
    platform: str = "cuda",
    *,
    name: str | None = None,
    report: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    now: datetime = NOW,
    commit: str = HEAD,
    pr: int = PR,
) -> Path:
    """Record, save and sign one image's evidence the way the validation workflow does."""
    stem = name or platform
    report = report or smoke_report(platform)
    about = validated(report, commit=commit, pr=pr)
    report_path = write_json(tmp_path / f"{stem}.smoke.json", report)
    statement = record(report_path, env=env or github_env(), now=now, validated=about)
    statement_path = tmp_path / f"{stem}.statement.json"
    save(statement, statement_path)
    out = tmp_path / f"{stem}.dsse.json"
    sign(statement_path, out, key=signer.key, validated=about)
    return out


def payload_of(path: Path) -> dict[str, Any]:
    envelope = json.loads(path.read_text(encoding="utf-8"))
    result: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return result


def resign(path: Path, payload: dict[str, Any], signer: Signer, **kw: str) -> Path:
    """Sign an arbitrary payload into ``path`` (what a forger holding a trusted key could do)."""
    env = dsse.sign(strictjson.canonical(payload), signer.key, **kw)
    path.write_text(strictjson.dumps(env.to_dict()), encoding="utf-8")
    return path


def release_checkout(folder: Path) -> Checkout:
    """The mini project as a default branch's checkout of one commit (``folder/proj``), as
    `release` binds to it (the inputs this code computes at HEAD). No user git config is read,
    so a test without a HOME of its own can make one."""
    root = mini_project(folder)
    env = {
        **os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
        "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
    }  # fmt: skip
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "main")):
        subprocess.run(["git", "-C", str(root), *args], env=env, check=True, capture_output=True)
    return checkout_at(root)


def about_checkout(
    report: dict[str, Any], found: CommitInputs, *, ref: str | None = None
) -> dict[str, Any]:
    """``report`` as the validation run of ``found``'s commit records it (its inputs hash and
    manifest digest), for the image ``ref`` when given."""
    key = ImageKey(variant=report["variant"], arch=report["arch"])
    report["image"]["inputs_hash"] = found.inputs[key]
    report["manifest_digest"] = found.manifest_digest
    if ref is not None:
        report["image"]["digest"] = ref
    return report
