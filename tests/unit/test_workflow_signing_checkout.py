"""The job that holds the signing key runs default-branch code only, however it would get other code.

TB-W007 looked at ``actions/checkout``'s ``ref:`` alone. The sign job of ``validate-gpu.yml`` has
the validated commit's objects fetched (it reads them with git plumbing), so one edit of ours, a
``git checkout`` of that commit before ``pip install ./tool``, or a checkout of another
repository, would run the PR's code with the key in the environment, and the check said nothing.
Each case is our own ``validate-gpu.yml`` with one such step added to the sign job.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from twinbuild.ci import workflows

ROOT = Path(__file__).resolve().parents[2]
SIGN_STEPS = "      - name: twinbuild from the default branch (and its trusted keys)\n"
STEPS = {
    "git checkout of the validated commit": (
        '      - run: git -C tool checkout "$COMMIT"\n'
        "        env:\n"
        "          COMMIT: ${{ needs.trigger.outputs.commit }}\n"
    ),
    "git switch": "      - run: git -C tool switch --detach refs/twinbuild/branch\n",
    "git worktree": "      - run: git -C tool worktree add ../pr refs/twinbuild/branch\n",
    "a checkout of another repository": (
        "      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n"
        "        with:\n"
        "          repository: ${{ github.event.workflow_run.head_repository.full_name }}\n"
        "          path: tool\n"
        "          persist-credentials: false\n"
    ),
}


@pytest.mark.parametrize("what", STEPS)
def test_the_signing_job_never_checks_out_other_code(tmp_path: Path, what: str) -> None:
    text = (ROOT / ".github/workflows/validate-gpu.yml").read_text()
    assert text.count(SIGN_STEPS) == 1, "validate-gpu.yml changed shape; move the edit"
    path = tmp_path / "validate-gpu.yml"
    path.write_text(text.replace(SIGN_STEPS, STEPS[what] + SIGN_STEPS))
    found = [(f.code, f.message) for f in workflows.check([path])]
    assert len(found) == 1, found
    code, message = found[0]
    assert code == "TB-W007"
    assert message.startswith("job 'sign' holds the signing environment 'evidence-signing' and ")
    assert message.endswith(
        "; the key meets default-branch code only: check out the default branch and read "
        "anything else as git objects"
    )


def test_our_validate_gpu_workflow_passes() -> None:
    assert workflows.check([ROOT / ".github/workflows/validate-gpu.yml"]) == []
