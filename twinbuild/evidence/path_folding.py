"""Paths as a case-insensitive checkout sees them: one spelling per file, whatever the tree says.

git stores names byte for byte, and Linux writes them so; macOS (APFS, HFS+) and Windows (NTFS)
do not: ``evidence/KEYS/k.pub`` lands in ``evidence/keys/``, ``caf\\u00e9`` and ``cafe\\u0301``
are one name on macOS, HFS+ drops some invisible code points, and Windows drops a trailing dot or
space. So the trust-root rule reads a path twice, as written and :func:`fold`-ed, and a tree in
which two paths fold to one (:func:`collisions`) is refused: which of them a checkout keeps
depends on the order it writes them.

:func:`fold` is wider than any one filesystem (NFKC and full case folding: ``\\u212a`` is ``k``,
``\\u00df`` is ``ss``): reading more paths as a trust root, or as colliding, errs on the side that
asks a person.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

#: Code points HFS+ ignores in a name (git's list in utf8.c, ``next_hfs_char``).
_HFS_IGNORED = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def fold(path: str) -> str:
    """``path`` as a case-insensitive, normalising checkout may write it: invisible code points
    HFS+ ignores dropped, NFKC, case folded, each name without trailing dots and spaces."""
    text = unicodedata.normalize("NFKC", path.translate(_HFS_IGNORED))
    text = unicodedata.normalize("NFKC", text.casefold())
    return "/".join(name.rstrip(". ") or name for name in text.split("/"))


def collisions(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of spellings (files or the folders above them) that :func:`fold` makes one, each
    pair sorted, in order: one pair per folded name (its first two spellings), and none below a
    folder that already collides."""
    spellings: dict[str, set[str]] = {}
    for path in paths:
        names = path.split("/")
        for depth in range(1, len(names) + 1):
            prefix = "/".join(names[:depth])
            spellings.setdefault(fold(prefix), set()).add(prefix)
    colliding = {key for key, found in spellings.items() if len(found) > 1}
    pairs = []
    for key in colliding:
        names = key.split("/")
        if any("/".join(names[:depth]) in colliding for depth in range(1, len(names))):
            continue
        first, second, *_ = sorted(spellings[key])
        pairs.append((first, second))
    return sorted(pairs)
