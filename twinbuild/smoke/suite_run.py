"""The packaged smoke suite (``suite/``), run by pytest in a child process against one host.

Its output comes back whole; the suite writes its records to the results file the spec names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import twinbuild
from twinbuild.util import process

SUITE = Path(__file__).with_name("suite")
PYTEST_TIMEOUT_S = 3600


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
    # The suite needs no plugin of the environment it runs from (flaky.py is its own): loading
    # them all cost each run about a second, and one could change how the suite behaves.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    package_parent = str(Path(twinbuild.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    if docker_host is not None:
        env["DOCKER_HOST"] = docker_host
    proc = process.run(
        argv, env=env, cwd=SUITE.parent, timeout=PYTEST_TIMEOUT_S, what="the smoke suite"
    )
    output = proc.out + proc.err
    if echo:  # the suite's own report is a message for a person: stderr (data is the summary)
        sys.stderr.write(output)
        sys.stderr.flush()
    return proc.code, output
