"""`release` and `evidence verify --image` against a registry that misbehaves on purpose.

The registry is tests/fake_registry.py, served by this test on 127.0.0.1. Each case runs the real
command line in a child process (with TWINBUILD_REGISTRY_TIMEOUT=2 where the case is a deadline, 60
elsewhere: a healthy request on a busy machine must not meet it) and checks what a user sees: exit
3, one line naming the registry and the request, no traceback, nothing written to the registry;
and what it cost: that it ended at all (within 90 s, against a registry that would hold it for
600 s, a stall, or for hours, a drip: a bound that holds on a busy machine, pinned to one core
beside six busy loops, where the child's start-up alone takes 25 s; the message names the 2 s
deadline that cut it, and the time it takes is `nox -s bench`'s), the child's peak
resident memory (its own ``VmHWM``, read as it exits: far under what the registry sent), and every
address the child connected to or looked up (an audit hook in the child: 127.0.0.1 only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import fake_registry as fake
from tests.unit.evidence_builders import (
    REPO,
    REPO_ID,
    Signer,
    about_checkout,
    evidence,
    release_checkout,
    smoke_report,
)
from twinbuild.evidence.keys import keyid

TIMEOUT = 2  # TWINBUILD_REGISTRY_TIMEOUT of the deadline cases
RELAXED = 60  # and of the others
# A command that keeps its deadlines ends within this, the child's start-up included, however busy
# the machine; one that does not waits out the stall (fake.STALL_S, 600 s) or the drip (hours).
ENDS_WITHIN = 90.0
# The child's peak may pass a healthy run's by this much: the 4 MiB answer limit with room for
# the buffers around it. The floods send 256 MiB.
MEMORY_SLACK = 16 << 20

# The child: the real CLI, with an audit hook that logs every connect and name lookup.
CHILD = r"""
import os, sys
log = open(os.environ["TB_NET_LOG"], "a", buffering=1)
def hook(event, args):
    if event == "socket.connect":
        log.write("connect %r\n" % (args[1],))
    elif event == "socket.getaddrinfo":
        log.write("lookup %r\n" % (args[0],))
sys.addaudithook(hook)
from twinbuild.cli.main import main
try:
    code = main()
finally:  # this process's own peak (after exec: not the forking parent's pages)
    with open("/proc/self/status") as status, open(os.environ["TB_RSS_LOG"], "w") as out:
        out.write(next(l for l in status if l.startswith("VmHWM:")).split()[1])
sys.exit(code)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ran:
    returncode: int
    stderr: str
    seconds: float
    peak_rss: int  # bytes
    network: list[str]


def run_cli(tmp_path: Path, *args: str, deadline: int = RELAXED, timeout: float = 180) -> Ran:
    log, rss = tmp_path / "network.log", tmp_path / "rss.kib"
    env = {
        **os.environ,
        "TWINBUILD_REGISTRY_TIMEOUT": str(deadline),
        "TB_NET_LOG": str(log),
        "TB_RSS_LOG": str(rss),
        "DOCKER_CONFIG": str(tmp_path / "docker-config"),  # no stored credentials
    }
    for var in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "TWINBUILD_REGISTRY"):
        env.pop(var, None)
    err = tmp_path / "stderr"
    start = time.monotonic()
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], cwd=tmp_path, env=env,
            stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"{' '.join(args[:1])} hung: still running after {timeout:.0f}s")
    return Ran(
        returncode=proc.returncode,
        stderr=err.read_text(errors="replace"),
        seconds=time.monotonic() - start,
        peak_rss=int(rss.read_text()) * 1024,
        network=log.read_text().splitlines() if log.exists() else [],
    )


def assert_refused(ran: Ran, registry: fake.FakeRegistry, *needles: str, code: int = 3) -> None:
    """Exit ``code``, one line naming the registry (and ``needles``), in time, small, loopback,
    nothing written, the release tag where it was."""
    assert ran.returncode == code, ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    assert lines[0].startswith("twinbuild: ")
    assert registry.address in lines[0], lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert ran.seconds < ENDS_WITHIN, f"took {ran.seconds:.1f}s: {lines[0]}"
    bound = healthy_peak() + MEMORY_SLACK
    assert ran.peak_rss < bound, f"peak RSS {ran.peak_rss >> 20} MiB: {lines[0]}"
    for line in ran.network:
        assert "127.0.0.1" in line, f"contacted something else than loopback: {line}"
    assert fake.NOWHERE not in "\n".join(ran.network)
    assert registry.writes() == [], registry.writes()
    assert registry.manifest_at("twinbuild/cuda", "v1") == RELEASED


RELEASED = b'{"the": "previous release"}'
_HEALTHY: list[int] = []


def healthy_peak() -> int:
    """The peak resident memory of a `verify --image` that meets a well-behaved registry (and no
    evidence there: exit 7), measured once per worker."""
    if not _HEALTHY:
        with fake.serving() as server, tempfile.TemporaryDirectory() as tmp:
            digest, manifest = server.image("twinbuild-ci/cuda")
            s = shipped_image(Path(tmp), server, digest, manifest, "evidence")
            ran = verify(Path(tmp), s, s.ref(server))
            assert ran.returncode == 7, ran.stderr
            _HEALTHY.append(ran.peak_rss)
    return _HEALTHY[0]


@pytest.fixture
def registry() -> Iterator[fake.FakeRegistry]:
    with fake.serving() as server:
        server.put_manifest("twinbuild/cuda", "v1", RELEASED)
        yield server


@dataclass(frozen=True, slots=True, kw_only=True)
class Shipped:
    """A cuda image in the CI namespace, its evidence, and the keys that trust it."""

    repository: str
    digest: str
    manifest: bytes
    evidence: Path
    keys: Path
    envelope: bytes
    checkout: Path  # the default branch's checkout whose HEAD the evidence is about

    def ref(self, registry: fake.FakeRegistry, repository: str | None = None) -> str:
        return f"{registry.address}/{repository or self.repository}@{self.digest}"


def signed_for(folder: Path, ref: str) -> tuple[Path, Path, Path]:
    """Passing cuda evidence for ``ref`` signed by a new key, about the HEAD of a release
    checkout; a keys folder trusting the key; the checkout."""
    from cryptography.hazmat.primitives import serialization

    folder.mkdir()
    signer = Signer.new()
    checkout = release_checkout(folder)
    report = about_checkout(smoke_report("cuda"), checkout.inputs, ref=ref)
    path = evidence(folder, signer, "cuda", report=report, commit=checkout.head)
    keys = folder / "keys"
    keys.mkdir()
    pem = signer.public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (keys / f"{keyid(signer.public)[:12]}.pub").write_bytes(pem)
    return path, keys, checkout.repo


def shipped_image(
    tmp_path: Path, registry: fake.FakeRegistry, digest: str, manifest: bytes, name: str
) -> Shipped:
    repository = "twinbuild-ci/cuda"
    path, keys, checkout = signed_for(tmp_path / name, f"{registry.address}/{repository}@{digest}")
    return Shipped(
        repository=repository, digest=digest, manifest=manifest, evidence=path, keys=keys,
        envelope=path.read_bytes(), checkout=checkout,
    )  # fmt: skip


@pytest.fixture
def shipped(tmp_path: Path, registry: fake.FakeRegistry) -> Shipped:
    digest, manifest = registry.image("twinbuild-ci/cuda")
    return shipped_image(tmp_path, registry, digest, manifest, "evidence")


def release(
    tmp_path: Path,
    s: Shipped,
    ref: str,
    *more: str,
    platform: str = "cuda",
    deadline: int = RELAXED,
) -> Ran:
    """`release` of ``ref`` as ``v1`` with ``--force``: the tag's earlier release does not stop it,
    only the registry's misbehaviour may."""
    return run_cli(
        tmp_path, "release", "--variant", platform, "--image", ref, "--tag", "v1", "--force",
        "--evidence", str(s.evidence), "--keys", str(s.keys), "--repo", str(s.checkout),
        "--repository", REPO,
        "--repository-id", str(REPO_ID), "--max-age-days", "3650", *more, deadline=deadline,
    )  # fmt: skip


def verify(tmp_path: Path, s: Shipped, ref: str, *, deadline: int = RELAXED) -> Ran:
    return run_cli(
        tmp_path, "evidence", "verify", "--image", ref, "--keys", str(s.keys), deadline=deadline
    )


def _att_path(s: Shipped, repository: str | None = None) -> str:
    return f"/v2/{repository or s.repository}/manifests/{s.digest.replace(':', '-')}.att"


# --- no deadline ------------------------------------------------------------------------------


def test_a_registry_that_never_answers_the_image_manifest(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    path = f"/v2/{shipped.repository}/manifests/{shipped.digest}"
    registry.attacks[path] = fake.stall
    ref = shipped.ref(registry)
    assert_refused(verify(tmp_path, shipped, ref, deadline=TIMEOUT), registry, f"GET {path}", "2s")
    assert_refused(release(tmp_path, shipped, ref, deadline=TIMEOUT), registry, f"GET {path}")


def test_a_registry_that_drips_the_envelope(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    blob = registry.put_blob(shipped.repository, shipped.envelope)
    att = fake.attestation(shipped.manifest, [shipped.envelope])
    registry.put_manifest(shipped.repository, f"{shipped.digest.replace(':', '-')}.att", att)
    path = f"/v2/{shipped.repository}/blobs/{blob}"
    registry.attacks[path] = fake.drip(0.5)
    ran = verify(tmp_path, shipped, shipped.ref(registry), deadline=TIMEOUT)
    assert_refused(ran, registry, f"GET {path}")  # its announced size refuses it, or the deadline


def test_a_registry_that_drips_its_status_line(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    path = f"/v2/{shipped.repository}/manifests/{shipped.digest}"
    registry.attacks[path] = fake.drip(0.5, headers_first=False)
    ran = release(tmp_path, shipped, shipped.ref(registry), deadline=TIMEOUT)
    assert_refused(ran, registry, f"GET {path}", "within 2s")


# --- no bounds --------------------------------------------------------------------------------


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "no-content-length"])
def test_a_256_mib_manifest_is_refused_while_reading(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped, sized: bool
) -> None:
    registry.attacks[_att_path(shipped)] = fake.flood(sized=sized)
    assert_refused(
        verify(tmp_path, shipped, shipped.ref(registry)),
        registry,
        f"GET {_att_path(shipped)}",
        "4 MiB",
    )
    path = f"/v2/{shipped.repository}/manifests/{shipped.digest}"
    registry.attacks[path] = fake.flood(sized=sized)
    assert_refused(release(tmp_path, shipped, shipped.ref(registry)), registry, "4 MiB")


def test_an_attestation_with_2000_layers_is_refused_before_fetching_them(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    registry.put_blob(shipped.repository, shipped.envelope)
    att = fake.attestation(shipped.manifest, [shipped.envelope] * 2000)
    registry.put_manifest(shipped.repository, f"{shipped.digest.replace(':', '-')}.att", att)
    assert_refused(verify(tmp_path, shipped, shipped.ref(registry)), registry, "2000 layers")
    assert len(registry.seen) <= 4, registry.seen


@pytest.mark.parametrize(
    "document", [[1, 2], "text", 7, None], ids=["array", "string", "number", "null"]
)
def test_an_attestation_that_is_not_a_json_object(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped, document: object
) -> None:
    registry.attacks[_att_path(shipped)] = fake.content(json.dumps(document).encode())
    assert_refused(verify(tmp_path, shipped, shipped.ref(registry)), registry, "not a JSON object")


def test_an_image_manifest_that_is_a_json_array_is_not_released(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    # The array's own digest is the image digest, and the evidence names it.
    array = b'[{"schemaVersion": 2}]'
    digest = registry.put_manifest(shipped.repository, fake.digest_of(array), array)
    s = shipped_image(tmp_path, registry, digest, array, "array-evidence")
    assert_refused(release(tmp_path, s, s.ref(registry)), registry, "not a JSON object")


# --- names ------------------------------------------------------------------------------------


def test_a_redirect_to_another_host_is_refused_without_contacting_it(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    registry.attacks[_att_path(shipped)] = fake.redirect(f"http://{fake.NOWHERE}/v2/x")
    assert_refused(
        verify(tmp_path, shipped, shipped.ref(registry)), registry, fake.NOWHERE, "redirect"
    )
    path = f"/v2/{shipped.repository}/manifests/{shipped.digest}"
    registry.attacks[path] = fake.redirect(f"https://{fake.NOWHERE}{path}")
    assert_refused(release(tmp_path, shipped, shipped.ref(registry)), registry, fake.NOWHERE)


def test_cuda_evidence_does_not_release_an_image_in_the_rocm_repository(
    tmp_path: Path, registry: fake.FakeRegistry, shipped: Shipped
) -> None:
    # Someone with push rights put the cuda image into the rocm repository too.
    registry.put_manifest("twinbuild-ci/rocm", shipped.digest, shipped.manifest)
    before = registry.manifest_at("twinbuild/rocm", "v1")
    ran = release(tmp_path, shipped, shipped.ref(registry, "twinbuild-ci/rocm"))
    assert ran.returncode == 7, ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert "rocm" in ran.stderr
    assert "cuda" in ran.stderr
    assert registry.writes() == []
    assert registry.manifest_at("twinbuild/rocm", "v1") == before


# --- the copy into the release repository -----------------------------------------------------


def _big_image(registry: fake.FakeRegistry, size: int) -> tuple[str, bytes, str]:
    config, layer = b'{"big": true, "os": "linux", "architecture": "amd64"}', os.urandom(size)
    registry.put_blob("twinbuild-ci/cuda", config)
    layer_digest = registry.put_blob("twinbuild-ci/cuda", layer)
    data = fake.image_manifest(config, [layer])
    return (
        registry.put_manifest("twinbuild-ci/cuda", fake.digest_of(data), data),
        data,
        layer_digest,
    )


def test_a_registry_that_cannot_mount_gets_the_layers_streamed_in_bounded_memory(
    tmp_path: Path, registry: fake.FakeRegistry
) -> None:
    registry.mount = False
    digest, data, layer = _big_image(registry, 64 << 20)
    s = shipped_image(tmp_path, registry, digest, data, "big")
    ran = release(tmp_path, s, s.ref(registry))
    assert ran.returncode == 0, ran.stderr
    assert ran.peak_rss < healthy_peak() + 2 * (8 << 20) + MEMORY_SLACK, ran.peak_rss >> 20
    assert registry.manifest_at("twinbuild/cuda", "v1") == data
    assert (
        registry.store.blobs[("twinbuild/cuda", layer)]
        == registry.store.blobs[("twinbuild-ci/cuda", layer)]
    )
    # the config in one chunk, the 64 MiB layer in eight of 8 MiB: never all of it in memory
    assert sum(w.startswith("PATCH") for w in registry.writes()) == 1 + 8


def test_a_layer_dripped_during_the_copy_ends_at_the_deadline_and_tags_nothing(
    tmp_path: Path, registry: fake.FakeRegistry
) -> None:
    registry.mount = False
    digest, data, layer = _big_image(registry, 1 << 20)
    s = shipped_image(tmp_path, registry, digest, data, "dripped")
    path = f"/v2/twinbuild-ci/cuda/blobs/{layer}"
    registry.attacks[f"GET {path}"] = fake.drip(0.5)
    ran = release(tmp_path, s, s.ref(registry), deadline=TIMEOUT)
    assert ran.returncode == 3, ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert f"sent no complete answer to GET {path} within 2s" in ran.stderr
    assert ran.seconds < ENDS_WITHIN  # the drip would take hours
    assert not [w for w in registry.writes() if w.startswith("PUT") and "/manifests/" in w]
    assert registry.manifest_at("twinbuild/cuda", "v1") == RELEASED
