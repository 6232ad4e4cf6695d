"""The measuring children: each measured variant runs alone in its own process, so its peak RSS
(``ru_maxrss`` from ``os.wait4``) is its own; ``child_main`` is the entry point of such a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULT = "BENCH-RESULT "
#: The checkout the benchmarks run from: a measuring child imports tools.bench from there.
CHECKOUT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    seconds: float  # the work as timed inside the child (imports excluded); wall for a CLI
    wall: float  # the whole child process, interpreter start included
    rss_mib: float
    data: dict[str, Any] = field(default_factory=dict)


def spawn(
    argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600
) -> Sample:
    """Run ``argv``; its wall time, its peak RSS (``wait4``) and its ``BENCH-RESULT`` JSON."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        # A blocking wait, the timeout a timer's kill: polling every 5 ms added up to 5 ms to
        # each sample, an eighth of a 40 ms replayed no-op (and 1% of a docker build beside it).
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}...: exit {proc.returncode}: {text[-600:]}")
    data: dict[str, Any] = {}
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT):
            data = json.loads(line[len(RESULT) :])
            break
    seconds = float(data.get("seconds", wall))
    return Sample(seconds=seconds, wall=wall, rss_mib=usage.ru_maxrss / 1024, data=data)


def child(job: dict[str, Any], env: dict[str, str]) -> Sample:
    code = "import sys; from tools.bench.child import child_main; child_main(sys.argv[1])"
    path = os.pathsep.join(filter(None, [str(CHECKOUT), env.get("PYTHONPATH")]))
    return spawn([sys.executable, "-c", code, json.dumps(job)], env={**env, "PYTHONPATH": path})


def child_main(arg: str) -> None:
    """Entry point of a measuring child: run one job, print its timing as JSON."""
    job = json.loads(arg)
    jobs: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "build": _job_build,
        "smoke": _job_smoke,
        "exec_each": _job_exec_each,
        "lint": _job_lint,
        "import": _job_import,
        "manifest": _job_manifest,
        "lock": _job_lock,
        "inputs": _job_inputs,
    }
    # Import before the clock starts: the in-process figure is the work, not the interpreter's
    # imports (the whole-process figure, measured by the parent, has both).
    import twinbuild.builder.image
    import twinbuild.closure.lock_command
    import twinbuild.engine.base
    import twinbuild.engine.client
    import twinbuild.importer.run
    import twinbuild.lint.checks
    import twinbuild.manifest.model
    import twinbuild.smoke.collect

    del twinbuild
    start = time.perf_counter()
    cpu = time.process_time()
    extra = jobs[job["kind"]](job)
    seconds = time.perf_counter() - start
    cpu_s = time.process_time() - cpu  # on a shared machine, wall time also counts others' load
    sys.stdout.write(RESULT + json.dumps({"seconds": seconds, "cpu_s": cpu_s, **extra}) + "\n")


def _job_build(job: dict[str, Any]) -> dict[str, Any]:
    from twinbuild.builder.build_options import BuildOptions
    from twinbuild.builder.image import build_image
    from twinbuild.engine.base import ensure_base
    from twinbuild.engine.client import connect
    from twinbuild.manifest.loader import load

    root = Path(job["root"])
    manifest = load(root / "pins/manifest.toml")
    options = BuildOptions(
        root=root,
        profile="local",
        registry=job.get("registry"),  # the registry build cache, where a bench gives one
        cache=Path(job["cache"]) if job.get("cache") else None,
    )
    out: dict[str, Any] = {"results": []}
    with connect() as engine:
        if job.get("base"):
            t0 = time.perf_counter()
            base = ensure_base(
                engine,
                suite=manifest.local.suite,
                mirror=manifest.local.mirror,
                packages=manifest.local.packages,
                arch=job.get("arch", "linux/amd64"),
            )
            out["base"] = {
                "seconds": time.perf_counter() - t0,
                "built": base.built,
                "image_id": base.image_id,
                "tag": base.tag,
                "inputs": base.inputs_hash,
            }

        def one(p: str) -> dict[str, Any]:
            image = manifest.image(p, job.get("arch", "linux/amd64"))
            r = build_image(manifest, engine, image, options, say=lambda _: None)
            return {
                "platform": p,
                "up_to_date": r.up_to_date,
                "image_id": r.image_id,
                "seconds": r.seconds,
            }

        if job.get("concurrent"):
            with ThreadPoolExecutor(max_workers=2) as pool:
                out["results"] = list(pool.map(one, job["platforms"]))
        else:
            out["results"] = [one(p) for p in job["platforms"]]
    return out


def _job_smoke(job: dict[str, Any]) -> dict[str, Any]:
    from twinbuild.engine.client import connect
    from twinbuild.manifest.loader import loads
    from twinbuild.smoke import collect
    from twinbuild.smoke.conformance import Collected, check_pin, request_for

    manifest = loads(Path(job["manifest"]).read_text(), Path(job["manifest"]))
    pins = manifest.resolve(manifest.image("cuda", "linux/amd64"))
    with connect() as engine:
        ran = engine.exec(job["container"], collect.argv(job["python"], request_for(pins)))
    found = Collected.from_json(collect.parse(ran.output))
    results = [check_pin(p, found) for p in pins]
    return {"passed": sum(r.outcome == "passed" for r in results), "pins": len(pins)}


def _job_exec_each(job: dict[str, Any]) -> dict[str, Any]:
    ok = 0
    for name in job["names"]:
        code = f"import importlib.metadata as m; print(m.version({name!r}))"
        proc = subprocess.run(
            ["docker", "exec", job["container"], job["python"], "-c", code],
            capture_output=True,
            text=True,
            check=False,
        )
        ok += proc.returncode == 0
    return {"ok": ok}


def _job_import(job: dict[str, Any]) -> dict[str, Any]:
    import contextlib
    import io

    from twinbuild.errors import FindingsError
    from twinbuild.importer.run import ImportOptions, run_import

    options = ImportOptions(
        cuda_dockerfile=Path(job["cuda"]), rocm_dockerfile=Path(job["rocm"]),
        out=Path(job["out"]), force=True,
    )  # fmt: skip
    stream = io.StringIO()
    with contextlib.suppress(FindingsError):  # unrecognised pins: the draft is written anyway
        run_import(options, stream)
    return {"report_lines": stream.getvalue().count("\n")}


def _job_manifest(job: dict[str, Any]) -> dict[str, Any]:
    """Load and lint a manifest alone (no recipes): the manifest's own growth."""
    from twinbuild.lint.checks import lint_manifest
    from twinbuild.manifest.loader import load

    report = lint_manifest(load(Path(job["path"])))
    return {"findings": [str(f) for f in report.findings[:5]], "count": len(report.findings)}


def _job_lint(job: dict[str, Any]) -> dict[str, Any]:
    from twinbuild.lint.checks import lint
    from twinbuild.manifest.loader import load

    root = Path(job["root"])
    t0 = time.perf_counter()
    manifest = load(root / "pins/manifest.toml")
    t1 = time.perf_counter()
    report = lint(manifest, root)
    return {
        "load_s": t1 - t0,
        "lint_s": time.perf_counter() - t1,
        "findings": [str(f) for f in report.findings[:5]],
        "count": len(report.findings),
    }


def _job_lock(job: dict[str, Any]) -> dict[str, Any]:
    import resource

    from twinbuild.closure.lock_command import LockOptions, lock_all

    root = Path(job["root"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = lock_all(LockOptions(manifest=root / "pins/manifest.toml", root=root))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    uv_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"states": [o.state for o in report.images], "uv_cpu_s": uv_cpu}


def _job_inputs(job: dict[str, Any]) -> dict[str, Any]:
    from twinbuild.builder.inputs import builder_settings, inputs_hash
    from twinbuild.manifest.loader import load
    from twinbuild.manifest.rendered import render

    root = Path(job["root"])
    manifest = load(root / "pins/manifest.toml")
    hashes = {}
    lines = 0
    for image in manifest.images():
        rendered = render(manifest, image, "production")
        hashes[image.name] = inputs_hash(
            root, rendered, base_id="sha256:" + "0" * 64, builder=builder_settings(rendered)
        )
        if job.get("constraints"):  # what a production build adds after the hash
            from twinbuild.closure.constraints import CONSTRAINTS, with_lock

            lines += with_lock(root, rendered).files[CONSTRAINTS].count("==")
    return {"hashes": hashes, "constraints": lines}
