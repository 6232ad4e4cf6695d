"""The ``twinbuild`` command as typed: a remembered no-op answered at once
(:mod:`twinbuild.builder.noop`), anything else by :func:`twinbuild.cli.main.main`, which only
then is imported (with the manifest model and the engine boundary: most of a no-op's time)."""

from __future__ import annotations

import os
import sys

from twinbuild.builder import noop


def main() -> int:
    argv = sys.argv[1:]
    try:
        cwd = os.getcwd()  # not pathlib: the replay loads nothing it does not use
    except OSError:  # a folder removed under the shell: the command says so in its own words
        cwd = ""
    if cwd and noop.replay(argv, os.environ, cwd):
        return 0
    pending = noop.Pending(argv, os.environ, cwd) if cwd else None
    if pending is not None:
        noop.PENDING.append(pending)
    from twinbuild.cli.main import main as run

    code = run(argv)
    if code == 0 and pending is not None:
        pending.save()
    return code
