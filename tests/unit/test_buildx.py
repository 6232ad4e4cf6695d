"""Installing ``docker buildx`` where it is missing, from Debian 13's archive on the mirror the
manifest names or, with none named (the embedded default), the one this host's apt sources use.

Found on a fresh machine: with ``[local] mirror`` unset, the private apt state listed
``deb [signed-by=...]  trixie main`` (no URI) and apt refused it ("Malformed entry 1"), so every
buildx test failed before building anything. The sources below are the files Debian ships: the
deb822 ``debian.sources`` of its 12 images (a comment line inside the stanza) and the one-line
``sources.list`` of older installs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.unit.fake_host import FakeHost
from twinbuild.engine import apt_sources, buildx
from twinbuild.errors import ConfigError

DEBIAN_12_IMAGE = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
ONE_LINE = """\
# deb cdrom:[Debian GNU/Linux 12.5.0 _Bookworm_ - Official amd64 NETINST]/ bookworm main

deb http://security.debian.org/debian-security bookworm-security main non-free-firmware
deb-src http://ftp.example.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.example.org/debian/ bookworm main contrib
"""

NODESOURCE = """\
Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/nodesource.gpg
"""


def _etc(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    etc = tmp_path / "etc-apt"
    (etc / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        path = etc / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    return etc


def test_the_deb822_file_of_debian_12_images_names_its_mirror(tmp_path: Path) -> None:
    etc = _etc(tmp_path, {"sources.list.d/debian.sources": DEBIAN_12_IMAGE})
    assert apt_sources.debian_mirror(etc, "bookworm") == "http://deb.debian.org/debian"


def test_the_one_line_format_skips_comments_sources_and_the_security_archive(
    tmp_path: Path,
) -> None:
    etc = _etc(tmp_path, {"sources.list": ONE_LINE})
    assert apt_sources.debian_mirror(etc, "bookworm") == "http://ftp.example.org/debian/"


@pytest.mark.parametrize(
    "files",
    [
        {},  # no sources at all
        {"sources.list": "deb cdrom:[Debian]/ bookworm main\n"},
        {"sources.list.d/off.sources": DEBIAN_12_IMAGE.replace("Types: deb\n", "Types: deb\nEnabled: no\n")},
        {"sources.list.d/third.list": "deb https://packages.example.org/apt bookworm contrib\n"},
        {"sources.list.d/nodesource.sources": NODESOURCE},
        {"sources.list.d/vendor.list": "deb [signed-by=/usr/share/keyrings/vendor.gpg] https://apt.example.org bookworm main\n"},
        {"sources.list.d/trixie.sources": DEBIAN_12_IMAGE.replace("bookworm", "trixie")},
        {"sources.list.d/junk.sources": b"\xff\xfe\x00Types: deb\nURIs"},
        {"sources.list.d/cut.sources": "Types: deb\nURIs: http://ftp.example.org/debian\n"},
        {"sources.list.d/x.sources.disabled": DEBIAN_12_IMAGE},
    ],
    ids=[
        "none", "cdrom", "disabled", "no-main", "nodesource", "other-key", "other-release",
        "binary", "no-suites", "not-a-sources-file",
    ],
)  # fmt: skip
def test_no_usable_debian_source_is_none(tmp_path: Path, files: dict[str, str | bytes]) -> None:
    assert apt_sources.debian_mirror(_etc(tmp_path, files), "bookworm") is None


def test_an_unreadable_sources_folder_is_none(tmp_path: Path) -> None:
    etc = tmp_path / "etc-apt"
    etc.mkdir()
    (etc / "sources.list.d").write_text("a file where a folder belongs")
    (etc / "sources.list").mkdir()
    assert apt_sources.debian_mirror(etc, "bookworm") is None


class BuildxHost(FakeHost):
    """A Debian root machine whose docker CLI gains buildx once apt installs its .deb."""

    PROGRAM = ("docker-buildx", "/usr/libexec/docker/cli-plugins/docker-buildx")

    def __init__(self) -> None:
        super().__init__(binaries={"docker": "/usr/bin/docker"})

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        if list(argv[1:]) == ["buildx", "version"]:
            self.ran.append(list(argv))
            if "docker-buildx" not in self.binaries:
                return 1, "docker: 'buildx' is not a docker command."
            return 0, "github.com/docker/buildx 0.13.1 Debian"
        if argv[0] == "sh":  # apt-get download, in the downloads folder
            folder = Path(argv[4])
            (folder / f"docker-buildx_{buildx.VERSION.replace(':', '%3a')}_amd64.deb").write_text(
                ""
            )
        return super().run(argv)


def test_with_no_mirror_named_the_hosts_own_is_listed(tmp_path: Path) -> None:
    machine = BuildxHost()
    etc = _etc(tmp_path, {"sources.list.d/debian.sources": DEBIAN_12_IMAGE})
    found = buildx.ensure_buildx(
        mirror="",
        host=machine,
        say=lambda _: None,
        state=tmp_path / "state",
        apt_etc=etc,
        release="bookworm",
    )
    assert found.installed
    assert found.version.startswith("github.com/docker/buildx 0.13.1")
    listed = (tmp_path / "state" / "sources.list").read_text()
    assert listed == (
        f"deb [signed-by={buildx.KEYRING}] http://deb.debian.org/debian trixie main\n"
    )
    assert machine.ran[-2] == [
        "apt-get", "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=600",
        str(tmp_path / "state/debs" / f"docker-buildx_{buildx.VERSION}_amd64.deb"),
    ]  # fmt: skip


def test_the_manifests_mirror_wins_over_the_hosts(tmp_path: Path) -> None:
    etc = _etc(tmp_path, {"sources.list.d/debian.sources": DEBIAN_12_IMAGE})
    buildx.ensure_buildx(
        mirror="http://mirror.example.org/debian/", host=BuildxHost(), say=lambda _: None,
        state=tmp_path / "state", apt_etc=etc, release="bookworm",
    )  # fmt: skip
    listed = (tmp_path / "state" / "sources.list").read_text()
    assert " http://mirror.example.org/debian trixie main" in listed


def test_no_mirror_anywhere_is_one_line_naming_the_key_and_installs_nothing(
    tmp_path: Path,
) -> None:
    machine = BuildxHost()
    with pytest.raises(ConfigError) as caught:
        buildx.ensure_buildx(
            mirror="", host=machine, say=lambda _: None, state=tmp_path / "state",
            apt_etc=_etc(tmp_path, {}),
        )  # fmt: skip
    assert str(caught.value) == (
        f"buildx: no Debian mirror to install {buildx.PACKAGE} {buildx.VERSION} from: the "
        f"manifest's [local] mirror is unset and {tmp_path / 'etc-apt'} lists no Debian archive; "
        "set [local] mirror in pins/manifest.toml (an http(s) URL) or install docker-buildx by hand"
    )
    assert not any(argv[0] in ("apt-get", "sh") for argv in machine.ran)
    assert not (tmp_path / "state").exists()
