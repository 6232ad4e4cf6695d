"""An xdist scheduler that runs every Docker test on one worker, in order, beside the others.

The Docker tests share the session's engine, whose image tags are global, so no two of them may
run at once. As one unit of work (the largest, so handed out first) they run on one worker while
the other workers share the unit tests, each test its own unit. xdist's own ``--dist loadgroup``
does not group tests under pytest 9 (seen here), hence this scheduler, chosen by conftest's
``pytest_xdist_make_scheduler``.
"""

from __future__ import annotations

from typing import Any

#: Where the Docker tests live, as pytest's node ids (relative to the rootdir) begin.
DOCKER_TESTS = "tests/docker/"


def make_scheduler(config: Any, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling  # here: only an xdist run needs it

    class DockerOnOneWorker(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return DOCKER_TESTS if nodeid.startswith(DOCKER_TESTS) else nodeid

    return DockerOnOneWorker(config, log)
