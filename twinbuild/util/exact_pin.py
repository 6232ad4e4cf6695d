"""The one PEP 440 rule for an exact pin (``name==V``): does an installed version satisfy it?

Standard library only: the production recipes mount this file next to
``images/common/verify_pins.py`` and run it with the image's Python, where ``packaging`` may be
missing; the smoke conformance imports it from here. One rule, two callers, so the build and the
smoke suite can never disagree about a pin.

PEP 440, "Version matching": when ``V`` carries no local label (``+...``), the candidate's local
label is ignored, so ``==0.6.15.post1`` accepts ``0.6.15.post1+cu130`` (flashinfer's CUDA 13
wheels). A pin that names a local label requires exactly that label. Versions compare after
normalisation (``1.0`` == ``1.0.0``, ``0.6.15-post1`` == ``0.6.15.post1``). A string that is
not a PEP 440 version matches only itself.
"""

from __future__ import annotations

import re

# The public grammar of PEP 440 (appendix B), written for the standard library.
_VERSION = re.compile(
    r"""
    ^\s*v?
    (?:(?P<epoch>[0-9]+)!)?
    (?P<release>[0-9]+(?:\.[0-9]+)*)
    (?P<pre>[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
    (?P<post>(?:-(?P<post_n1>[0-9]+))|(?:[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?))?
    (?P<dev>[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$
    """,
    re.VERBOSE | re.IGNORECASE,
)
_PRE = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "pre": "rc", "preview": "rc"}

Public = tuple[object, ...]
Local = tuple[int | str, ...]


def split(version: str) -> tuple[Public, Local | None] | None:
    """(normalised public version, normalised local label or None); None if not PEP 440."""
    m = _VERSION.match(version)
    if m is None:
        return None
    release = [int(x) for x in m.group("release").split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()  # 1.0 == 1.0.0
    pre: tuple[str, int] | None = None
    if m.group("pre"):
        label = m.group("pre_l").lower()
        pre = (_PRE.get(label, label), int(m.group("pre_n") or 0))
    post: int | None = None
    if m.group("post"):
        post = int(m.group("post_n1") or m.group("post_n2") or 0)
    dev = int(m.group("dev_n") or 0) if m.group("dev") else None
    public: Public = (int(m.group("epoch") or 0), tuple(release), pre, post, dev)
    local: Local | None = None
    if m.group("local"):
        local = tuple(
            int(part) if part.isdigit() else part.lower()
            for part in re.split(r"[-_.]", m.group("local"))
        )
    return public, local


def matches(pinned: str, installed: str) -> bool:
    """Does ``installed`` satisfy the exact pin ``==pinned`` under PEP 440?"""
    want = split(pinned)
    got = split(installed)
    if want is None or got is None:
        return pinned.strip() == installed.strip()
    if want[0] != got[0]:
        return False
    return want[1] is None or want[1] == got[1]
