"""The smoke benchmark: metadata collection from an image of 10, 100 (and 1000) fabricated pins, the
batched collector (one exec) against one ``docker exec`` per pin."""

from __future__ import annotations

from pathlib import Path

from tools.bench.child import Sample, child
from tools.bench.generate import FABRICATE, SMOKE_RECIPE, smoke_manifest
from tools.bench.session import Session, interleave, measured
from tools.bench.stats import median, ratio


def bench_smoke(s: Session) -> None:
    from twinbuild.engine.base import ensure_base
    from twinbuild.engine.client import connect
    from twinbuild.manifest.loader import load

    sizes = (10, 100) if s.quick else (10, 100, 1000)
    runs = 2 if s.quick else 3
    sample_size = 5 if s.quick else 20
    local = load(s.root / "pins/manifest.toml").local
    with connect(s.env["DOCKER_HOST"]) as engine:
        base = ensure_base(
            engine,
            suite=local.suite,
            mirror=local.mirror,
            packages=local.packages,
            arch="linux/amd64",
        )
        for n in sizes:
            ctx = s.work / f"smoke-{n}"
            ctx.mkdir()
            (ctx / "Dockerfile").write_text(SMOKE_RECIPE % n)
            (ctx / "fabricate.py").write_text(FABRICATE)
            (ctx / "manifest.toml").write_text(smoke_manifest(n))
            image = ctx / "iid"
            s.docker(
                "build",
                "-q",
                "--network",
                "none",
                "--build-arg",
                f"BASE_IMAGE={base.image_id}",
                "--label",
                "org.tools.bench=1",
                "--iidfile",
                str(image),
                str(ctx),
            )
            s.created.append(image.read_text().strip())
            cid = engine.start_container(image.read_text().strip())
            try:
                _smoke_rows(s, n, cid, ctx, runs, sample_size)
            finally:
                engine.remove_container(cid)


def _smoke_rows(s: Session, n: int, cid: str, ctx: Path, runs: int, sample_size: int) -> None:
    python = "/opt/venv/bin/python"
    k = min(n, sample_size)
    names = [f"benchdist-{i:05d}" for i in range(0, n, max(1, n // k))][:k]

    def batched() -> Sample:
        return child(
            {
                "kind": "smoke",
                "container": cid,
                "python": python,
                "manifest": str(ctx / "manifest.toml"),
            },
            s.env,
        )

    def each() -> Sample:
        x = child({"kind": "exec_each", "container": cid, "python": python, "names": names}, s.env)
        scale = n / k
        return Sample(
            seconds=x.seconds * scale, wall=x.wall * scale, rss_mib=x.rss_mib, data=x.data
        )

    bt, ex = interleave(runs, batched, each)
    if any(x.data["passed"] != n for x in bt) or any(x.data["ok"] != k for x in ex):
        raise RuntimeError(f"smoke at {n} pins: not every fabricated pin conformed")
    b_med, e_med = median([x.seconds for x in bt]), median([x.seconds for x in ex])
    bench = f"4 smoke conformance, {n} pins"
    note = "" if k == n else f"{k} execs measured, scaled x{n / k:.0f}"
    s.rows += [
        measured(bench, "one docker exec per pin", ex, ratio=1.0, target="baseline", note=note),
        measured(
            bench,
            "batched collector (one exec) + compare",
            bt,
            ratio=ratio(b_med, e_med),
            target="<= 2 s" if n == 100 else "reported",
            met=(b_med <= 2.0) if n == 100 else None,
        ),
    ]
