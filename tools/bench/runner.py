"""One benchmark run: a throwaway copy of the mini project, every benchmark in turn (a failing one
becomes a "not measured" row), the report written, and every image the run made removed. A run
with a row it could not measure fails (exit 1) once the report is written: a bench that errors
lies by omission."""

from __future__ import annotations

import contextlib
import json
import os
import platform as host
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.bench.builds import (
    BUMP_PIN,
    bench_base,
    bench_bump,
    bench_cold,
    bench_noop,
    bench_noop_real,
)
from tools.bench.deadlines import bench_deadlines
from tools.bench.emulation import bench_emulation
from tools.bench.growth import bench_growth
from tools.bench.lint import bench_lint
from tools.bench.lock import bench_lock
from tools.bench.recipes import bench_recipes
from tools.bench.registry_cache import bench_registry_cache
from tools.bench.session import Session
from tools.bench.smoke import bench_smoke
from tools.bench.stats import Row, table
from tools.bench.suite import bench_suite
from tools.bench.wheels import bench_wheels
from twinbuild.errors import ConfigError, FindingsError
from twinbuild.util.activity import Say

if TYPE_CHECKING:
    from twinbuild.engine.api import EngineAPI

MINI = Path("tests/fixtures/mini")
NOT_MEASURED = "not measured"


def machine_line(env: dict[str, str] | None = None) -> str:
    mem = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    try:
        docker_v = (
            subprocess.run(
                ["docker", "version", "--format", "{{.Server.Version}}"],
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=30,
            ).stdout.strip()
            or "?"
        )
    except (OSError, subprocess.TimeoutExpired):
        docker_v = "?"
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Machine: {os.cpu_count()} cores, {mem} memory, kernel {host.release()}, "
        f"Docker {docker_v}, {date}"
    )


#: Every benchmark step, in the order a run takes them (``--only NAME`` picks some).
STEPS: list[tuple[str, Callable[[Session], None]]] = [
    ("cold builds", bench_cold),
    ("no-op decision", bench_noop),
    ("no-op decision, real project", bench_noop_real),
    ("one-pin bump", bench_bump),
    ("cold build with base", bench_base),
    ("smoke conformance", bench_smoke),
    ("registry build cache", bench_registry_cache),
    ("lint", bench_lint),
    ("recipe size", bench_recipes),
    ("test suite", bench_suite),
    ("wheel stage", bench_wheels),
    ("emulation", bench_emulation),
    ("growth", bench_growth),
    ("registry deadline", bench_deadlines),
    ("lock", bench_lock),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """What ``twinbuild bench`` was asked for."""

    root: Path = Path()  # the repository, for tests/fixtures/mini and the real project
    out: Path = Path("build/bench")  # folder for bench.md and bench.json
    quick: bool = False  # fewer runs, no base-included build
    only: tuple[str, ...] = ()  # --only NAME: these steps alone (their names as listed)


def bench(options: BenchOptions, say: Say = print) -> dict[str, Any]:
    """:func:`run` with the options of ``twinbuild bench``."""
    return run(options.root, options.out, quick=options.quick, only=options.only, say=say)


def run(
    root: Path,
    out_dir: Path,
    *,
    quick: bool = False,
    only: tuple[str, ...] = (),
    say: Say = print,
) -> dict[str, Any]:
    """Run every benchmark (or those ``only`` names); write ``out_dir/bench.json`` and
    ``out_dir/bench.md``."""
    unknown = sorted(set(only) - {name for name, _ in STEPS})
    if unknown:
        names = ", ".join(name for name, _ in STEPS)
        raise ConfigError(f"--only {unknown[0]!r}: no such benchmark; one of: {names}")
    from twinbuild.engine.client import connect
    from twinbuild.engine.daemon import docker_host

    env = {
        **os.environ,
        "DOCKER_HOST": os.environ.get("DOCKER_HOST") or docker_host(),
        "DOCKER_BUILDKIT": "0",
    }
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="twinbuild-bench-"))
    project = work / "proj"
    shutil.copytree(root / MINI, project, ignore=shutil.ignore_patterns("build", ".twinbuild"))
    manifest = project / "pins/manifest.toml"
    manifest.write_text(manifest.read_text() + BUMP_PIN)
    s = Session(root=project, work=work, env=env, say=say, quick=quick)
    s.extra["repo_root"] = str(root)
    tags = ("twinbuild/cuda:local", "twinbuild/rocm:local")
    with connect(env["DOCKER_HOST"]) as engine:
        before = {t: (engine.inspect_image(t) or {}).get("Id") for t in tags}
        try:
            for name, step in STEPS:
                if only and name not in only:
                    continue
                t0 = time.perf_counter()
                say(f"bench: {name}...")
                try:
                    step(s)
                except Exception as exc:
                    s.rows.append(
                        Row(
                            benchmark=name,
                            variant=NOT_MEASURED,
                            seconds=(),
                            note=f"{type(exc).__name__}: {str(exc)[:200]}",
                        )
                    )
                say(f"bench: {name} took {time.perf_counter() - t0:.0f}s")
        finally:
            _cleanup(engine, s, before, say)
            shutil.rmtree(work, ignore_errors=True)
    header = (
        machine_line(env)
        + f"; {'quick' if quick else 'full'} run, {time.perf_counter() - started:.0f}s"
    )
    result = {
        "machine": header,
        "quick": quick,
        "rows": [asdict(r) | {"median": r.median} for r in s.rows],
        **s.extra,
    }
    (out_dir / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / "bench.md").write_text(table(s.rows, header))
    check_measured(s.rows, out_dir / "bench.md")
    return result


def check_measured(rows: list[Row], report: Path) -> None:
    """Fail (exit 1) when a benchmark could not be measured, naming each and why."""
    missing = [f"{r.benchmark} ({r.note})" for r in rows if r.variant == NOT_MEASURED]
    if missing:
        raise FindingsError(
            f"bench: {len(missing)} not measured: {'; '.join(missing)}; the report, with the "
            f"rows that were, is {report}"
        )


def _cleanup(engine: EngineAPI, s: Session, before: dict[str, Any], say: Say) -> None:
    """Put the local tags back, then remove every image this run made (newest first)."""
    ours = set(s.created)
    for tag, old in before.items():
        now = (engine.inspect_image(tag) or {}).get("Id")
        if now is None or now not in ours:
            continue
        with contextlib.suppress(Exception):
            if old is not None:
                engine.tag(old, tag)
            else:
                engine.remove_image(tag, prune=False)
    for inputs in s.bases:  # every image built on a base we made carries its label: ours too
        rows = engine.images_by_label("org.twinbuild.base-inputs", inputs, intermediate=True)
        s.created[:0] = [r.id for r in rows if r.id not in s.created]
    left = list(reversed(s.created))
    for _ in range(3):  # a parent refuses while a child is there; the next pass gets it
        for image_id in left:
            with contextlib.suppress(Exception):
                engine.remove_image(image_id, force=True)
        left = [i for i in left if engine.inspect_image(i) is not None]
    if left:
        say(f"bench: {len(left)} images could not be removed: {' '.join(left)}")
