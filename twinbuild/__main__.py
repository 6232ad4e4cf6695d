"""The process's entry (``python -m twinbuild`` and the ``twinbuild`` script): SIGINT and SIGTERM
are handled from here on, before the command line and its libraries are imported.

Importing ``twinbuild.cli.main`` takes a good part of a second on a busy runner; a SIGTERM in
that time (CI cancelling a job just started) used to find Python's default action and end the
process with 143. Installed first, the one handler (``twinbuild.util.signals``) turns it into
the documented ending: one line, exit 130.
"""

from __future__ import annotations

import sys

from twinbuild.util import signals


def main() -> int:
    """Install the signal handling, then import and run the command line (a remembered no-op
    build is answered before the command line is imported: :mod:`twinbuild.builder.noop`)."""
    signals.install()
    try:
        # A remembered no-op answers here; anything else imports the command line (cli.entry).
        from twinbuild.cli.entry import main as run

        return run()
    except KeyboardInterrupt as exc:  # a signal before the command's own handling took over
        print(signals.said(exc), file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
