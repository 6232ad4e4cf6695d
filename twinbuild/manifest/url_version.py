"""The version a url pin's address carries: the lint holds ``version`` to it, a bump moves it.

``https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kubectl`` carries 1.36.3,
``helm-v4.2.3-linux-amd64.tar.gz`` 4.2.3 and ``libhsa-runtime64.so.1.18.70200.vmmfix``
1.18.70200: a version is a dotted run of numbers (``x86_64`` and ``cu13`` are not), standing
alone between the address's separators (a dot after a word, as in a soname, is one), a ``v`` in
front allowed. Only the path and query are read: a host (``127.0.0.1``) is no version.

The **file name** (the last segment of the path) is read on its own too: what it says is the
version of the file, whatever a pin's ``installs`` note says of the rest of the address (a
release tag may name something else; the file never does).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

#: A dotted version in an address: digits, at least one dot, an optional PEP 440-ish tail
#: (``1.2.3rc1``, ``2.7.4.post1``); not preceded by a letter or digit other than ``v``, nor by a
#: dot after a number (``abc1.2.3`` has no version 2.3), but by a dot after a letter (``.so.1.2``).
_VERSION = re.compile(
    r"(?:(?<![A-Za-z0-9.])|(?<=[A-Za-z]\.))"
    r"v?(?P<version>[0-9]+(?:\.[0-9]+)+(?:(?:a|b|rc|\.post|\.dev)[0-9]+)*)"
    r"(?![A-Za-z0-9]|\.[0-9])"
)


def _split(url: str) -> tuple[str, str]:
    """The address up to its path, and the rest (path, query, fragment)."""
    parts = urlsplit(url)
    head = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    return (head, url[len(head) :]) if url.startswith(head) else ("", url)


def versions_in(url: str) -> list[str]:
    """Every version the address carries, in order (usually one)."""
    return [m["version"] for m in _VERSION.finditer(_split(url)[1])]


def file_name(url: str) -> str:
    """The last segment of the address's path (``kubectl``, ``helm-v4.2.3-linux-amd64.tar.gz``);
    of a plain path, its last part."""
    path = urlsplit(url).path if "://" in url else url
    return path.rstrip("/").rpartition("/")[2]


def file_versions(url: str) -> list[str]:
    """Every version the file name carries, in order (usually none or one)."""
    return [m["version"] for m in _VERSION.finditer(file_name(url))]


def carries(url: str, version: str) -> bool:
    """Whether the address carries exactly ``version``."""
    return version in versions_in(url)


def moved(url: str, old: str, new: str) -> str | None:
    """The address with every ``old`` version it carries replaced by ``new``; None when it
    carries no ``old`` (a bump cannot guess where the new download lives)."""
    found = False

    def swap(match: re.Match[str]) -> str:
        nonlocal found
        if match["version"] != old:
            return match[0]
        found = True
        start, end = match.span("version")
        offset = match.start()
        return match[0][: start - offset] + new + match[0][end - offset :]

    head, rest = _split(url)
    result = head + _VERSION.sub(swap, rest)
    return result if found else None
