"""Write what pip and git would have left behind, without either: dist-info, a checkout, a file."""

import json
import sysconfig
from pathlib import Path

SITE = Path(sysconfig.get_paths()["purelib"])
GIT_COMMIT = "a" * 40
CHECKOUT_COMMIT = "c" * 40


def dist(name: str, version: str, direct_url: dict[str, object] | None = None) -> None:
    info = SITE / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    (SITE / f"{name}.py").write_text(f"VERSION = {version!r}\n")


dist("tinydist", "1.2.3")
dist("rangedist", "0.9")
dist(
    "gitdist",
    "0.1.0",
    {
        "url": "file:///twinbuild/mirrors/gitdist.git",
        "vcs_info": {"vcs": "git", "commit_id": GIT_COMMIT},
    },
)
checkout = Path("/opt/smoke/checkout")
(checkout / ".git/refs/heads").mkdir(parents=True)
(checkout / ".git/HEAD").write_text("ref: refs/heads/main\n")
(checkout / ".git/refs/heads/main").write_text(CHECKOUT_COMMIT + "\n")
Path("/opt/smoke/artifact.bin").write_bytes(b"twinbuild smoke artifact\n")
perf = Path("/opt/smoke/bin/all_reduce_perf")
perf.parent.mkdir(parents=True)
perf.write_text("#!/bin/sh\necho 'Avg bus bandwidth : 0'\n")
perf.chmod(0o755)
Path("/opt/smoke/site").write_text(str(SITE))  # where derived images edit the metadata
