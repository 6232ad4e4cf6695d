"""Which pip layers a production recipe installs with their dependencies, read from the recipe.

The recipe decides (``pip install --no-deps -r /tmp/tb/kernels.txt`` or not), so the lock reads
it there rather than keep a second list: each ``RUN`` that bind-mounts
``.twinbuild/pip/<layer>.txt`` at a target and runs ``pip install ... -r <target>``. A layer no
recipe installs by ``-r`` (or one installed both ways) counts as installed with its
dependencies: the lock then holds more, never less, than the image may get.
"""

from __future__ import annotations

import re
from pathlib import Path

from twinbuild.util import bounded

_MOUNT = re.compile(r"source=\.twinbuild/pip/([A-Za-z0-9_.-]+)\.txt,target=(\S+?)(?:\s|\\|$)")
_SEGMENT = re.compile(r"&&|;|\|\|")


def no_deps_layers(recipe: Path) -> frozenset[str]:
    """The layers ``recipe`` installs only with ``--no-deps``."""
    text = bounded.read_text(recipe, limit=16 << 20, what="recipe")
    return no_deps_in(text)


def no_deps_in(text: str) -> frozenset[str]:
    joined = re.sub(r"\\\n", " ", text)
    with_deps: set[str] = set()
    without: set[str] = set()
    for line in joined.split("\n"):
        if not line.lstrip().upper().startswith("RUN"):
            continue
        targets = {target: layer for layer, target in _MOUNT.findall(line)}
        for segment in _SEGMENT.split(line):
            if "pip install" not in segment and "pip3 install" not in segment:
                continue
            words = segment.split()
            for target, layer in targets.items():
                if target in words:
                    (without if "--no-deps" in words else with_deps).add(layer)
    return frozenset(without - with_deps)
