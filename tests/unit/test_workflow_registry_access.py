"""Which job of our workflows may touch the registry, and how: read from the workflow files.

The GPU jobs read; only the build jobs write, with the job token, and only to the CI namespace
(`twinbuild push`); only release.yml's job writes release tags, with the `release` environment's
credential and a job token that has no packages permission at all. A job that is not in the
table below gets no `packages` permission and logs in to no registry.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"

# (workflow, job) -> its `packages` permission; every other job has none.
PACKAGES = {
    ("validate.yml", "build"): "write",
    ("validate.yml", "index"): "write",  # the index beside the images it names
    ("validate-gpu.yml", "smoke"): "read",
    ("nightly.yml", "build"): "write",
    ("nightly.yml", "smoke"): "read",
}
RELEASE_JOB = ("release.yml", "release")


def jobs() -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job_id, job in doc["jobs"].items():
            found.append((path.name, job_id, job))
    return found


def scripts(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in job.get("steps", []))


def test_every_workflow_starts_from_no_permissions() -> None:
    for path in sorted(WORKFLOWS.glob("*.yml")):
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["permissions"] == {}, path.name


@pytest.mark.parametrize(("workflow", "job_id", "job"), jobs(), ids=lambda v: str(v)[:20])
def test_each_job_has_only_the_registry_access_it_needs(
    workflow: str, job_id: str, job: dict[str, Any]
) -> None:
    key = (workflow, job_id)
    permissions = job.get("permissions") or {}
    assert permissions.get("packages") == PACKAGES.get(key), key
    run = scripts(job)
    pushes = re.search(r"\btwinbuild push\b", run) is not None
    releases = re.search(r"\btwinbuild release\b", run) is not None
    logs_in = "docker login" in run
    # Only a job that writes (the build) pushes, and it never releases.
    assert pushes == (PACKAGES.get(key) == "write"), key
    assert not (pushes and releases), key
    # Only the release job releases, in its environment, with no packages permission.
    assert releases == (key == RELEASE_JOB), key
    if key == RELEASE_JOB:
        assert job["environment"] == "release"
        # The full ref: a tag named like the default branch has its ref_name too.
        assert job["if"] == (
            "${{ github.ref == format('refs/heads/{0}', github.event.repository.default_branch) }}"
        )
        assert "packages" not in permissions
        assert "secrets.TWINBUILD_RELEASE_TOKEN" in str(job["steps"])
    else:
        assert "TWINBUILD_RELEASE_TOKEN" not in str(job), key
    # A job logs in to the registry only when it has packages access or is the release job.
    assert logs_in == (key in PACKAGES or key == RELEASE_JOB), key


def test_ci_builds_that_have_a_registry_ask_for_no_registry_cache() -> None:
    # (twinbuild reads none in Actions anyway; the flag says so where a reader looks)
    builds = [(w, j, job) for w, j, job in jobs() if "twinbuild build" in scripts(job)]
    with_registry = [(w, j, job) for w, j, job in builds if "TWINBUILD_REGISTRY" in str(job)]
    assert {(w, j) for w, j, _ in with_registry} == {
        k for k, v in PACKAGES.items() if v == "write" and k != ("validate.yml", "index")
    }  # the index job pushes no image of its own: it joins the build jobs' digests
    for workflow, job_id, job in with_registry:
        assert "--no-registry-cache" in scripts(job), (workflow, job_id)
