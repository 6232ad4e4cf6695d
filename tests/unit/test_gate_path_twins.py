"""Names that look like a not-input but are not one are inputs and trust roots (deny by default).

A checkout on Linux writes a path byte for byte: ``Docs/``, ``docs `` and ``d\u043ecs/`` (a
Cyrillic o) are other folders than ``docs/``, so only the exact names on the list pass. Rules
pinned down on a real repository, judged the way gate.yml runs the gate; they held already.
"""

from __future__ import annotations

import pytest

from tests.unit.gate_repos import GateRepo, run_gate
from tests.unit.gitrepos import commit_all, needs_git
from twinbuild.cli.main import message_lines
from twinbuild.evidence.trust_roots import is_trust_root
from twinbuild.inputs_rule import is_input

pytestmark = needs_git
HOOK = "import os; os.system('id')\n"


@pytest.mark.parametrize(
    "folder",
    ["Docs", "docs ", "d\u043ecs", "docs\u200b", "te\u0301sts", "tests.", "evidence\\keys"],
)
def test_a_twin_of_a_not_input_folder_needs_evidence_and_an_approval(
    attack_repo: GateRepo, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    path = attack_repo.root / folder / "hook.py"
    path.parent.mkdir(parents=True)
    path.write_text(HOOK)
    head = commit_all(attack_repo.root, f"a file in {folder!r}")
    assert is_input(f"{folder}/hook.py")
    assert is_trust_root(f"{folder}/hook.py")
    code, out, err = run_gate(capsys, head, "--base", attack_repo.base)
    assert code == 9
    assert not any("no image input changed" in line for line in out)
    # an invisible character in a path is shown escaped (twinbuild.cli.main.message_lines)
    shown = message_lines(f"{folder}/hook.py")[0]
    assert err[0].startswith(f"twinbuild: {shown}: trust root: ")
    assert [line.split(";")[0] for line in err[1:]] == [
        "twinbuild: cuda-amd64: missing: no signed evidence of cuda (linux/amd64)",
        "twinbuild: rocm-amd64: missing: no signed evidence of rocm (linux/amd64)",
    ]
