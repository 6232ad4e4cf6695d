"""Write the pip constraints every layer of this build takes, from the lock's (twinbuild).

    python3 base_constraints.py GENERATED OUT

GENERATED is ``.twinbuild/pip/constraints.txt``, made from the image's lock (one
``name==version`` per locked distribution). Where the lock was made with a capture of this
base (its marker line says so), the file is the build's as it is: the base's distributions are
in it at their captured versions. Where it was not, the lock does not know what the base has
installed, so every line naming a distribution installed here, now (before any layer: the base)
is left out, with a comment saying which version the base has: pip keeps the base's, as it would
without the lock, instead of replacing it with the version the lock resolved from the index
alone. Standard library only: it runs in the base's own Python.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

CAPTURED = "# twinbuild-base: captured"
LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(generated: str, out: str) -> int:
    lines = Path(generated).read_text(encoding="utf-8").splitlines()
    installed: dict[str, str] = {}
    if CAPTURED not in lines:
        for dist in importlib.metadata.distributions():
            name = dist.metadata["Name"]
            if name:
                installed.setdefault(normalise(name), dist.version)
    kept = []
    for line in lines:
        match = LINE.match(line)
        if match and normalise(match.group(1)) in installed:
            have = installed[normalise(match.group(1))]
            kept.append(
                f"# the base's: {match.group(1)} {have} (the lock, made without a capture of "
                f"the base, has {match.group(2)})"
            )
            continue
        kept.append(line)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text("\n".join(kept) + "\n", encoding="utf-8")
    left = sum(1 for line in kept if LINE.match(line))
    based = sum(1 for line in kept if line.startswith("# the base's: "))
    print(f"constraints: {left} locked versions, {based} left to the base", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: base_constraints.py GENERATED OUT")
    sys.exit(main(sys.argv[1], sys.argv[2]))
