"""The production constraints (#38): what a production build's decision pays for its pip
constraints (``twinbuild/closure/constraints.py``: the image's lock read and written out as
``name==version`` lines after the inputs hash), measured as the six images' inputs hash alone
beside the hash and the constraints. The local profile's no-op never reads them."""

from __future__ import annotations

from pathlib import Path

from tools.bench.child import child
from tools.bench.session import Session, measured
from tools.bench.stats import median


def bench_constraints(s: Session) -> None:
    root = str(Path(s.extra["repo_root"]))
    runs = 1 if s.quick else 5
    child({"kind": "inputs", "root": root, "constraints": True}, s.env)  # the lock memo, warm
    plain = [child({"kind": "inputs", "root": root}, s.env) for _ in range(runs)]
    job = {"kind": "inputs", "root": root, "constraints": True}
    made = [child(job, s.env) for _ in range(runs)]
    ratio = median([x.seconds for x in made]) / median([x.seconds for x in plain])
    s.rows.append(measured(
        "production decision, constraints", "six images: inputs hash, then the constraints",
        made, target="reported", ratio=ratio,
        note=f"{int(made[0].data['constraints'])} constraint lines in the six files",
    ))  # fmt: skip
    s.rows.append(measured(
        "production decision, constraints", "six images: inputs hash alone (before)", plain,
        target="reported",
    ))  # fmt: skip
