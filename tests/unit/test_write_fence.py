"""The write fence of tests/conftest.py: a test that is not marked docker works in a folder of its
own and cannot write outside the session's temporary folder (the checkout above all).

Run for real: pytest in a child process, with this repository's conftest, on tests that write.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WRITES = """
import os
from pathlib import Path

def test_a_relative_write_lands_in_its_own_folder():
    Path("--include=python3,git").mkdir()  # a fake runner taking the wrong argument for a path
    assert Path.cwd() != Path(os.environ["CHECKOUT"])

def test_a_write_into_the_checkout_is_stopped():
    (Path(os.environ["CHECKOUT"]) / "stray.txt").write_text("no")

def test_a_swallowed_refusal_still_fails():
    try:
        (Path(os.environ["CHECKOUT"]) / "swallowed").mkdir()
    except Exception:
        pass

def test_tmp_path_and_the_temporary_folder_are_fine(tmp_path):
    import tempfile
    (tmp_path / "ok").write_text("yes")
    with tempfile.NamedTemporaryFile("w") as handle:
        handle.write("yes")
"""


def test_writes_outside_the_session_folder_fail_and_never_land(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (tmp_path / "test_writes.py").write_text(WRITES)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "test_writes.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "CHECKOUT": str(checkout),
             "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TWINBUILD_NO_DOCKER": "1"},
    )  # fmt: skip
    out = proc.stdout
    assert "1 failed, 3 passed, 2 errors" in out, out
    assert "FAILED test_writes.py::test_a_write_into_the_checkout_is_stopped" in out
    assert "ERROR test_writes.py::test_a_swallowed_refusal_still_fails" in out
    assert f"WroteOutside: open {checkout}/stray.txt: outside" in out
    assert sorted(p.name for p in checkout.iterdir()) == []  # nothing got through
    assert not (tmp_path / "--include=python3,git").exists()  # it went to the test's own folder
