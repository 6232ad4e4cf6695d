"""What emulation costs: the mini project's ``cuda`` variant built and smoke-tested on linux/amd64
natively and on linux/arm64 under QEMU (binfmt_misc), cold layers each time, interleaved in one
run so that the machine's noise hits both. The arm64 base is made (or imported) before the clock
starts; ``twinbuild binfmt`` must have registered the interpreter (root)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tools.bench.child import Sample, spawn
from tools.bench.session import Session, interleave, measured
from tools.bench.stats import median, ratio

ARCHS = ("linux/amd64", "linux/arm64")
TWO_ARCHS = (
    '[variants.cuda]\narchs = ["linux/amd64"]',
    '[variants.cuda]\narchs = ["linux/amd64", "linux/arm64"]',
)


def _copy(s: Session) -> Path:
    """A copy of the mini project whose cuda variant builds both architectures."""
    root = s.work / "emulation"
    shutil.copytree(s.root, root, ignore=shutil.ignore_patterns("build", ".twinbuild"))
    manifest = root / "pins/manifest.toml"
    old, new = TWO_ARCHS
    manifest.write_text(manifest.read_text().replace(old, new, 1))
    return root


def _smoke(s: Session, root: Path, arch: str) -> Sample:
    reports = str(s.work / "emulation-smoke")
    argv = [sys.executable, "-m", "twinbuild", "smoke", "--root", str(root), "--variant", "cuda",
            "--arch", arch, "--profile", "local", "--report-dir", reports]  # fmt: skip
    return spawn(argv, env=s.env)


def bench_emulation(s: Session) -> None:
    root = _copy(s)
    runs = 1 if s.quick else 2
    for arch in ARCHS:  # bases and the wheels each architecture needs: not measured
        s.build(["cuda"], root=str(root), arch=arch, base=True)

    def build(arch: str) -> Sample:
        s.fresh(root)
        return s.build(["cuda"], root=str(root), arch=arch)

    builds = interleave(runs, lambda: build(ARCHS[0]), lambda: build(ARCHS[1]))
    for arch in ARCHS:  # both images of the recipe as it now stands, which the smoke checks
        s.build(["cuda"], root=str(root), arch=arch)
    smokes = interleave(runs, lambda: _smoke(s, root, ARCHS[0]), lambda: _smoke(s, root, ARCHS[1]))
    for what, pair in (("build, cold layers", builds), ("smoke", smokes)):
        bench = f"9 emulation: {what} (mini cuda, local profile)"
        native = median([x.wall for x in pair[0]])
        s.rows.append(
            measured(bench, "linux/amd64, native", pair[0], ratio=1.0, target="baseline", wall=True)
        )
        s.rows.append(
            measured(
                bench, "linux/arm64 under QEMU", pair[1], target="reported", wall=True,
                ratio=ratio(median([x.wall for x in pair[1]]), native),
            )
        )  # fmt: skip
