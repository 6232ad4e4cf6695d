"""The registry build cache: a fresh engine (a new runner) building both local images, cold
against with the registry that `twinbuild push` filled, side by side in one run.

Each sample starts its own private dockerd on an empty data root, so nothing is cached in the
engine; the host's wheel cache is shared by both variants, as it would be by two builds on one
runner. Cold makes the embedded base with mmdebstrap and builds every layer; warm pulls the base
and takes every unchanged layer from the registry (BuildKit inline cache).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from tools.bench.child import Sample, child
from tools.bench.session import Session, interleave, measured
from tools.bench.stats import median, ratio

BENCH = "7 fresh engine, registry build cache (mini, local profile)"
TARGET = 0.3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _twinbuild(env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "twinbuild", *args],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"twinbuild {' '.join(args)}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


@contextlib.contextmanager
def fresh_engine(s: Session) -> Iterator[dict[str, str]]:
    """A private dockerd on an empty data root for one sample; stopped and removed after it."""
    cache = s.work / f"eng-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in s.env.items() if k != "DOCKER_HOST"} | {"TWINBUILD_CACHE": str(cache)}
    host = _twinbuild(env, "engine", "up", "--print-host").strip().splitlines()[-1]
    if not host.startswith(f"unix://{cache}"):
        _twinbuild(env, "engine", "down")
        raise RuntimeError(f"got the engine at {host}, not a fresh private one")
    try:
        yield {**env, "DOCKER_HOST": host}
    finally:
        _twinbuild(env, "engine", "down")
        shutil.rmtree(cache, ignore_errors=True)


def _machine_cache(s: Session) -> Path:
    """The cache folder a sample builds with: a fresh machine's. It has the host's wheels (PyPI's
    latency is not what this row measures) but not the base root filesystem saved by earlier
    builds, which would spare the cold variant its mmdebstrap (18.5 s against 15.9 s, seen)."""
    from twinbuild.util.paths import cache_root

    folder = s.work / f"cache-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "wheels").symlink_to(cache_root() / "wheels", target_is_directory=True)
    return folder


_STEP_RE = re.compile(r"#\d+ \[[\w-]+ \d+/\d+\] (?!FROM ).* \((cached|ran), ")


def _steps(s: Session) -> tuple[int, int]:
    """(steps taken from a cache, recipe steps) of the last build of both platforms."""
    from twinbuild.builder.build_record import folder
    from twinbuild.manifest.loader import load

    manifest = load(s.root / "pins/manifest.toml")
    logs = [
        folder(s.root, "local", manifest.image(p, "linux/amd64")) / "build.log" for p in s.variants
    ]
    found = [
        m.group(1)
        for log in logs
        for line in log.read_text().splitlines()
        if (m := _STEP_RE.match(line))
    ]
    return found.count("cached"), len(found)


def bench_registry_cache(s: Session) -> None:
    from twinbuild.engine import registry
    from twinbuild.engine.client import connect
    from twinbuild.manifest.loader import load
    from twinbuild.ship.push import PushOptions, push
    from twinbuild.util.paths import cache_root

    paths = registry.RegistryPaths.under(s.work / "registry-cache")
    address = registry.up(paths, port=_free_port()).address
    host_cache = str(cache_root())  # $TWINBUILD_CACHE, else ~/.cache/twinbuild
    job = {"kind": "build", "root": str(s.root), "platforms": list(s.variants), "cache": host_cache}
    try:
        s.fresh()  # this run's layers: the registry learns them from the warm-up push only
        s.build(s.variants, registry=address)
        with connect(s.env["DOCKER_HOST"]) as engine:
            push(
                engine,
                load(s.root / "pins/manifest.toml"),
                PushOptions(root=s.root),
                address,
                say=lambda _: None,
            )

        steps: dict[str | None, tuple[int, int]] = {}

        def variant(reg: str | None) -> Callable[[], Sample]:
            def go() -> Sample:
                with fresh_engine(s) as env:
                    sample = child({**job, "registry": reg, "cache": str(_machine_cache(s))}, env)
                steps[reg] = _steps(s)
                return sample

            return go

        runs = 1 if s.quick else 2
        cold, warm = interleave(runs, variant(None), variant(address))
    finally:
        registry.down(paths)
    cold_s = median([x.seconds for x in cold])
    r = ratio(median([x.seconds for x in warm]), cold_s)
    cached = {reg: f"{n} of {total} recipe steps cached" for reg, (n, total) in steps.items()}
    s.rows.append(
        measured(
            BENCH, f"fresh engine, cold: mmdebstrap + build ({cached[None]})", cold,
            target="reported", ratio=1.0,
        )
    )  # fmt: skip
    s.rows.append(
        measured(
            BENCH, f"fresh engine + warm registry: base pulled ({cached[address]})", warm,
            ratio=r, target=f"<= {TARGET}x", met=r is not None and r <= TARGET,
        )
    )  # fmt: skip
