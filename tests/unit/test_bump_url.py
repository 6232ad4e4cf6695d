"""A url pin's version bump moves its download: the url with it, and a new sha256 or nothing.

Before, ``pins bump kubectl --version 1.37.0`` wrote the version and kept the v1.36.3 url and its
sha256; the lint stayed clean and the build got KUBECTL_VERSION=1.37.0 with the old binary. The
real manifest's url pins are bumped here (a copy), the new file served on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import http.server
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import edit, serving
from twinbuild.cli.main import main
from twinbuild.errors import ConfigError, EngineError
from twinbuild.lint.checks import lint_manifest
from twinbuild.manifest.loader import load, loads
from twinbuild.pins.bump import BumpRequest, bump

ROOT = Path(__file__).resolve().parents[2]
OLD_URL = "https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kubectl"
NEW_URL = "https://dl.k8s.io/release/v1.37.0/bin/linux/amd64/kubectl"
OLD_SHA = "ebbd080e7c2e275093b55915722043257eb24004363e20acb3c4d71919f88336"
NEW_SHA = "ab" * 32
BODY = b"kubectl 1.37.0, as served\n" * 1000


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    (tmp_path / "pins").mkdir()
    path = tmp_path / "pins" / "manifest.toml"
    shutil.copy(ROOT / "pins" / "manifest.toml", path)
    return path


class _Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/v1.37.0/moved":
            self.send_response(302)
            self.send_header("Location", "/release/v1.37.0/kubectl")
            self.end_headers()
            return
        if self.path != "/release/v1.37.0/kubectl":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with serving(_Files) as port:
        yield f"http://127.0.0.1:{port}"


def _one_download(manifest: Path) -> None:
    """Leave kubectl one download (the amd64 binary on every image): what one --sha256 names."""
    text = manifest.read_text()
    start = text.index("[pins.kubectl.arm64]\n")
    end = text.index("\n\n", start) + 2
    manifest.write_text(text[:start] + text[end:])


def _moved(result: object, family: str) -> tuple[str, str]:
    """What moved on the first image of a variant whose name starts with ``family``."""
    moved = result.moved  # type: ignore[attr-defined]
    return next(v for k, v in moved.items() if k.variant.startswith(family))  # type: ignore[no-any-return]


def _refused(fetch_url: list[str]) -> object:
    def fetch(url: str, what: str) -> str:
        fetch_url.append(url)
        raise EngineError(f"{what}: the server dl.k8s.io does not answer GET {url}")

    return fetch


def test_a_version_bump_moves_the_url_and_takes_the_given_sha256(manifest: Path) -> None:
    _one_download(manifest)
    before = manifest.read_text()
    result = bump(
        manifest,
        BumpRequest(name="kubectl", version="1.37.0", sha256=NEW_SHA, why="kubectl 1.37.0"),
    )
    after = manifest.read_text()
    assert after == before.replace(OLD_URL, NEW_URL).replace(OLD_SHA, NEW_SHA).replace(
        'version = "1.36.3"', 'version = "1.37.0"'
    ).replace(
        "K L4, L10-13 (KUBECTL_VERSION v1.36.3, the build's architecture); sha256 of each "
        "architecture's binary as published in kubectl.sha256 and cited by several public pins",
        "kubectl 1.37.0",
    )
    assert _moved(result, "cu") == (f"{OLD_URL} sha256:{OLD_SHA}", f"{NEW_URL} sha256:{NEW_SHA}")
    assert not lint_manifest(load(manifest)).findings


def test_one_sha256_for_each_architectures_download_is_refused(manifest: Path) -> None:
    """kubectl downloads one binary per architecture: one --sha256 cannot be both's."""
    before = manifest.read_bytes()
    with pytest.raises(ConfigError, match="one --sha256 for 2 different downloads"):
        bump(
            manifest,
            BumpRequest(name="kubectl", version="1.37.0", sha256=NEW_SHA, why="kubectl 1.37.0"),
        )
    assert manifest.read_bytes() == before


def test_each_architectures_download_moves_with_its_own_sha256(manifest: Path) -> None:
    hashed: list[str] = []

    def fetch(url: str, what: str) -> str:
        hashed.append(url)
        return hashlib.sha256(url.encode()).hexdigest()

    bump(manifest, BumpRequest(name="kubectl", version="1.37.0", why="kubectl 1.37.0"), fetch=fetch)
    arm = NEW_URL.replace("amd64", "arm64")
    assert sorted(hashed) == sorted([NEW_URL, arm])
    moved = load(manifest)
    for image in moved.images(moved.pins["kubectl"].variants):
        values = next(r for r in moved.resolve(image) if r.name == "kubectl").values
        url = arm if image.arch == "linux/arm64" else NEW_URL
        assert (values.url, values.sha256) == (url, hashlib.sha256(url.encode()).hexdigest())
    assert not lint_manifest(load(manifest)).findings


def test_without_a_sha256_the_moved_url_is_fetched_and_a_failure_writes_nothing(
    manifest: Path,
) -> None:
    before = manifest.read_bytes()
    asked: list[str] = []
    with pytest.raises(EngineError, match="does not answer"):
        bump(
            manifest,
            BumpRequest(name="kubectl", version="1.37.0", why="kubectl 1.37.0"),
            fetch=_refused(asked),  # type: ignore[arg-type]
        )
    assert asked == [NEW_URL]
    assert manifest.read_bytes() == before


def test_the_new_download_is_fetched_and_hashed_through_a_redirect(
    manifest: Path, server: str
) -> None:
    result = bump(
        manifest,
        BumpRequest(
            name="kubectl",
            version="1.37.0",
            url=f"{server}/v1.37.0/moved",
            why="kubectl 1.37.0",
        ),
    )
    digest = hashlib.sha256(BODY).hexdigest()
    assert f'url = "{server}/v1.37.0/moved"' in manifest.read_text()
    assert f'sha256 = "{digest}"' in manifest.read_text()
    assert _moved(result, "rocm")[1] == f"{server}/v1.37.0/moved sha256:{digest}"
    assert not lint_manifest(load(manifest)).findings


def test_an_unreachable_download_is_one_line_and_nothing_written(manifest: Path) -> None:
    before = manifest.read_bytes()
    closed = "http://127.0.0.1:9/release/v1.37.0/kubectl"  # discard: nothing listens
    with pytest.raises(EngineError) as refused:
        bump(
            manifest,
            BumpRequest(name="kubectl", version="1.37.0", url=closed, why="kubectl 1.37.0"),
        )
    message = str(refused.value)
    assert "\n" not in message
    assert "connection refused" in message
    assert "pass --sha256 HEX" in message
    assert manifest.read_bytes() == before


def test_the_old_sha256_beside_a_new_url_is_refused(manifest: Path) -> None:
    _one_download(manifest)
    before = manifest.read_bytes()
    with pytest.raises(ConfigError, match="old download's"):
        bump(
            manifest,
            BumpRequest(name="kubectl", version="1.37.0", sha256=OLD_SHA, why="kubectl 1.37.0"),
        )
    assert manifest.read_bytes() == before


def test_a_url_that_does_not_carry_the_version_fails_the_lint_and_writes_nothing(
    manifest: Path,
) -> None:
    before = manifest.read_bytes()
    with pytest.raises(ConfigError, match="TB012") as refused:
        bump(
            manifest,
            BumpRequest(
                name="helm", version="4.3.0", sha256=NEW_SHA, why="helm 4.3.0",
                url="https://get.helm.sh/helm-v4.2.9-linux-amd64.tar.gz",
            ),
        )  # fmt: skip
    assert "its url carries 4.2.9" in str(refused.value)
    assert manifest.read_bytes() == before


def test_a_pin_whose_version_is_what_its_download_installs_keeps_the_url(manifest: Path) -> None:
    before = manifest.read_text()
    result = bump(manifest, BumpRequest(name="rust", version="1.92.0", why="Rust 1.92.0"))
    assert "rustup/archive/1.28.2/" in manifest.read_text()
    assert manifest.read_text().count("1.92.0") == 2  # the version and the why
    assert _moved(result, "rocm")[1].endswith("version 1.92.0")
    assert len(manifest.read_text()) != len(before)
    with pytest.raises(ConfigError, match="its download stays"):
        bump(manifest, BumpRequest(name="rust", version="1.93.0", sha256=NEW_SHA, why="x y"))


def test_url_and_sha256_belong_to_url_pins(manifest: Path) -> None:
    with pytest.raises(ConfigError, match="move a url pin's download"):
        bump(manifest, BumpRequest(name="numba", version="0.65.2", sha256=NEW_SHA, why="numba"))
    with pytest.raises(ConfigError, match="not 64 lower-case hex"):
        bump(manifest, BumpRequest(name="kubectl", version="1.37.0", sha256="AB", why="k 1.37"))


def test_the_issue_case_on_the_command_line_writes_nothing(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = manifest.read_bytes()
    argv = ["pins", "bump", "kubectl", "--version", "1.37.0", "--why", "kubectl 1.37.0",
            "--manifest", str(manifest), "--url", "http://127.0.0.1:9/v1.37.0/kubectl"]  # fmt: skip
    assert main(argv) == 3
    assert manifest.read_bytes() == before
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("twinbuild: pins bump kubectl: the server 127.0.0.1:9 does not answer")


def test_the_lint_refuses_a_url_pin_whose_version_is_not_its_urls(manifest: Path) -> None:
    edit(manifest, 'version = "1.36.3"', 'version = "1.37.0"')  # the bug: the version alone
    findings = lint_manifest(load(manifest)).findings
    assert [(f.code, f.message) for f in findings] == [
        (
            "TB012",
            "pins.kubectl.version: '1.37.0' but its url carries 1.36.3; move both with "
            "twinbuild pins bump kubectl --version 1.37.0 (it moves the url and takes a new "
            'sha256), or, where the download installs that version, say so: installs = "what '
            'it installs"',
        )
    ]


def test_installs_is_only_for_a_url_pin_with_a_version(manifest: Path) -> None:
    text = manifest.read_text().replace(
        "[pins.numba]\n", '[pins.numba]\ninstalls = "numba itself"\n'
    )
    findings = lint_manifest(loads(text, manifest)).findings
    assert [f.code for f in findings] == ["TB012"]
    assert "only a url pin with a version" in findings[0].message


@pytest.mark.parametrize("value", ["\u00b2", "0", "3601", " 60", "1e3"])
def test_the_download_timeout_is_whole_seconds(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``"²".isdigit()`` is true and ``int("²")`` raises: one line, not a traceback."""
    from twinbuild.errors import ConfigError
    from twinbuild.pins.download import TIMEOUT_VAR, clock

    monkeypatch.setenv(TIMEOUT_VAR, value)
    with pytest.raises(ConfigError, match=r"is not a whole number from 1 to 3600"):
        clock()


def test_a_name_that_starts_with_127_is_no_loopback() -> None:
    from twinbuild.pins.download import _loopback

    assert _loopback("http://127.0.0.1:8080/x")
    assert not _loopback("http://127.attacker.example/x")


# --- a url whose file name says the version (issue 41, item 7) ---------------------------------

ROCR_URL = (
    "https://github.com/XinyuJiangCMU/miles-wheels-rocm/releases/download/rocm720-gfx950-v0.5.16/"
    "libhsa-runtime64.so.1.18.70200.vmmfix"
)
ROCR_NEW = ROCR_URL.replace("v0.5.16", "v0.5.17").replace("1.18.70200", "1.18.70201")


def test_a_bump_of_a_pin_whose_file_name_says_the_version_needs_its_new_url(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exit 0, the version moved, the url still said 1.18.70200 (with no sha256), and
    the lint let it through because an installs note explained the release tag."""
    before = manifest.read_bytes()
    argv = ["pins", "bump", "rocr-vmm-fix", "--version", "99.1.0", "--why", "x",
            "--manifest", str(manifest)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "its url's file name 'libhsa-runtime64.so.1.18.70200.vmmfix' says 1.18.70200" in err
    assert "pass --url NEW_URL (and --sha256 HEX), nothing written" in err
    assert manifest.read_bytes() == before


def test_with_its_url_every_field_that_names_the_version_moves(manifest: Path) -> None:
    result = bump(
        manifest,
        BumpRequest(name="rocr-vmm-fix", version="1.18.70201", url=ROCR_NEW, sha256=NEW_SHA,
                    why="the ROCr rebuilt for ROCm 7.2.1"),
    )  # fmt: skip
    text = manifest.read_text()
    assert "1.18.70200" not in text.split("[pins.rocr-vmm-fix]")[1].split("\n[")[0]
    pin = load(manifest).pins["rocr-vmm-fix"]
    assert pin.common.url == ROCR_NEW
    assert pin.common.sha256 == NEW_SHA
    assert pin.common.path == "/opt/twinbuild/downloads/libhsa-runtime64.so.1.18.70201.vmmfix"
    assert pin.installs is not None
    assert "soname 1.18.70201" in pin.installs
    assert result.written
    assert lint_manifest(load(manifest)).findings == []


def test_a_new_url_whose_file_says_another_version_is_refused(manifest: Path) -> None:
    before = manifest.read_bytes()
    with pytest.raises(ConfigError, match="TB012") as refused:
        bump(
            manifest,
            BumpRequest(name="rocr-vmm-fix", version="1.18.70202", url=ROCR_NEW, sha256=NEW_SHA,
                        why="the ROCr rebuilt"),
        )  # fmt: skip
    assert "its file name 'libhsa-runtime64.so.1.18.70201.vmmfix' says 1.18.70201" in str(
        refused.value
    )
    assert manifest.read_bytes() == before


def test_the_lint_reads_the_file_name_whatever_installs_says(manifest: Path) -> None:
    """The issue's result, written by hand: an installs note explains the release tag, never the
    file; the path that names the file is held to the version too."""
    edit(manifest, 'version = "1.18.70200"', 'version = "99.1.0"')
    found = [(f.code, f.message) for f in lint_manifest(load(manifest)).findings]
    assert found == [
        (
            "TB012",
            "pins.rocr-vmm-fix.url: its file name 'libhsa-runtime64.so.1.18.70200.vmmfix' says "
            "1.18.70200 but the version is '99.1.0'; installs may explain a release tag, never "
            "the file: bump the pin with its download: twinbuild pins bump rocr-vmm-fix "
            "--version 99.1.0 --url URL_OF_THAT_VERSION",
        ),
        (
            "TB012",
            "pins.rocr-vmm-fix.path: its file name 'libhsa-runtime64.so.1.18.70200.vmmfix' says "
            "1.18.70200 but the version is '99.1.0'; installs may explain a release tag, never "
            "the file: name the file after the version it holds (a bump moves both)",
        ),
    ]


@pytest.mark.parametrize(
    ("url", "versions"),
    [
        (ROCR_URL, ["1.18.70200"]),
        ("https://get.helm.sh/helm-v4.2.3-linux-amd64.tar.gz", ["4.2.3"]),
        ("https://dl.k8s.io/release/v1.36.3/bin/linux/amd64/kubectl", []),
        ("https://example.invalid/abc1.2.3/libfoo1.2.3.so", []),  # a number's dot: no version
        ("/opt/twinbuild/downloads/libcudnn.so.9.1.0", ["9.1.0"]),
        ("https://example.invalid/a/x86_64-cu13.tar.gz?v=1.2", []),  # the query is no file name
    ],
)
def test_what_a_file_name_says(url: str, versions: list[str]) -> None:
    from twinbuild.manifest import url_version

    assert url_version.file_versions(url) == versions


def test_a_version_of_4400_digits_is_one_line_not_a_traceback(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the CLI fuzz suite: packaging's Version raised Python's own ValueError (over 4,300
    digits), which the bump and the lint did not expect."""
    huge = "9" * 4400
    argv = ["pins", "bump", "kubectl", "--version", huge, "--why", "kubectl, huge",
            "--manifest", str(manifest)]  # fmt: skip
    assert main(argv) == 2
    assert "is not a PEP 440 version" in capsys.readouterr().err
    edit(manifest, 'version = "1.36.3"', f'version = "{huge}"')
    codes = [f.code for f in lint_manifest(load(manifest)).findings]
    assert "TB006" in codes
