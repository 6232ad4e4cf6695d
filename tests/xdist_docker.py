"""An xdist scheduler that runs the Docker tests that share an engine on one worker, in order.

The Docker tests share the session's engine, whose image tags are global, so no two of them may
run at once. As one unit of work (the largest, so handed out first) they run on one worker while
the other workers share the rest, each test its own unit (a module of WHOLE_MODULES is one). A
module under ``own_engine/`` starts an engine of its own for its tests (they must use its
``private`` fixture; conftest checks), so it is a unit of its own and may run beside the session
engine's. xdist's own ``--dist loadgroup`` does
not group tests under pytest 9 (seen here), hence this scheduler, chosen by conftest's
``pytest_xdist_make_scheduler``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Where the Docker tests live, as pytest's node ids (relative to the rootdir) begin.
DOCKER_TESTS = "tests/docker/"
#: Docker test modules that start an engine of their own, one unit per module.
OWN_ENGINE = "tests/docker/own_engine/"
#: The fixture an own-engine test must use.
OWN_ENGINE_FIXTURE = "private"
#: Modules whose tests share one costly module fixture, kept on one worker so that it is made
#: once: Renovate's extract run (3.8 s of CPU, made on each worker that got one of its tests).
WHOLE_MODULES = ("tests/unit/test_renovate.py",)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: no two tests of one unit run at once."""
    module = nodeid.split("::", 1)[0]
    if nodeid.startswith(OWN_ENGINE) or module in WHOLE_MODULES:
        return module
    if nodeid.startswith(DOCKER_TESTS):
        return DOCKER_TESTS
    return nodeid


def misplaced(items: Iterable[Any]) -> str | None:
    """The first test under ``own_engine/`` that does not use its module's own engine, if any."""
    for item in items:
        if item.nodeid.startswith(OWN_ENGINE) and OWN_ENGINE_FIXTURE not in item.fixturenames:
            return (
                f"{item.nodeid}: a test under {OWN_ENGINE} runs beside the session engine's "
                f"tests, so it must use the '{OWN_ENGINE_FIXTURE}' engine; move it to "
                f"{DOCKER_TESTS}"
            )
    return None


def make_scheduler(config: Any, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling  # here: only an xdist run needs it

    class DockerUnits(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return DockerUnits(config, log)
