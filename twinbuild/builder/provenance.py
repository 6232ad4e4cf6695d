"""Where an image comes from: the OCI ``revision`` and ``source`` labels of a build.

A manifest may declare ``source`` (the canonical repository, whoever builds). Otherwise, in GitHub
Actions, they come from the run (``GITHUB_SHA``, the server and repository); elsewhere from
the checkout itself: ``HEAD``'s commit and the ``origin`` remote, so a local build says which
commit it is and where that lives instead of a made-up URL. Outside a git checkout both are
absent, and the labels are left off rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.util import environ
from twinbuild.util.git import run_git

_SCP = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>[^/].*)$")  # git@host:owner/name.git


def revision(root: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The commit being built: ``GITHUB_SHA`` in Actions, else ``HEAD`` of the checkout."""
    env = environ.checked(env)
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_SHA"):
        return env["GITHUB_SHA"]
    try:
        head = run_git(root, "rev-parse", "--verify", "-q", "HEAD")
    except ConfigError:  # no git here: no revision label, not a failed build
        return None
    commit = head.stdout.strip()
    return commit if head.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def source(
    root: Path, env: Mapping[str, str] | None = None, *, declared: str | None = None
) -> str | None:
    """The repository's web address: the manifest's ``source`` where it declares one (``declared``),
    else the Actions run's, else the ``origin`` remote's."""
    if declared:
        return declared
    env = environ.checked(env)
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        return f"{server}/{env['GITHUB_REPOSITORY']}"
    try:
        remote = run_git(root, "remote", "get-url", "origin")
    except ConfigError:
        return None
    return web_url(remote.stdout.strip()) if remote.returncode == 0 else None


def web_url(remote: str) -> str | None:
    """``git@github.com:o/r.git`` or ``https://user@github.com/o/r.git`` -> ``https://github.com/o/r``.

    A local path or ``file://`` remote has no web address: None. Credentials are never kept.
    """
    remote = remote.strip()
    if not remote:
        return None
    scp = _SCP.match(remote)
    if scp and "://" not in remote:
        host, path = scp["host"], scp["path"]
    else:
        match = re.match(r"^(?:https?|ssh|git)://(?:[^@/]+@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.+)$",
                         remote)  # fmt: skip
        if match is None:
            return None
        host, path = match["host"], match["path"]
    return f"https://{host}/{path.removesuffix('/').removesuffix('.git')}"
