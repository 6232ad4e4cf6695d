"""Build once, push, smoke and release the same digest: against the real engine and a real registry.

The registry is Debian's docker-registry, started by ``twinbuild.engine.registry`` (it installs
the package when missing, like ``engine up`` installs docker.io): the session's one
(tests/session_registry.py), which test_multiarch.py pushes to too, never at the same time. The origin is a local bare git repository. There is no GPU here: the rehearsal's GPU
section is supplied by the test and labelled so in the report it signs.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import MINI_VARIANTS, edit, free_port, image, mini_project, run_twinbuild
from tests.session_registry import SessionRegistry
from twinbuild import evidence
from twinbuild.engine import registry
from twinbuild.engine.client import Engine, connect
from twinbuild.engine.registry import RegistryPaths
from twinbuild.errors import EngineError
from twinbuild.evidence import Blob, Policy
from twinbuild.ship.oci import Client, ImageRef

pytestmark = pytest.mark.docker

REPO = "acme/twinbuild"
REPO_ID = "424242"
PR = 7
SUPPLIED = "SUPPLIED BY THE TEST: no GPU in this rehearsal"
GPUS: dict[str, dict[str, Any]] = {
    "cuda": {"vendor": "nvidia", "model": SUPPLIED, "driver": "0", "runtime": "0", "count": 1},
    "rocm": {"vendor": "amd", "model": SUPPLIED, "driver": "0", "runtime": "0", "count": 1},
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return proc.stdout.strip()


@dataclass(slots=True)
class Rehearsal:
    """Everything the rehearsal made: the project clone, registry, digests, evidence, env."""

    root: Path
    work: Path
    origin: Path
    paths: RegistryPaths
    address: str
    engine: Engine
    env: dict[str, str]
    refs: dict[str, str] = field(default_factory=dict)
    head: str = ""

    def cli(
        self, *args: str, extra: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_twinbuild(self.root, {**self.env, **(extra or {})}, *args)

    def release(
        self, platform: str, ref: str, tag: str, *more: str
    ) -> subprocess.CompletedProcess[str]:
        return self.cli(
            "release", "--variant", platform, "--image", ref, "--tag", tag,
            "--evidence-ref", f"origin/validate/pr-{PR}", "--keys", "evidence/keys",
            "--profile", "local", "--repository", REPO, "--repository-id", REPO_ID, *more,
        )  # fmt: skip

    def released(self, platform: str) -> ImageRef:
        """The pushed digest as a release names it: in twinbuild/<platform>, not twinbuild-ci/."""
        return ImageRef.parse(self.refs[platform]).moved(f"twinbuild/{platform}")

    def tag_digest(self, platform: str, tag: str, *, ci: bool = False) -> str | None:
        """The digest ``tag`` names in the release repository (``ci``: in the CI namespace)."""
        image = ImageRef.parse(self.refs[platform]) if ci else self.released(platform)
        found = Client(self.address).manifest(image.repository, tag)
        return found.digest if found else None


def _registry_pid(paths: RegistryPaths) -> int:
    return int(paths.pidfile.read_text())


@pytest.fixture(scope="module")
def rehearsal(
    tmp_path_factory: pytest.TempPathFactory, session_registry: SessionRegistry
) -> Iterator[Rehearsal]:
    """Build, push, drop the local images, smoke by digest, record, sign, commit, gate, release."""
    work = tmp_path_factory.mktemp("ship")
    paths, address = session_registry.paths, session_registry.address
    engine = connect()
    made: list[str] = []
    try:
        r = Rehearsal(
            root=mini_project(work), work=work, origin=work / "origin.git", paths=paths,
            address=address, engine=engine,
            env={**os.environ, "DOCKER_HOST": engine.docker_host, registry.ENV_VAR: address},
        )  # fmt: skip
        for var in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
            r.env.pop(var, None)
        _origin(r)
        _build_push_smoke(r, made)
        _record_sign_commit(r)
        yield r
    finally:
        for image_id in made:
            with contextlib.suppress(EngineError):
                engine.remove_image(image_id, force=True)
        engine.close()


def _origin(r: Rehearsal) -> None:
    from twinbuild.evidence.keys import keygen

    git(r.work, "init", "-q", "--bare", "-b", "main", str(r.origin))
    git(r.root, "init", "-q", "-b", "main")
    keygen(r.work / "signing.key", r.root / "evidence/keys/rehearsal.pub")
    (r.root / ".gitignore").write_text("build/\n.twinbuild/\n")
    git(r.root, "add", "-A")
    git(r.root, "commit", "-qm", "main with the trusted key")
    git(r.root, "remote", "add", "origin", str(r.origin))
    git(r.root, "push", "-q", "origin", "main")
    git(r.root, "checkout", "-qb", f"validate/pr-{PR}")
    edit(r.root / "pins/manifest.toml", "[local]", "# the PR's change\n[local]")
    git(r.root, "commit", "-qam", "the reviewed PR head")
    r.head = git(r.root, "rev-parse", "HEAD")


def _build_push_smoke(r: Rehearsal, made: list[str]) -> None:
    built = r.cli("build")
    assert built.returncode == 0, built.stderr
    out = r.work / "github_output"
    pushed = r.cli("push", extra={"GITHUB_OUTPUT": str(out)})
    assert pushed.returncode == 0, pushed.stderr
    for line in out.read_text().splitlines():
        key, _, ref = line.partition("=")
        if key.removesuffix("-image") in MINI_VARIANTS:  # each variant's (its one amd64 image)
            r.refs[key.removesuffix("-image")] = ref
    assert set(r.refs) == set(MINI_VARIANTS)
    for platform, ref in r.refs.items():
        assert ref.startswith(f"{r.address}/twinbuild-ci/{platform}@sha256:")
        assert f"{platform}-amd64: {ref} (" in pushed.stdout
        record = json.loads((r.root / f"build/local/{platform}/amd64/image.json").read_text())
        assert record["pushed"]["ref"] == ref
        made.append(record["image_id"])
        # A second runner: the image is not in its engine; it must come from the registry.
        r.engine.remove_image(record["image_id"], force=True, prune=False)  # layers stay cached
        assert r.engine.inspect_image(ref) is None
        smoked = r.cli("smoke", "--image", ref, "--report-dir", str(r.work / "smoke"))
        assert smoked.returncode == 0, smoked.stderr + smoked.stdout
        report = json.loads((r.work / f"smoke/smoke-{platform}-amd64-local.json").read_text())
        assert report["image"]["digest"] == ref
        assert report["image"]["id"] == record["image_id"]  # the very bytes the build made


def _record_sign_commit(r: Rehearsal) -> None:
    # validate-gpu.yml's run: workflow_run, the default branch's file; the validated commit and PR
    # come from its trigger check (--commit, --pr), never from GITHUB_SHA.
    env = {
        "GITHUB_REPOSITORY": REPO, "GITHUB_REPOSITORY_ID": REPO_ID, "GITHUB_SHA": "0" * 40,
        "GITHUB_REF": "refs/heads/main", "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/validate-gpu.yml@refs/heads/main",
        "GITHUB_RUN_ID": "1", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_ACTOR": "maintainer",
        "RUNNER_NAME": "rehearsal", "RUNNER_ENVIRONMENT": "self-hosted",
    }  # fmt: skip
    for platform in MINI_VARIANTS:
        path = r.work / f"smoke/smoke-{platform}-amd64-local.json"
        report = json.loads(path.read_text())
        # The GPU section, supplied by the test and labelled so: there is no GPU here.
        report["gpu"] = GPUS[platform]
        report["tests"].append({
            "id": "rehearsal::gpu_section_supplied_by_the_test", "outcome": "passed",
            "attempts": 1, "flaky": False, "duration_s": 0.0, "markers": ["gpu"],
        })  # fmt: skip
        report["counts"] = {
            o: sum(t["outcome"] == o for t in report["tests"])
            for o in ("passed", "failed", "skipped")
        } | {"flaky": 0}
        folder = r.work / f"report-{platform}"
        folder.mkdir()
        (folder / path.name).write_text(json.dumps(report))
        recorded = r.cli(
            "evidence", "record", "--variant", platform, "--arch", "linux/amd64", "--report-dir", str(folder),
            "--out", str(r.work / "statements"), "--commit", r.head, "--pr", str(PR),
            "--repo", str(r.root), extra=env,
        )  # fmt: skip
        assert recorded.returncode == 0, recorded.stderr
        assert "verdict passed" in recorded.stdout
    signed = r.cli(
        "evidence", "sign", "--in", str(r.work / "statements"), "--out", "evidence",
        "--key", str(r.work / "signing.key"), "--commit", r.head, "--pr", str(PR),
        "--repo", str(r.root),
    )  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    git(r.root, "add", "evidence")
    git(r.root, "commit", "-qm", "evidence for the PR head")
    git(r.root, "push", "-q", "origin", f"validate/pr-{PR}")
    git(r.root, "checkout", "-q", "main")
    git(r.root, "fetch", "-q", "origin")
    # Sound evidence of a PR nobody merged releases nothing from the default branch (exit 9);
    # once the reviewed head is merged (a merge commit keeps it in main's history) it does.
    unmerged = r.release("cuda", r.refs["cuda"], "v1")
    assert unmerged.returncode == 9, unmerged.stderr
    assert "a release ships only what the default branch holds: merge the PR" in unmerged.stderr
    assert r.tag_digest("cuda", "v1") is None
    git(r.root, "merge", "-q", "--no-ff", "-m", f"Merge pull request #{PR}", r.head)


def test_rehearsal_build_push_smoke_by_digest_sign_gate_release_verify(
    rehearsal: Rehearsal,
) -> None:
    r = rehearsal
    blobs: list[Path | Blob] = [
        Blob(
            name=f"validate/pr-{PR}:{p}",
            data=git(
                r.root, "show", f"origin/validate/pr-{PR}:evidence/{p}-amd64.dsse.json"
            ).encode(),
        )
        for p in MINI_VARIANTS
    ]
    trusted = evidence.load_trusted(r.root / "evidence/keys")
    accepted = evidence.gate(
        blobs,
        policy=Policy(
            base_repository=REPO, base_repository_id=int(REPO_ID), head_commit=r.head, pr=PR,
            profile="local", images={image(p): ref for p, ref in r.refs.items()},
            required=tuple(image(p) for p in MINI_VARIANTS),
        ),
        trusted=trusted, now=datetime.now(UTC),
    )  # fmt: skip
    assert [a.image for a in accepted.accepted] == [image(p) for p in MINI_VARIANTS]

    for platform in MINI_VARIANTS:
        released = r.release(platform, r.refs[platform], "v1")
        assert released.returncode == 0, released.stderr
        target = r.released(platform)
        assert (
            f"released {target.tagged('v1')} = {target}, copied from {r.address}/twinbuild-ci/"
            f"{platform}\n  evidence (" in released.stdout
        )
        assert r.tag_digest(platform, "v1") == r.refs[platform].split("@")[1]
        assert r.tag_digest(platform, "v1", ci=True) is None  # no release tag in the CI namespace
        verified = r.cli("evidence", "verify", "--image", str(target))
        assert verified.returncode == 0, verified.stderr
        assert f"{platform} (linux/amd64) evidence signed by" in verified.stdout
        assert "verdict passed" in verified.stdout
        assert SUPPLIED in verified.stdout  # the evidence says its GPU section was supplied

    # Re-pushing what the registry holds transfers nothing and names the same digest.
    again = r.cli("push")
    assert again.returncode == 0, again.stderr
    for platform in MINI_VARIANTS:
        assert f"{platform}-amd64: {r.refs[platform]} (nothing transferred" in again.stdout


def _second_cuda_digest(r: Rehearsal) -> str:
    """Another cuda image (one more layer), pushed: a digest with no evidence of its own."""
    recipe = r.root / "images/local/Dockerfile"
    text = recipe.read_text()
    try:
        edit(recipe, "FROM common AS cuda\n", "FROM common AS cuda\nRUN echo other > /other\n")
        built = r.cli("build", "--variant", "cuda")
        assert built.returncode == 0, built.stderr
        pushed = r.cli("push", "--variant", "cuda")
        assert pushed.returncode == 0, pushed.stderr
    finally:
        recipe.write_text(text)
    ref = pushed.stdout.split("cuda-amd64: ", 1)[1].split(" ", 1)[0]
    assert ref != r.refs["cuda"]
    return ref


def test_refusals_other_digest_swapped_evidence_and_a_tag_that_points_elsewhere(
    rehearsal: Rehearsal,
) -> None:
    r = rehearsal
    other = _second_cuda_digest(r)
    # The cuda evidence names digest A: releasing digest B with it is refused.
    refused = r.release("cuda", other, "v2")
    assert refused.returncode == 7, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "no evidence given is for that digest" in refused.stderr
    assert r.tag_digest("cuda", "v2") is None

    # Evidence for A copied next to B by someone with push rights: verify --image B refuses it.
    a, b = r.released("cuda"), ImageRef.parse(other)
    client = Client(r.address)
    envelope = client.attachments(a)[0]
    subject = client.manifest(b.repository, b.digest)
    assert subject is not None
    client.attach(b, subject, envelope, {})
    swapped = r.cli("evidence", "verify", "--image", other)
    assert swapped.returncode == 7, swapped.stderr
    assert f"the evidence is for {a.digest}, not {b.digest}" in swapped.stderr

    # A release tag that names another digest moves only with --force.
    rocm = r.released("rocm")
    elsewhere = client.manifest(rocm.repository, rocm.attachment_tag)  # any other manifest
    assert elsewhere is not None
    client.put_manifest(rocm.repository, "stable", elsewhere)
    held = r.release("rocm", r.refs["rocm"], "stable")
    assert held.returncode == 7, held.stderr
    assert f"already points at {elsewhere.digest}, not {rocm.digest}" in held.stderr
    assert "pass --force to move it" in held.stderr
    assert r.tag_digest("rocm", "stable") == elsewhere.digest
    forced = r.release("rocm", r.refs["rocm"], "stable", "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"(moved from {elsewhere.digest})" in forced.stdout
    assert r.tag_digest("rocm", "stable") == rocm.digest


ZERO = "sha256:" + "0" * 64


def test_a_digest_the_registry_lacks_is_exit_2(rehearsal: Rehearsal) -> None:
    r = rehearsal
    missing = f"{r.address}/twinbuild/cuda@{ZERO}"
    for args in (
        ("smoke", "--image", missing, "--report-dir", str(r.work / "smoke-missing")),
        ("evidence", "verify", "--image", missing),
    ):
        result = r.cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    result = r.release("cuda", missing, "v1")
    assert result.returncode == 2, result.stderr
    assert "has no such digest" in result.stderr
    assert r.tag_digest("cuda", "v1") == r.refs["cuda"].split("@")[1]


def test_busy_port_names_the_flag(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "TWINBUILD_CACHE": str(tmp_path)}
        result = subprocess.run(
            [sys.executable, "-m", "twinbuild", "registry", "up", "--port", str(port)],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"twinbuild: 127.0.0.1:{port} is already in use by another program; pick a free port "
        "with `twinbuild registry up --port N` (or TWINBUILD_REGISTRY_PORT=N)"
    )
    assert not (tmp_path / "registry/registry.pid").exists()


def test_registry_gone_mid_push_is_exit_3_and_tags_nothing(rehearsal: Rehearsal) -> None:
    r = rehearsal
    image = ImageRef.parse(r.refs["cuda"])
    if r.tag_digest("cuda", "v1") is None:  # run alone: the release the rehearsal test makes
        assert r.release("cuda", r.refs["cuda"], "v1").returncode == 0
    before = {"v1": r.tag_digest("cuda", "v1"), "local": r.tag_digest("cuda", "local", ci=True)}
    record = r.root / "build/local/cuda/amd64/image.json"
    recipe = r.root / "images/local/Dockerfile"
    text = recipe.read_text()
    try:
        # 64 MiB of fresh random bytes: a layer the registry has never seen, slow enough to cut.
        edit(recipe, "FROM common AS cuda\n",
             f"FROM common AS cuda\nRUN head -c 67108864 /dev/urandom > /big # {time.time()}\n")  # fmt: skip
        built = r.cli("build", "--variant", "cuda")
        assert built.returncode == 0, built.stderr
    finally:
        recipe.write_text(text)
    pid = _registry_pid(r.paths)
    os.kill(pid, signal.SIGSTOP)  # hold the push inside its upload ...
    proc = subprocess.Popen(
        [sys.executable, "-m", "twinbuild", "push", "--variant", "cuda"], cwd=r.root,
        env=r.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(3)
        os.kill(pid, signal.SIGKILL)  # ... then the registry dies
        os.kill(pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        registry.up(r.paths)  # the same storage, the same port
    assert proc.returncode == 3, err
    assert len(err.strip().splitlines()) == 1, err
    assert f"the registry {r.address} failed" in err
    assert "connection refused" in err
    assert {
        "v1": r.tag_digest("cuda", "v1"),
        "local": r.tag_digest("cuda", "local", ci=True),
    } == before
    assert "pushed" not in json.loads(record.read_text())  # a failed push records nothing
    assert r.tag_digest("cuda", "v1") == image.digest


def test_a_build_that_finds_its_image_up_to_date_keeps_what_push_recorded(
    rehearsal: Rehearsal,
) -> None:
    """build, push, build: the second build finds the image up to date and must keep the push
    in the record, so a smoke of the built image still names the pushed digest (it once fell
    back to the engine's first repo digest, the pushed one only while it knows one registry)."""
    r = rehearsal
    record = r.root / "build/local/rocm/amd64/image.json"
    assert r.cli("build", "--variant", "rocm").returncode == 0
    pushed = r.cli("push", "--variant", "rocm")
    assert pushed.returncode == 0, pushed.stderr
    ref = pushed.stdout.split("rocm-amd64: ", 1)[1].split(" ", 1)[0]
    before = json.loads(record.read_text())
    assert before["pushed"]["ref"] == ref
    again = r.cli("build", "--variant", "rocm")
    assert again.returncode == 0, again.stderr
    assert "twinbuild/rocm:local-amd64: up to date" in again.stdout
    after = json.loads(record.read_text())
    assert after["image_id"] == before["image_id"]
    assert after["pushed"] == before["pushed"]
    smoked = r.cli("smoke", "--variant", "rocm", "--report-dir", str(r.work / "smoke-noop"))
    assert smoked.returncode == 0, smoked.stderr + smoked.stdout
    report = json.loads((r.work / "smoke-noop/smoke-rocm-amd64-local.json").read_text())
    assert report["image"]["digest"] == ref


@pytest.fixture
def locked_registry(tmp_path: Path, rehearsal: Rehearsal) -> Iterator[str]:
    """A second real registry that wants a password (htpasswd; the registry makes the file with a
    random password nobody here knows), started and stopped by this fixture."""
    port = free_port()
    config = tmp_path / "config.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\nauth:\n  htpasswd:\n    realm: twinbuild-test\n"
        f"    path: {tmp_path / 'htpasswd'}\n"
    )
    program = registry.SystemRegistryHost().which(registry.PROGRAM)
    assert program is not None  # the rehearsal's `registry up` installed it
    with (tmp_path / "log").open("w") as log:
        proc = subprocess.Popen([program, "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while not registry.ping(f"127.0.0.1:{port}"):
            assert time.monotonic() < deadline, (tmp_path / "log").read_text()
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_missing_credentials_is_one_line_naming_the_registry_and_the_fix(
    rehearsal: Rehearsal, locked_registry: str
) -> None:
    r = rehearsal
    pushed = r.cli("push", "--variant", "rocm", "--registry", locked_registry)
    assert pushed.returncode == 2, pushed.stderr
    assert len(pushed.stderr.strip().splitlines()) == 1, pushed.stderr
    assert f"the registry {locked_registry} wants credentials" in pushed.stderr
    assert f"run `docker login {locked_registry}`" in pushed.stderr
    digest = r.refs["rocm"].split("@")[1]
    verified = r.cli("evidence", "verify", "--image", f"{locked_registry}/twinbuild/rocm@{digest}")
    assert verified.returncode == 2, verified.stderr
    assert len(verified.stderr.strip().splitlines()) == 1, verified.stderr
    assert f"run `docker login {locked_registry}`" in verified.stderr


class _HoldingProxy(http.server.ThreadingHTTPServer):
    """A plain HTTP relay in front of the real registry that logs every request and holds the one
    that would write ``hold_tag``, so a test can interrupt a release at its very last step."""

    def __init__(self, upstream: str, hold_tag: str) -> None:
        self.upstream, self.hold_tag = upstream, hold_tag
        self.seen: list[str] = []
        self.held = threading.Event()
        self.release_hold = threading.Event()
        super().__init__(("127.0.0.1", 0), _Relay)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"


class _Relay(http.server.BaseHTTPRequestHandler):
    server: _HoldingProxy

    def _relay(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        if self.command == "PUT" and self.path.endswith(f"/manifests/{self.server.hold_tag}"):
            self.server.held.set()
            self.server.release_hold.wait(120)
            self.send_error(503)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        host, port = self.server.upstream.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        conn.request(self.command, self.path, body=body or None, headers=dict(self.headers))
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_PATCH = _relay

    def log_message(self, *_args: object) -> None:
        pass


def test_interrupted_release_moves_no_tag_and_evidence_is_stored_first(
    rehearsal: Rehearsal,
) -> None:
    r = rehearsal
    image = ImageRef.parse(r.refs["cuda"])
    proxy = _HoldingProxy(r.address, "v-interrupted")
    thread = threading.Thread(target=proxy.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        through = f"{proxy.address}/{image.repository}@{image.digest}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "twinbuild", "release", "--variant", "cuda",
             "--image", through, "--tag", "v-interrupted",
             "--evidence-ref", f"origin/validate/pr-{PR}", "--keys", "evidence/keys",
             "--profile", "local", "--repository", REPO, "--repository-id", REPO_ID],
            cwd=r.root, env=r.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proxy.held.wait(120), proc.communicate(timeout=60)
        proc.send_signal(signal.SIGINT)  # interrupted while its tag request is in flight
        _, err = proc.communicate(timeout=60)
    finally:
        proxy.release_hold.set()
        proxy.shutdown()
        proxy.server_close()
    assert proc.returncode == 130, err
    assert r.tag_digest("cuda", "v-interrupted") is None
    writes = [s for s in proxy.seen if s.startswith("PUT") and "/manifests/" in s]
    target = r.released("cuda")
    assert writes == [
        f"PUT /v2/{target.repository}/manifests/{image.digest}",  # the copy, by digest
        f"PUT /v2/{target.repository}/manifests/{image.attachment_tag}",
        f"PUT /v2/{target.repository}/manifests/v-interrupted",
    ]
    stored = r.cli("evidence", "verify", "--image", str(target))
    assert stored.returncode == 0, stored.stderr


def test_the_release_workflow_steps_fetch_log_in_and_release_production_evidence_only(
    rehearsal: Rehearsal, tmp_path: Path
) -> None:
    """release.yml's own `run:` steps (read from the file), with its env and inputs, against the
    real registry and engine: the evidence branch is fetched as data, the engine logs in, and
    `twinbuild release` refuses the rehearsal's local-profile evidence (a workflow release is a
    production release); nothing is tagged, and the login is gone afterwards."""
    import re

    import yaml

    r = rehearsal
    workflow = Path(__file__).resolve().parents[2] / ".github/workflows/release.yml"
    job = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"]["release"]
    values = {
        "inputs.variant": "rocm", "inputs.image": r.refs["rocm"], "inputs.tag": "v-workflow",
        "inputs.evidence-branch": f"validate/pr-{PR}", "github.token": "unused-by-a-file-remote",
        "github.event.repository.default_branch": "main", "vars.TWINBUILD_REGISTRY": r.address,
        "vars.TWINBUILD_RELEASE_USER": "release-bot", "secrets.TWINBUILD_RELEASE_TOKEN": "x",
    }  # fmt: skip

    def expand(text: object) -> str:
        return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: values[m.group(1)], str(text))

    config = tmp_path / "docker-config"
    env = {
        **r.env, "DOCKER_CONFIG": str(config), "GITHUB_REPOSITORY": REPO,
        "GITHUB_REPOSITORY_ID": REPO_ID, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    } | {k: expand(v) for k, v in job["env"].items()}  # fmt: skip
    results = {}
    for step in job["steps"]:
        if "run" not in step or "pip install" in step["run"]:
            continue  # actions/checkout and setup-python: this clone, this interpreter
        step_env = env | {k: expand(v) for k, v in (step.get("env") or {}).items()}
        results[step["name"]] = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=r.root, env=step_env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if step["name"] == "Log out":
            assert r.address not in (config / "config.json").read_text()
        elif step["name"].startswith("Log in"):
            assert r.address in (config / "config.json").read_text()
    released = results.pop("Release (evidence first, the tag last)")
    assert all(p.returncode == 0 for p in results.values()), {
        k: p.stderr for k, p in results.items()
    }
    assert released.returncode == 7, released.stderr
    assert len(released.stderr.strip().splitlines()) == 1, released.stderr
    assert "profile" in released.stderr
    assert "production" in released.stderr
    assert r.tag_digest("rocm", "v-workflow") is None
