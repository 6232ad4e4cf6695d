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

import functools
import unicodedata
from collections.abc import Iterable

#: Code points HFS+ ignores in a name (git's list in utf8.c, ``next_hfs_char``).
_HFS_IGNORED = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def fold(path: str) -> str:
    """``path`` as a case-insensitive, normalising checkout may write it: each name with the
    invisible code points HFS+ ignores dropped, NFKC, case folded, without trailing dots and
    spaces (a name that folds to a ``/``, a fullwidth solidus, keeps it: reading more paths as a
    trust root is the safe side)."""
    return "/".join(_fold_name(name) for name in path.split("/"))


@functools.lru_cache(maxsize=1 << 16)
def _fold_name(name: str) -> str:
    """One name folded; names repeat across a tree's paths, so each is folded once."""
    text = unicodedata.normalize("NFKC", name.translate(_HFS_IGNORED))
    text = unicodedata.normalize("NFKC", text.casefold())
    return text.rstrip(". ") or text


def collisions(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of spellings (files or the folders above them) that :func:`fold` makes one, each
    pair sorted, in order: one pair per folded name (its first two spellings), and none below a
    folder that already collides."""
    spellings: dict[str, set[str]] = {}
    for path in paths:
        names = path.split("/")
        folded = [_fold_name(name) for name in names]
        for depth in range(1, len(names) + 1):
            key = "/".join(folded[:depth])
            spellings.setdefault(key, set()).add("/".join(names[:depth]))
    colliding = {key for key, found in spellings.items() if len(found) > 1}
    pairs = []
    for key in colliding:
        # one line for the highest folder that collides, none for what lies below it
        first, second, *_ = sorted(spellings[key])
        names = first.split("/")
        above = ("/".join(_fold_name(n) for n in names[:depth]) for depth in range(1, len(names)))
        if not any(prefix in colliding for prefix in above):
            pairs.append((first, second))
    return sorted(pairs)
