"""The registry client's rules, one by one, against tests/fake_registry.py on 127.0.0.1.

Every test runs inside ``loopback_fence``: an audit hook that raises inside any connect to, or
name lookup of, anything but loopback. The end-to-end attacks through the command line are in
test_registry_attacks.py; the well-behaved path against Debian's real registry in
tests/docker/test_ship.py.
"""

from __future__ import annotations

import socket
import time
import tracemalloc
from collections.abc import Iterator

import pytest

from tests import fake_registry as fake
from twinbuild.engine.api import Credentials
from twinbuild.errors import ConfigError, CredentialsMissing, EngineError
from twinbuild.ship.oci import Client, ImageRef, OciManifest, redirect_verdict
from twinbuild.util.exchange import (
    COMMAND_TIMEOUTS,
    TIMEOUT_ENV_VAR,
    Clock,
    clock,
    loopback,
    request_timeout,
)

LOGIN = Credentials(username="ci-bot", password="s3cret")  # noqa: S106  # the fake's test login


@pytest.fixture
def registry() -> Iterator[fake.FakeRegistry]:
    with fake.serving() as server, fake.loopback_fence():
        yield server


def client(
    server: fake.FakeRegistry, *, timeout: float = 2, budget: float = 20, login: bool = False
) -> Client:
    return Client(
        server.address,
        clock=Clock(timeout=timeout, budget=budget, hint="test"),
        credentials=lambda _: LOGIN if login else None,
    )


# --- the timeout setting ----------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["1", "2", "60", "3600"])
def test_the_timeout_is_whole_seconds(raw: str) -> None:
    assert request_timeout({TIMEOUT_ENV_VAR: raw}) == int(raw)
    assert clock({TIMEOUT_ENV_VAR: raw}).budget == int(raw) * COMMAND_TIMEOUTS


@pytest.mark.parametrize(
    "raw", ["0", "3601", "99999", "2.5", "-1", " 2", "2\n", "1e3", "٣", "²", "0x10", "inf"]
)
def test_a_timeout_that_is_not_ascii_digits_in_range_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        request_timeout({TIMEOUT_ENV_VAR: raw})
    assert str(info.value) == (
        f"${TIMEOUT_ENV_VAR}: {raw!r} is not a whole number from 1 to 3600; set whole seconds, "
        "e.g. 60, or unset it for the default"
    )
    assert "\n" not in str(info.value)


def test_no_timeout_set_is_60_seconds_and_ten_of_them_per_command() -> None:
    assert request_timeout({}) == 60
    assert clock({}).budget == 600


# --- loopback ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1:5000", "127.0.0.1", "127.9.8.7:443", "localhost:5000", "LocalHost", "[::1]:5000"],
)
def test_loopback_is_a_literal_loopback_address_or_localhost(address: str) -> None:
    assert loopback(address)


@pytest.mark.parametrize(
    "address",
    [
        "127.attacker.example",
        "127.0.0.1.attacker.example:443",
        "localhost.attacker.example",
        "127.1",  # inet_aton would say loopback; a registry name is not inet_aton
        "0177.0.0.1",
        "2130706433",
        "10.0.0.1:5000",
        "registry.example:5000",
    ],
)
def test_a_name_that_only_starts_like_loopback_is_not(address: str) -> None:
    assert not loopback(address)
    assert Client(address, credentials=lambda _: None).scheme == "https"


def test_localhost_that_resolves_elsewhere_gets_no_plain_http(
    registry: fake.FakeRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def elsewhere(*_args: object, **_kwargs: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", 5000))]

    monkeypatch.setattr(socket, "getaddrinfo", elsewhere)
    with pytest.raises(EngineError) as info:
        Client("localhost:5000", credentials=lambda _: None).manifest("twinbuild/cuda", "v1")
    assert "localhost does not resolve to a loopback address here" in str(info.value)
    assert "plain HTTP only to loopback" in str(info.value)


# --- deadlines --------------------------------------------------------------------------------


# A request that keeps its 2 s deadline ends within this however busy the machine is (150x the
# deadline); one that does not waits out the stall (fake.STALL_S, 600 s: twice this) or the drip
# (hours). `nox -s bench` times them.
ENDS_WITHIN = fake.STALL_S / 2


def test_each_request_ends_at_its_deadline(registry: fake.FakeRegistry) -> None:
    registry.attacks["/v2/twinbuild/cuda/manifests/v1"] = fake.stall
    start = time.monotonic()
    with pytest.raises(EngineError) as info:
        client(registry, timeout=2).manifest("twinbuild/cuda", "v1")
    assert time.monotonic() - start < ENDS_WITHIN
    assert str(info.value) == (
        f"read {registry.address}/twinbuild/cuda:v1: the registry {registry.address} sent no "
        "complete answer to GET /v2/twinbuild/cuda/manifests/v1 within 2s (test)"
    )


def test_a_drip_ends_at_the_deadline_not_at_the_last_byte(registry: fake.FakeRegistry) -> None:
    # each byte within 0.2s: a per-read timeout would wait for all 35,000 of them (two hours)
    registry.attacks["/v2/twinbuild/cuda/manifests/v1"] = fake.drip(0.2)
    start = time.monotonic()
    with pytest.raises(EngineError, match=r"sent no complete answer to GET .* within 2s"):
        client(registry, timeout=2).manifest("twinbuild/cuda", "v1")
    assert time.monotonic() - start < ENDS_WITHIN


class StepClock:
    """Time as the test says: each answer the registry sends moves it on by ``step`` seconds."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now

    def answer(self, handler: fake.Handler) -> None:
        self.now += self.step
        fake.content(b"{}")(handler)


def test_the_command_budget_caps_requests_that_each_answer_in_time(
    registry: fake.FakeRegistry,
) -> None:
    """Each answer takes 50 of the test's seconds, well within the 60 s timeout; the command's
    150 s run out on the third or fourth (by the test's clock, not the machine's)."""
    clock = StepClock(step=50)
    registry.attacks["/v2/twinbuild/cuda/manifests/v1"] = clock.answer
    c = Client(
        registry.address,
        clock=Clock(timeout=60, budget=150, hint="test", now=clock),
        credentials=lambda _: None,
    )
    answered = 0
    with pytest.raises(EngineError) as info:  # noqa: PT012  # the third or fourth one fails
        while answered < 10:
            c.manifest("twinbuild/cuda", "v1")
            answered += 1
    assert answered in (2, 3)
    assert "when this command's 150s for registry requests ran out (test)" in str(info.value)
    assert len(registry.seen) <= 4


# --- bounded answers --------------------------------------------------------------------------


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "no-content-length"])
def test_a_flood_costs_the_limit_not_what_was_sent(
    registry: fake.FakeRegistry, sized: bool
) -> None:
    registry.attacks["/v2/twinbuild/cuda/manifests/v1"] = fake.flood(sized=sized)
    c = client(registry)
    tracemalloc.start()
    try:
        with pytest.raises(EngineError) as info:
            c.manifest("twinbuild/cuda", "v1")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20, f"{peak >> 20} MiB for a 256 MiB flood"
    assert "with more than 4 MiB" in str(info.value)
    assert "a manifest is at most 4 MiB; refusing it" in str(info.value)
    if sized:
        assert "(it announced 256 MiB)" in str(info.value)


def test_a_manifest_whose_bytes_are_not_its_digest_is_refused(
    registry: fake.FakeRegistry,
) -> None:
    wanted = fake.digest_of(b"the real one")
    registry.attacks[f"/v2/twinbuild/cuda/manifests/{wanted}"] = fake.content(b'{"other": 1}')
    with pytest.raises(EngineError, match="returned content with digest sha256:"):
        client(registry).manifest("twinbuild/cuda", wanted)


# --- redirects --------------------------------------------------------------------------------


def test_a_redirect_to_the_registry_itself_is_followed(registry: fake.FakeRegistry) -> None:
    registry.put_manifest("twinbuild/cuda", "v1", b'{"a": 1}')
    registry.attacks["/v2/twinbuild/cuda/manifests/old"] = fake.redirect(
        f"http://{registry.address}/v2/twinbuild/cuda/manifests/v1"
    )
    found = client(registry).manifest("twinbuild/cuda", "old")
    assert found is not None
    assert found.data == b'{"a": 1}'


@pytest.mark.parametrize(
    ("registry_name", "method", "target", "blob", "verdict"),
    [
        ("127.0.0.1:5000", "GET", "http://127.0.0.1:5000/v2/x/blobs/y", True, "own"),
        ("127.0.0.1:5000", "GET", "https://127.0.0.1:5000/v2/x", False, "refused"),  # scheme
        ("127.0.0.1:5000", "GET", "http://127.0.0.1:5001/v2/x", False, "refused"),  # port
        ("127.0.0.1:5000", "GET", f"https://{fake.NOWHERE}/blob", True, "refused"),  # local
        ("127.0.0.1:5000", "PUT", "http://127.0.0.1:5000/v2/x/manifests/v1", False, "refused"),
        ("registry.example", "GET", "https://cdn.example/blob?sig=1", True, "elsewhere"),
        ("registry.example", "HEAD", "https://cdn.example/blob", True, "elsewhere"),
        ("registry.example", "GET", "https://cdn.example/manifest", False, "refused"),  # not blob
        ("registry.example", "GET", "http://cdn.example/blob", True, "refused"),  # plain HTTP
        ("registry.example", "GET", "https://169.254.169.254/latest", True, "refused"),
        ("registry.example", "GET", "https://10.1.2.3/blob", True, "refused"),
        ("registry.example", "GET", "https://127.0.0.1/blob", True, "refused"),
        ("registry.example", "GET", "https://localhost/blob", True, "refused"),
        ("registry.example", "GET", "https://[::1]/blob", True, "refused"),
        ("registry.example", "GET", "https://user:pw@cdn.example/blob", True, "refused"),
        ("registry.example", "PUT", "https://cdn.example/upload", True, "refused"),
        ("registry.example", "GET", "https://registry.example/v2/other", False, "own"),
    ],
)
def test_where_a_redirect_may_lead(
    registry_name: str, method: str, target: str, blob: bool, verdict: str
) -> None:
    assert redirect_verdict(registry_name, method, target, blob=blob) == verdict


def test_a_redirect_of_a_write_is_refused(registry: fake.FakeRegistry) -> None:
    registry.attacks["PUT /v2/twinbuild/cuda/manifests/v1"] = fake.redirect(
        f"http://{registry.address}/v2/twinbuild/cuda/manifests/v2"
    )
    with pytest.raises(EngineError, match="redirected PUT /v2/twinbuild/cuda/manifests/v1 to"):
        client(registry).put_manifest(
            "twinbuild/cuda", "v1", OciManifest(media_type="x", data=b"{}")
        )
    assert registry.manifest_at("twinbuild/cuda", "v2") is None


# --- logins -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["basic", "bearer"])
def test_the_stored_login_answers_the_challenge(registry: fake.FakeRegistry, mode: str) -> None:
    registry.put_manifest("twinbuild/cuda", "v1", b"{}")
    registry.auth = mode
    c = client(registry, login=True)
    assert c.manifest("twinbuild/cuda", "v1") is not None
    assert c.manifest("twinbuild/cuda", "v1") is not None  # the second one asks right away
    unauthorized = [s for s in registry.seen if "/manifests/" in s]
    assert len(unauthorized) == 3  # one 401, then two answers


@pytest.mark.parametrize("mode", ["basic", "bearer"])
def test_no_stored_login_is_one_line_naming_docker_login(
    registry: fake.FakeRegistry, mode: str
) -> None:
    registry.auth = mode
    with pytest.raises(CredentialsMissing) as info:
        client(registry).manifest("twinbuild/cuda", "v1")
    assert f"the registry {registry.address} wants credentials" in str(info.value)
    assert f"run `docker login {registry.address}`" in str(info.value)


def test_a_wrong_login_is_refused_once_not_retried(registry: fake.FakeRegistry) -> None:
    registry.auth = "basic"
    registry.login = ("ci-bot", "another")
    with pytest.raises(CredentialsMissing, match="refused the credentials stored for it"):
        client(registry, login=True).manifest("twinbuild/cuda", "v1")
    assert len(registry.seen) == 2


@pytest.mark.parametrize(
    "realm",
    [f"http://{fake.NOWHERE}/token", f"https://{fake.NOWHERE}/token", "ftp://x/token", "token"],
)
def test_a_loopback_registry_cannot_send_the_login_elsewhere(
    registry: fake.FakeRegistry, realm: str
) -> None:
    registry.auth = "bearer"
    registry.realm = realm
    with pytest.raises(EngineError, match="sends its logins to") as info:
        client(registry, login=True).manifest("twinbuild/cuda", "v1")
    assert "refusing it" in str(info.value)


# --- copies for a release ---------------------------------------------------------------------


@pytest.mark.parametrize("mount", [True, False], ids=["mounted", "streamed"])
def test_a_digest_is_copied_into_the_release_repository_byte_for_byte(
    registry: fake.FakeRegistry, mount: bool
) -> None:
    registry.mount = mount
    digest, data = registry.image("twinbuild-ci/cuda")
    image = ImageRef.parse(f"{registry.address}/twinbuild-ci/cuda@{digest}")
    c = client(registry)
    manifest = c.manifest(image.repository, image.digest)
    assert manifest is not None
    assert c.copy(image, "twinbuild/cuda", manifest) == 2
    assert registry.manifest_at("twinbuild/cuda", digest) == data
    for key, blob in list(registry.store.blobs.items()):
        if key[0] == "twinbuild-ci/cuda":
            assert registry.store.blobs[("twinbuild/cuda", key[1])] == blob
    patches = [s for s in registry.seen if s.startswith("PATCH")]
    assert (patches == []) is mount
    assert c.copy(image, "twinbuild/cuda", manifest) == 0  # nothing left to move


def test_an_image_with_more_layers_than_docker_allows_is_not_copied(
    registry: fake.FakeRegistry,
) -> None:
    layers = [f"l{i}".encode() for i in range(200)]
    data = fake.image_manifest(b"{}", layers)
    digest = registry.put_manifest("twinbuild-ci/cuda", fake.digest_of(data), data)
    image = ImageRef.parse(f"{registry.address}/twinbuild-ci/cuda@{digest}")
    with pytest.raises(EngineError, match="lists 200 layers, more than the 128"):
        client(registry).copy(image, "twinbuild/cuda", OciManifest(media_type="x", data=data))
    assert registry.writes() == []
