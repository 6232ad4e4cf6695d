"""``docker buildx``: found, or installed from Debian the way the engine's docker.io is.

Debian 12 has no ``docker-buildx``; Debian 13 (trixie) has 0.13.1, whose .deb needs only libc6
>= 2.34, so it installs on Debian 12 too. Without touching the host's apt sources, a private apt
state under ``<cache>/buildx-apt/`` lists trixie's main archive (from the manifest's Debian
mirror or, where it names none, the one this host's apt sources use: :mod:`apt_sources`; checked
against Debian's archive keyring), ``apt-get download`` fetches the pinned
version by name (apt checks it against the signed index) and ``apt-get install ./FILE`` installs
it, refusing it where a dependency is missing. The plugin lands in
``/usr/libexec/docker/cli-plugins``, where every docker CLI looks.

Everything runs through :class:`~twinbuild.engine.host.Host`, so tests run it against the fake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from twinbuild.engine.apt_sources import APT_ETC, debian_mirror
from twinbuild.engine.host import APT_INSTALL, Host, SystemHost
from twinbuild.errors import ConfigError, EngineError
from twinbuild.util.activity import Say, step, to_stderr
from twinbuild.util.paths import cache_root

PACKAGE = "docker-buildx"
#: The Debian 13 version installed where buildx is missing (0.13.1: what `bake` is checked with).
VERSION = "0.13.1+ds1-3"
SUITE = "trixie"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


@dataclass(frozen=True, slots=True, kw_only=True)
class Buildx:
    """The docker CLI that has buildx, and buildx's version line."""

    docker: str
    version: str
    installed: bool = False  # this call installed it

    def describe(self) -> str:
        verb = "installed" if self.installed else "found"
        return f"buildx: {verb}: {self.version}"


def version(host: Host, docker: str) -> str | None:
    """``docker buildx version``'s line, or None where the CLI has no buildx."""
    rc, out = host.run([docker, "buildx", "version"])
    first = out.strip().splitlines()[0] if out.strip() else ""
    return first if rc == 0 and first.startswith(("github.com/docker/buildx", "buildx")) else None


def apt_options(state: Path) -> list[str]:
    """apt's settings for the private trixie state: its own sources, lists, cache and status."""
    return [
        "-o", f"Dir::Etc::SourceList={state / 'sources.list'}",
        "-o", "Dir::Etc::SourceParts=/dev/null",
        "-o", f"Dir::State::Lists={state / 'lists'}",
        "-o", f"Dir::Cache={state / 'cache'}",
        "-o", "Dir::State::status=/dev/null",
        "-o", "APT::Sandbox::User=root",
    ]  # fmt: skip


def ensure_buildx(
    *,
    mirror: str,
    host: Host | None = None,
    say: Say = to_stderr,
    state: Path | None = None,
    apt_etc: Path = APT_ETC,
    release: str | None = None,
) -> Buildx:
    """The docker CLI's buildx; installed from ``mirror``'s trixie archive where it is missing
    (as root on Debian). ``mirror`` is a Debian mirror URL, the manifest's ``[local] mirror``;
    empty, the Debian mirror of this host's release (``release``) in ``apt_etc``'s sources."""
    host = host or SystemHost()
    docker = host.which("docker")
    if docker is None:
        raise EngineError(
            "no docker CLI on PATH (buildx is one of its plugins); install Debian's docker.io "
            "(`twinbuild engine up` does as root)"
        )
    found = version(host, docker)
    if found is not None:
        return Buildx(docker=docker, version=found)
    if not (host.is_root() and host.is_debian()):
        raise EngineError(
            f"{docker} has no buildx plugin; install {PACKAGE} (twinbuild installs Debian's "
            f"{PACKAGE} {VERSION} only as root on Debian)"
        )
    mirror = mirror or debian_mirror(apt_etc, release) or ""
    if not mirror:
        raise ConfigError(
            f"buildx: no Debian mirror to install {PACKAGE} {VERSION} from: the manifest's "
            f"[local] mirror is unset and {apt_etc} lists no Debian archive; set [local] mirror "
            f"in pins/manifest.toml (an http(s) URL) or install {PACKAGE} by hand"
        )
    state = state or cache_root() / "buildx-apt"
    with step(f"buildx: installing Debian {SUITE}'s {PACKAGE} {VERSION}", say):
        _install(host, mirror, state)
    found = version(host, docker)
    if found is None:
        raise EngineError(
            f"{PACKAGE} {VERSION} installed, but `{docker} buildx version` still fails; check "
            "/usr/libexec/docker/cli-plugins/docker-buildx"
        )
    return Buildx(docker=docker, version=found, installed=True)


def _install(host: Host, mirror: str, state: Path) -> None:
    for folder in (state / "lists" / "partial", state / "cache" / "archives" / "partial"):
        folder.mkdir(parents=True, exist_ok=True)
    (state / "sources.list").write_text(
        f"deb [signed-by={KEYRING}] {mirror.rstrip('/')} {SUITE} main\n", encoding="utf-8"
    )
    options = apt_options(state)
    downloads = state / "debs"
    downloads.mkdir(exist_ok=True)
    deb = downloads / f"{PACKAGE}_{VERSION.replace(':', '%3a')}_amd64.deb"
    _must(host, ["apt-get", *options, "update"], "list Debian's trixie archive")
    _must(
        host,
        ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(downloads),
         "apt-get", *options, "download", f"{PACKAGE}={VERSION}"],
        f"download {PACKAGE} {VERSION}",
    )  # fmt: skip
    if not deb.is_file():
        found = sorted(downloads.glob(f"{PACKAGE}_*.deb"))
        if not found:
            raise EngineError(f"apt-get download left no {PACKAGE} .deb in {downloads}")
        deb = found[-1]
    _must(
        host,
        [*APT_INSTALL, str(deb)],
        f"install {deb.name}",
    )


def _must(host: Host, argv: Sequence[str], what: str) -> None:
    rc, out = host.run(argv)
    if rc != 0:
        tail = " | ".join(out.strip().splitlines()[-3:])
        raise EngineError(
            f"buildx: could not {what} (`{argv[0]}` exit {rc}): {tail}; install {PACKAGE} by "
            "hand and rerun"
        )
