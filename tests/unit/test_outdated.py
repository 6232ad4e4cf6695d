"""twinbuild pins outdated: each source asked for real, on 127.0.0.1 and in local git repositories,
and once against PyPI itself; what cannot be asked is one line per source and the report partial.
"""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import mini_project, serving
from tests.unit.gitrepos import git, init, isolate_git, needs_git
from twinbuild.cli.main import main
from twinbuild.pins.outdated import OutdatedOptions, outdated_pins
from twinbuild.pins.pypi_index import default_index
from twinbuild.pins.tags import newest

ROOT = Path(__file__).resolve().parents[2]
FLA = "flash-linear-attention"


class _Index(http.server.BaseHTTPRequestHandler):
    """A simple-API index: JSON (PEP 691) for flash-linear-attention, HTML (PEP 503) for numba,
    and a tags list behind a bearer token for a base (OCI distribution)."""

    def do_GET(self) -> None:
        if self.path == f"/simple/{FLA}/":
            files = [
                {"filename": "flash_linear_attention-0.4.2-py3-none-any.whl"},
                {"filename": "flash_linear_attention-0.5.0.tar.gz"},
                {"filename": "flash_linear_attention-0.6.0-py3-none-any.whl", "yanked": "bad"},
                {"filename": "flash_linear_attention-0.7.0rc1-py3-none-any.whl"},
            ]
            return self._send(200, "application/vnd.pypi.simple.v1+json", {"files": files})
        if self.path == "/simple/numba/":
            page = (
                "<html><body><a href='numba-0.65.1.tar.gz'>numba-0.65.1.tar.gz</a>"
                "<a href='x' data-yanked=''>numba-0.70.0.tar.gz</a>"
                "<a href='y'>numba-0.66.0-cp310-cp310-linux_x86_64.whl</a></body></html>"
            )
            return self._send(200, "text/html", page)
        if self.path.startswith("/token"):
            return self._send(200, "application/json", {"token": "t0k"})
        if self.path.startswith(("/v2/lmsysorg/sglang/tags/list", "/v2/rocm/sgl-dev/tags/list")):
            if self.headers.get("Authorization") != "Bearer t0k":
                self.send_response(401)
                port = self.server.server_address[1]  # type: ignore[index]
                realm = f"http://127.0.0.1:{port}/token"
                self.send_header("WWW-Authenticate", f'Bearer realm="{realm}",service="test"')
                self.end_headers()
                return None
            tags = ["v0.5.6-cu129", "v0.5.7-cu129", "v0.5.10-cu129", "v0.6.0-cu130", "latest",
                    "v0.5.6-rocm700-mi35x", "v0.5.9-rocm700-mi35x", "v0.5.9-rocm630-mi30x"]  # fmt: skip
            return self._send(200, "application/json", {"name": "lmsysorg/sglang", "tags": tags})
        self.send_error(404)
        return None

    def _send(self, status: int, kind: str, body: object) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    with serving(_Index) as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate_git(monkeypatch, tmp_path / "home")
    return mini_project(tmp_path)


def _rows(report: object) -> dict[str, dict[str, object]]:
    """Rows by pin and the variants of its images (the mini project's are amd64 only)."""
    rows = report.to_dict()["rows"]  # type: ignore[attr-defined]
    return {
        f"{r['pin']}:{','.join(v.removesuffix('-amd64') for v in r['variants'])}": r for r in rows
    }


def test_the_index_answers_in_json_and_html(project: Path, server: str) -> None:
    report = outdated_pins(
        OutdatedOptions(
            manifest=project / "pins/manifest.toml", sources=("pypi",),
            index_url=f"http://{server}/simple",
        )
    )  # fmt: skip
    rows = _rows(report)
    fla = rows[f"{FLA}:cuda,rocm"]
    # 0.6.0 is yanked and 0.7.0rc1 a pre-release of a pin that is not one: 0.5.0 is the latest
    assert (fla["current"], fla["latest"], fla["status"]) == ("0.4.2", "0.5.0", "outdated")
    assert fla["images"] == [
        "cuda-amd64:production",
        "cuda-amd64:local",
        "rocm-amd64:production",
        "rocm-amd64:local",
    ]
    numba = rows["numba:rocm"]
    assert (numba["current"], numba["latest"], numba["status"]) == ("0.65.1", "0.66.0", "outdated")
    assert report.partial is False


def test_the_bases_registry_lists_tags_of_the_same_shape(project: Path, server: str) -> None:
    report = outdated_pins(
        OutdatedOptions(
            manifest=project / "pins/manifest.toml", sources=("registry",), base_registry=server
        )
    )
    rows = _rows(report)
    assert rows["variants.cuda.base:cuda"]["latest"] == "v0.5.10-cu129"
    assert rows["variants.cuda.base:cuda"]["status"] == "outdated"
    assert rows["variants.rocm.base:rocm"]["latest"] == "v0.5.9-rocm700-mi35x"


def test_newest_keeps_the_shape() -> None:
    tags = ["v0.5.16", "v0.5.17", "v0.6.0rc1", "v0.5.17-rocm720-mi35x", "v1.0.0", "main"]
    assert newest("v0.5.16", tags) == "v1.0.0"
    assert newest("v0.5.16-rocm720-mi35x", tags) == "v0.5.17-rocm720-mi35x"
    assert newest("latest", tags) is None


@needs_git
def test_a_tracked_branch_that_moved_on(project: Path, tmp_path: Path) -> None:
    upstream = init(tmp_path / "upstream")
    (upstream / "a").write_text("1")
    git(upstream, "add", "a")
    git(upstream, "commit", "-qm", "one")
    old = git(upstream, "rev-parse", "HEAD").strip()
    (upstream / "a").write_text("2")
    git(upstream, "commit", "-qam", "two")
    new = git(upstream, "rev-parse", "HEAD").strip()
    manifest = project / "pins/manifest.toml"
    text = manifest.read_text()
    commit = 'commit = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"\n'
    manifest.write_text(
        text.replace('repo = "https://github.com/fzyzcjy/torch_memory_saver"\n' + commit,
                     f'repo = "file://{upstream}"\ncommit = "{old}"\ntrack = "main"\n', 1)
    )  # fmt: skip
    report = outdated_pins(OutdatedOptions(manifest=manifest, sources=("git",)))
    rows = _rows(report)
    tms = rows["torch_memory_saver:cuda,rocm"]
    assert report.unreachable == (), report.unreachable
    assert (tms["current"], tms["latest"], tms["status"]) == (old, new, "outdated")
    assert tms["note"] == "track main"
    assert report.partial is False


@needs_git
def test_an_unreachable_source_is_one_line_and_the_rest_still_answers(
    project: Path, server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = project / "pins/manifest.toml"
    text = manifest.read_text()
    commit = 'commit = "f05a8754daf68238d54e4cf31cb3ba866684bbaf"\n'
    manifest.write_text(text.replace(commit, commit + 'track = "main"\n', 1).replace(
        "https://github.com/fzyzcjy/torch_memory_saver", f"file://{project}/missing.git", 1))  # fmt: skip
    argv = ["pins", "outdated", "--manifest", str(manifest), "--source", "pypi", "--source", "git",
            "--index-url", f"http://{server}/simple", "--format", "json"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["partial"] is True
    assert report["unreachable"] == [
        f"git: git ls-remote file://{project}/missing.git: fatal: '{project}/missing.git' does "
        "not appear to be a git repository (1 of 1 not asked)"
    ]
    assert captured.err == f"twinbuild: unreachable: {report['unreachable'][0]}\n"
    rows = {r["pin"]: r for r in report["rows"]}
    assert rows["torch_memory_saver"]["status"] == "unknown"
    assert rows[FLA]["status"] == "outdated"


def test_against_pypi_itself(capsys: pytest.CaptureFixture[str]) -> None:
    """The real manifest's PyPI pins, asked of the index pip uses (skipped where it does not
    answer: this test needs the network)."""
    argv = ["pins", "outdated", "--manifest", str(ROOT / "pins/manifest.toml"), "--source",
            "pypi", "--index-url", default_index(), "--format", "json", "-q"]  # fmt: skip
    code = main(argv)
    captured = capsys.readouterr()
    if code == 3:
        pytest.skip(f"the package index does not answer: {captured.err.strip()[:200]}")
    assert code == 0, captured.err
    report = json.loads(captured.out)
    pypi = [r for r in report["rows"] if r["kind"] == "pypi"]
    assert len(pypi) >= 60
    answered = [r for r in pypi if r["latest"] is not None]
    assert len(answered) >= len(pypi) - 3  # a pin only its own index serves has no PyPI release
    fla = next(r for r in pypi if r["pin"] == FLA)
    assert fla["status"] in ("current", "outdated")
    assert all(r["status"] in ("current", "outdated", "floating", "unknown") for r in pypi)


@pytest.mark.parametrize(
    "bad", [" ", "http://r.example", "r.example/x", "r.example:0", "r:99999", "-r"]
)
def test_a_base_registry_that_is_no_host_is_refused_by_the_parser(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI fuzz suite found ``--base-registry=' '`` crashing in http.client: it is a usage
    error now, one line naming the option, before anything is asked."""
    with pytest.raises(SystemExit) as stopped:
        main(["pins", "outdated", f"--base-registry={bad}"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert err.splitlines()[-1].startswith(
        "twinbuild pins outdated: error: argument --base-registry"
    )


def test_an_address_http_client_refuses_is_an_engine_error_not_a_traceback() -> None:
    from twinbuild.errors import EngineError
    from twinbuild.util.exchange import Clock, Request, exchange

    with pytest.raises(EngineError, match="is not an http"):
        exchange(
            Request(method="GET", url="http://127.0.0.1:99999/v2/", what="probe", loopback=True),
            Clock(timeout=1.0, budget=1.0),
        )
