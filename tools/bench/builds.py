"""The build benchmarks, on the mini copy: cold builds (sequential vs concurrent, base excluded and
included), the no-op decision (also on this repository's own pins) and a one-pin bump, each against
the plain docker CLI where it has a counterpart."""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from tools.bench.child import Sample, spawn
from tools.bench.session import Session, interleave, measured, peak_rss
from tools.bench.stats import Row, median, ratio
from twinbuild.builder import noop
from twinbuild.engine import buildx_build as buildx
from twinbuild.util.paths import cache_root

BUMP_PIN = """
[pins.click]
kind = "pypi"
version = "8.1.7"
variants = ["cuda"]
asymmetry = "bench: a CUDA-only pin in the late layer"
layer = "late"
why = "bench pin"
"""
BUMP_VERSIONS = ("8.1.6", "8.1.5", "8.1.4", "8.1.3")


def bench_cold(s: Session) -> None:
    runs = 1 if s.quick else 2
    both = ("cuda", "rocm")

    def variant(concurrent: bool) -> Callable[[], Sample]:
        def go() -> Sample:
            s.fresh()
            return s.build(both, concurrent=concurrent)

        return go

    seq, conc = interleave(runs, variant(False), variant(True))
    ms = median([x.seconds for x in seq])
    bench = "3 cold build, base excluded (mini)"
    s.rows.append(measured(bench, "sequential cuda+rocm", seq, ratio=1.0, target="reported"))
    conc_ratio = ratio(median([x.seconds for x in conc]), ms)
    s.rows.append(
        measured(bench, "concurrent (2 threads)", conc, ratio=conc_ratio, target="reported")
    )


def _contexts(s: Session) -> dict[str, tuple[Path, list[str]]]:
    """The assembled context of each variant and the docker CLI args that build it."""
    from twinbuild.builder.build_options import BuildOptions
    from twinbuild.builder.context import assemble
    from twinbuild.builder.image import plan_image
    from twinbuild.engine.client import connect
    from twinbuild.manifest.loader import load

    manifest = load(s.root / "pins/manifest.toml")
    options = BuildOptions(root=s.root, profile="local")
    out: dict[str, tuple[Path, list[str]]] = {}
    with connect(s.env["DOCKER_HOST"]) as engine:
        for p in s.variants:
            rendered = plan_image(
                manifest, engine, manifest.image(p, "linux/amd64"), options, lambda _: None
            ).rendered
            ctx = Path(tempfile.mkdtemp(prefix=f"ctx-{p}-", dir=s.work))
            assemble(options, rendered, ctx, lambda _: None)
            args = [
                "build",
                "-q",
                "--network",
                "none",
                "-f",
                str(ctx / rendered.recipe),
                "--target",
                rendered.target or "",
                "--label",
                "org.tools.bench=1",
            ]
            for k, v in rendered.args.items():
                args += ["--build-arg", f"{k}={v}"]
            out[p] = (ctx, args)
    return out


def _cli_build(
    s: Session, ctx: Path, args: list[str], *extra: str, env: dict[str, str] | None = None
) -> Sample:
    iid = ctx.parent / f"iid-{uuid.uuid4().hex}"
    argv = ["docker", *args, *extra, "--iidfile", str(iid), str(ctx)]
    sample = spawn(argv, env=env) if env is not None else s.docker(*argv[1:])
    s.created.append(iid.read_text().strip())
    return sample


def bench_noop(s: Session, label: str = "mini copy") -> None:
    runs = 5 if s.quick else 9  # each round is about a second: enough samples for a median
    contexts = _contexts(s)
    buildx_env = buildx.buildx_env(s.env["DOCKER_HOST"])
    buildx_env.pop("DOCKER_BUILDKIT", None)
    for ctx, args in contexts.values():
        _cli_build(s, ctx, args)  # warm the cache for the CLI's own final layers
        _cli_build(s, ctx, ["buildx", *args], env=buildx_env)  # and BuildKit's

    def docker_cached(*first: str, env: dict[str, str] | None = None) -> Callable[[], Sample]:
        def go() -> Sample:
            parts = [_cli_build(s, c, [*first, *a], env=env) for c, a in contexts.values()]
            return Sample(
                seconds=sum(x.seconds for x in parts),
                wall=sum(x.wall for x in parts),
                rss_mib=peak_rss(parts),
            )

        return go

    _compiled()
    _cli(s)  # the run a person made before: it may build what the session has not yet,
    _cli(s)  # then it finds everything up to date and leaves the memo the samples replay
    memo = _memo(s)
    tb, dk, bx, cli = interleave(
        runs, lambda: s.build(s.variants), docker_cached(), docker_cached("buildx", env=buildx_env),
        lambda: _cli(s),
    )  # fmt: skip
    if not all(r["up_to_date"] for x in tb for r in x.data["results"]):
        raise RuntimeError("twinbuild rebuilt an image in the no-op benchmark")
    if _memo(s) != memo:
        raise RuntimeError("a `twinbuild build` sample decided again instead of replaying its memo")
    t_med, d_med = median([x.seconds for x in tb]), median([x.seconds for x in dk])
    b_med, w_med = median([x.seconds for x in bx]), median([x.wall for x in cli])
    bench = f"1 no-op decision, {'+'.join(s.variants)} ({label})"
    target = "<= 1 s and >= 5x faster"
    s.rows += [
        measured(bench, "docker build cached (CLI, classic)", dk, ratio=1.0, target="baseline"),
        measured(
            bench,
            "docker buildx build cached (CLI, BuildKit)",
            bx,
            ratio=ratio(b_med, d_med),
            target="reported",
            note="how twinbuild builds",
        ),
        measured(
            bench,
            "twinbuild up-to-date decision",
            tb,
            ratio=ratio(t_med, d_med),
            target=target,
            met=t_med <= 1.0 and (ratio(t_med, d_med) or 1) <= 0.2,
            note="in-process, imports excluded",
        ),
        measured(
            bench,
            "`twinbuild build`, whole process",
            cli,
            wall=True,
            ratio=ratio(w_med, d_med),
            target=target,
            met=w_med <= 1.0 and (ratio(w_med, d_med) or 1) <= 0.2,
            note="the CLI as a person runs it, the second time: interpreter start included; "
            f"{_times(ratio(w_med, b_med))} the cached docker buildx build",
        ),
    ]


def _times(r: float | None) -> str:
    """``0.05`` as "20.0x faster than"; None as "not comparable with"."""
    if not r:
        return "not comparable with"
    return f"{1 / r:.1f}x faster than" if r <= 1 else f"{r:.1f}x slower than"


def _cli_args(s: Session) -> list[str]:
    """The build a person asks for: the images the session built, on amd64 (the real project's
    cu13 has an arm64 image the session leaves out)."""
    return ["build", "--root", str(s.root), "--arch", "linux/amd64"]


def _cli(s: Session) -> Sample:
    """The command a person types, from a shell: what the no-op costs them. The ``twinbuild``
    script pip installed beside this interpreter (``python -m twinbuild`` where there is none)."""
    script = Path(sys.executable).parent / "twinbuild"
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "twinbuild"]
    sample = spawn([*command, *_cli_args(s)], env=s.env)
    return Sample(seconds=sample.wall, wall=sample.wall, rss_mib=sample.rss_mib)


def _memo(s: Session) -> tuple[int, int] | None:
    """The no-op memo's (mtime, inode): a run that decided again rewrites it."""
    found = noop.memo_path(_cli_args(s), s.env, str(Path.cwd()))
    try:
        info = Path(found).stat() if found else None
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_ino) if info else None


def _compiled() -> None:
    """Byte-compile twinbuild first, as installing a wheel does: where PYTHONDONTWRITEBYTECODE is
    set (our machines set it), an editable checkout would be compiled again by every run."""
    import compileall

    import twinbuild

    compileall.compile_dir(Path(twinbuild.__file__).parent, quiet=1)


def bench_noop_real(s: Session) -> None:
    """The same on a copy of this repository's own manifest and recipes: its local variants'
    amd64 images (cu13, rocm720-mi35x).

    Its images are content-addressed: where `nox -s main` built them, the copy finds them up to
    date; otherwise the first build here makes them (wheels from the shared cache).
    """
    from twinbuild.manifest.loader import load

    source = s.extra["repo_root"]
    real_root = s.work / "real"
    for part in ("pins", "images"):
        shutil.copytree(Path(source) / part, real_root / part)
    manifest = load(real_root / "pins/manifest.toml")
    local = tuple(
        i.variant for i in manifest.images(manifest.local_variants()) if i.arch == "linux/amd64"
    )
    real = Session(root=real_root, work=s.work, env=s.env, say=s.say, quick=s.quick, variants=local)
    real.build(real.variants)
    try:
        bench_noop(real, "this repository")
    finally:
        s.rows.extend(real.rows)
        s.created.extend(real.created)
        s.bases.extend(real.bases)


def _set_click(s: Session, version: str) -> None:
    path = s.root / "pins/manifest.toml"
    text = path.read_text()
    start = text.index("[pins.click]")
    at = text.index('version = "', start)
    end = text.index('"', at + len('version = "'))
    path.write_text(text[:at] + f'version = "{version}' + text[end:])


def _prefetch(s: Session, versions: Sequence[str]) -> None:
    """Download the bump's wheels before timing, so PyPI's latency is not in the figures."""
    from twinbuild.builder.wheelhouse import download_wheels
    from twinbuild.manifest.loader import load
    from twinbuild.manifest.rendered import render

    cache = cache_root()
    for v in versions:
        _set_click(s, v)
        manifest = load(s.root / "pins/manifest.toml")
        rendered = render(manifest, manifest.image("cuda", "linux/amd64"), "local")
        download_wheels(rendered, Path(tempfile.mkdtemp(dir=s.work)), cache)


def bench_bump(s: Session) -> None:
    runs = 1 if s.quick else 3
    versions = BUMP_VERSIONS[:runs]
    _prefetch(s, versions)
    _set_click(s, "8.1.7")
    s.build(("cuda", "rocm"))  # back to the built state
    left = iter(versions)
    rocm: list[bool] = []

    def bump() -> Sample:
        _set_click(s, next(left))
        sample = s.build(("cuda",))
        rocm.append(s.build(("rocm",)).data["results"][0]["up_to_date"])
        return sample

    def full() -> Sample:
        ctx, args = _contexts(s)["cuda"]
        return _cli_build(s, ctx, args, "--no-cache")

    tb, dk = interleave(runs, bump, full)
    rebuilt = all(not x.data["results"][0]["up_to_date"] for x in tb)
    t_med, d_med = median([x.seconds for x in tb]), median([x.seconds for x in dk])
    bench = "2 one-pin bump, late layer (mini copy)"
    s.rows += [
        measured(
            bench, "full rebuild of cuda (docker --no-cache)", dk, ratio=1.0, target="baseline"
        ),
        measured(
            bench,
            "twinbuild rebuild of cuda after bump",
            tb,
            ratio=ratio(t_med, d_med),
            target="<= 0.3x full rebuild",
            met=rebuilt and (ratio(t_med, d_med) or 1) <= 0.3,
        ),
        Row(
            benchmark=bench,
            variant="rocm after the cuda-only bump",
            seconds=(),
            target="not rebuilt (up_to_date=True)",
            met=all(rocm),
            note=f"up_to_date={rocm}",
        ),
    ]


def bench_base(s: Session) -> None:
    if s.quick:
        return
    path = s.root / "pins/manifest.toml"
    text = path.read_text()
    # A package list no other image was made from: its base hash is new, so mmdebstrap runs.
    old = 'packages = ["python3", "python3-venv", "git"]'
    path.write_text(text.replace(old, 'packages = ["python3", "python3-venv", "git", "less"]'))
    try:
        s.fresh()
        sample = s.build(("cuda", "rocm"), base=True)
    finally:
        path.write_text(text)
    base = sample.data["base"]
    note = f"ensure_base {base['seconds']:.0f}s" + ("" if base["built"] else ", base existed")
    s.rows.append(
        measured(
            "3 cold build, base included (mini)",
            "ensure_base + sequential cuda+rocm",
            [sample],
            target="reported",
            note=note,
        )
    )
