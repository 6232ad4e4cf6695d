"""The no-op, remembered: a ``twinbuild build`` that found every image up to date answers the same
command again without loading the manifest or hashing a file, while nothing it decided from has
changed.

A run of ``twinbuild`` from the command line (:mod:`twinbuild.cli.entry`) that builds nothing
leaves a memo under ``<cache>/noop/``, keyed by the command line, the folder it ran in and the
environment variables the decision reads. It holds what the run printed, the engine it asked,
each image's tag (and, for the local profile, its base's) with the image id it named, and a
fingerprint taken *before* the decision: ``lstat`` (mode, size, mtime and ctime in ns, inode) of
every file the checkout would commit, of each folder above them (a file added or removed changes
its folder), of the manifest, the running twinbuild's own modules and dpkg's status
(mmdebstrap's version names the local base); and of the build records as the run left them (it
writes them). The next run of the same command replays the output only if every one of those is
unchanged and the engine still names every image by the same id; anything else, even an
unreadable memo, and it decides as always (and leaves a new memo). Taken before the decision, the
fingerprint of the inputs errs one way only: a file changed while a run hashed it makes the next
run decide again.

This module is what the replay loads, so it imports only ``json``, ``os``, ``sys`` and the plain
Engine API request (:mod:`twinbuild.engine.wire`); paths are strings, the memo's name is hashed
here (``hashlib`` loads OpenSSL: 3 ms of a 40 ms replay), and the memo names its own key, so two
command lines whose names collide only ever decide again.
"""

from __future__ import annotations

import json
import os
import sys

from twinbuild.engine import wire

TYPE_CHECKING = False  # mypy reads it as typing's; the replay never imports typing (3 ms)
if TYPE_CHECKING:  # names for annotations only
    from collections.abc import Mapping, Sequence
    from typing import Any

FORMAT = 2  # 2: the memo holds its key; named by FNV-1a
FOLDER = "noop"
#: The environment a build's decision or output depends on: the engine, the cache, CI's rules.
ENV_KEYS = ("DOCKER_HOST", "TWINBUILD_CACHE", "TWINBUILD_REGISTRY", "GITHUB_ACTIONS", "GITHUB_SHA")
#: Options whose run never replays: a forced build, another output format, help.
NEVER = frozenset({"--force", "--format", "-h", "--help", "--version"})
MEMO_LIMIT = 64 << 20
ASK_TIMEOUT_S = 10.0
DPKG_STATUS = "/var/lib/dpkg/status"

Stat = list[int] | None


def _cache(env: Mapping[str, str]) -> str:
    found = env.get("TWINBUILD_CACHE")
    return found or os.path.join(os.path.expanduser("~"), ".cache", "twinbuild")


def _key(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> str:
    """What a memo answers for: the command line, the folder, the environment it reads."""
    return json.dumps([FORMAT, cwd, list(argv), [env.get(k) for k in ENV_KEYS]])


def _name(key: str) -> str:
    """64-bit FNV-1a of ``key``, as 16 hex digits: a file name, not a secret (the memo holds its
    key and is replayed only for that key)."""
    h = 0xCBF29CE484222325
    for byte in key.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def memo_path(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> str | None:
    """Where the memo of this command line would be; None for one that never replays."""
    if not argv or argv[0] != "build" or any(a.split("=", 1)[0] in NEVER for a in argv):
        return None
    return os.path.join(_cache(env), FOLDER, _name(_key(argv, env, cwd)) + ".json")


def _stat(path: str) -> Stat:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def fingerprint(root: str, inside: Sequence[str], outside: Sequence[str]) -> dict[str, Stat]:
    """``lstat`` of each path (None: absent) and, for those ``inside`` the folder ``root``, of
    each folder above them up to ``root``."""
    wanted = {root, *inside, *outside}
    for path in inside:
        folder = path.rpartition(os.sep)[0]  # strings: this runs for every file of the checkout
        while folder.startswith(root + os.sep) and folder not in wanted:
            wanted.add(folder)
            folder = folder.rpartition(os.sep)[0]
    return {path: _stat(path) for path in sorted(wanted)}


def own_modules() -> list[str]:
    """Every module of the running twinbuild: a change to any of them (a new rule of what an
    input is, a renamed module, a pulled commit in an editable install) decides again. Listing
    them all, not the few that decide today, cannot go stale when code moves (a few ms)."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    found = []
    for folder, subfolders, files in os.walk(here):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        found += [folder + os.sep + name for name in sorted(files) if name.endswith(".py")]
    return found


#: What an image reference may hold to be asked of the engine as it is (no quoting needed); a
#: reference with anything else is never replayed.
REF_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@")


def replay(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> bool:
    """Print what the remembered run printed, if nothing it decided from has changed; True when
    it did. Never raises: any doubt answers False, and the build decides as always."""
    try:
        path = memo_path(argv, env, cwd)
        if path is None:
            return False
        with open(path, "rb") as handle:
            data = json.loads(handle.read(MEMO_LIMIT + 1)[:MEMO_LIMIT])
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return False
        if data.get("key") != _key(argv, env, cwd):
            return False  # another command line whose memo has the same name
        if any(_stat(p) != s for p, s in data["stats"].items()):
            return False
        asked: dict[str, str] = {}
        for ref, image_id in data["images"]:
            if asked.setdefault(ref, image_id) != image_id:
                return False
        for ref, image_id in asked.items():  # a base two images share is asked once
            if not set(ref) <= REF_CHARS:
                return False
            status, body = wire.request(
                data["docker_host"], "GET", f"/images/{ref}/json", timeout=ASK_TIMEOUT_S
            )
            if status != 200 or json.loads(body).get("Id") != image_id:
                return False
        sys.stdout.write(data["stdout"])
        sys.stdout.flush()
    except Exception:  # a memo is only ever a shortcut: any doubt, and decide as always
        return False
    return True


class Pending:
    """What a run from the command line offers to remember, filled in as it goes."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> None:
        self.path = memo_path(argv, env, cwd)
        self.key = _key(argv, env, cwd)
        self.stats: dict[str, Stat] | None = None
        self.data: dict[str, Any] | None = None

    def before(self, root: str, inside: Sequence[str], outside: Sequence[str]) -> None:
        """The fingerprint, taken before the decision: ``inside`` the checkout at ``root``,
        and ``outside`` it (the manifest where it lies elsewhere)."""
        if self.path is not None:
            self.stats = fingerprint(root, inside, [*outside, *own_modules(), DPKG_STATUS])

    def after(
        self,
        docker_host: str,
        images: Sequence[tuple[str, str]],
        stdout: str,
        *,
        root: str,
        outputs: Sequence[str],
    ) -> None:
        """What the run found (every image up to date) and printed; ``outputs`` are the files it
        wrote itself (the build records), fingerprinted as it left them."""
        if self.stats is None:
            return
        self.stats = {**fingerprint(root, outputs, []), **self.stats}  # the inputs: as before
        self.data = {"docker_host": docker_host, "images": [list(i) for i in images],
                     "stdout": stdout}  # fmt: skip

    def save(self) -> None:
        """Write the memo (the run ended well); a failure to write costs the next run only."""
        if self.path is None or self.stats is None or self.data is None:
            return
        import contextlib  # only once a run has ended well: the replay never needs these
        from pathlib import Path

        from twinbuild.util.atomic import write_atomic

        body = json.dumps({"format": FORMAT, "key": self.key, "stats": self.stats, **self.data})
        with contextlib.suppress(Exception):  # a read-only cache: the next run decides again
            write_atomic(Path(self.path), body)


#: The run's offer, set by :mod:`twinbuild.cli.entry` for a command typed on the command line
#: (never for ``main()`` called in-process, as the tests and the noxfile do).
PENDING: list[Pending] = []
