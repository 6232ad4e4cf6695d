"""The Debian mirror this host's apt already uses, read from its sources.

Where the manifest names no ``[local] mirror`` (the embedded default), the buildx install lists
Debian 13's archive from the same mirror this machine installs its own packages from. That is the
first enabled ``deb`` source, in apt's own order (``sources.list``, then ``sources.list.d/`` by
name), that serves this host's release (``VERSION_CODENAME`` in ``/etc/os-release``: not
``-updates`` or ``-security``) with its ``main`` component, over http(s), and is signed by
Debian's archive keyring or by no key of its own. Both formats apt reads count: the one-line
``*.list`` and the deb822 ``*.sources`` (comment lines inside a stanza, ``Enabled: no``). A file
that cannot be read or decoded is passed over: the answer is then "none", never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

APT_ETC = Path("/etc/apt")
OS_RELEASE = Path("/etc/os-release")
#: What a Debian archive's Signed-By names (``debian-archive-keyring.gpg`` and its parts).
DEBIAN_KEYRINGS = "debian-archive-"


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One ``deb`` line, or one deb822 stanza, as apt reads it."""

    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str = ""


def codename(os_release: Path = OS_RELEASE) -> str | None:
    """This host's release (``bookworm``), from ``VERSION_CODENAME``."""
    for line in _text(os_release).splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "VERSION_CODENAME":
            return value.strip().strip("\"'") or None
    return None


def debian_mirror(etc: Path = APT_ETC, release: str | None = None) -> str | None:
    """The URI of this host's Debian archive, or None (see the module doc)."""
    release = release or codename()
    if release is None:
        return None
    for source in sources(etc):
        signer = source.signed_by.rpartition("/")[2]
        if (
            release in source.suites
            and "main" in source.components
            and source.uri.startswith(("http://", "https://"))
            and (not signer or signer.startswith(DEBIAN_KEYRINGS))
        ):
            return source.uri
    return None


def sources(etc: Path = APT_ETC) -> Iterator[Source]:
    """Every enabled ``deb`` source under ``etc``, in apt's order."""
    yield from _one_line(_text(etc / "sources.list"))
    parts = etc / "sources.list.d"
    try:
        names = sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    except OSError:
        return
    for path in names:
        text = _text(path)
        yield from _one_line(text) if path.suffix == ".list" else _deb822(text)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _one_line(text: str) -> Iterator[Source]:
    for raw in text.splitlines():
        words = raw.partition("#")[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        options: dict[str, str] = {}
        if words and words[0].startswith("["):
            joined = " ".join(words)
            inside, _, after = joined[1:].partition("]")
            for option in inside.split():
                key, _, value = option.partition("=")
                options[key] = value
            words = after.split()
        if len(words) >= 2:
            yield Source(
                uri=words[0], suites=(words[1],), components=tuple(words[2:]),
                signed_by=options.get("signed-by", ""),
            )  # fmt: skip


def _deb822(text: str) -> Iterator[Source]:
    stanza: dict[str, str] = {}
    for raw in [*text.splitlines(), ""]:
        if raw.startswith("#"):
            continue  # a comment, inside a stanza or between two
        if not raw.strip():
            if stanza:
                yield from _stanza(stanza)
            stanza = {}
            continue
        if raw[0].isspace() and stanza:  # a continuation of the field before
            last = next(reversed(stanza))
            stanza[last] += " " + raw.strip()
            continue
        key, _, value = raw.partition(":")
        stanza[key.strip().lower()] = value.strip()


def _stanza(fields: dict[str, str]) -> Iterator[Source]:
    if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
        return
    suites = tuple(fields.get("suites", "").split())
    if not suites:
        return
    for uri in fields.get("uris", "").split():
        yield Source(
            uri=uri, suites=suites, components=tuple(fields.get("components", "").split()),
            signed_by=fields.get("signed-by", ""),
        )  # fmt: skip
