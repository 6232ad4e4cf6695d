"""The Docker engine boundary: the only module that imports ``docker``.

``connect()`` gives an ``Engine``, which implements ``api.EngineAPI``: everything else (build,
smoke, bench) types against that protocol, so unit tests pass the one fake in
tests/fake_engine.py. Every Docker SDK or connection error becomes an ``EngineError`` with one
line. Containers always name their
network: ``none``, or ``host`` where a step must reach a registry; the private engine has no bridge
network to fall back on.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlencode

from twinbuild.engine import buildx_build, daemon, wire
from twinbuild.engine.api import (
    NETWORKS,
    RUN_TIMEOUT_S,
    BuildOutcome,
    BuildTarget,
    Credentials,
    EngineInfo,
    GpuAccess,
    ImageSummary,
    Network,
    Pushed,
    RunResult,
    registry_of,
    split_tag,
)
from twinbuild.errors import ConfigError, CredentialsMissing, EngineError, TwinbuildError
from twinbuild.manifest.model import Arch
from twinbuild.util.activity import Say

if TYPE_CHECKING:
    import docker

    from twinbuild.engine import transfer

OWNER_LABEL = "org.twinbuild.owner"  # on every container we create, so leftovers can be found
API_TIMEOUT_S = 120


_AUTH_WORDS = ("unauthorized", "authentication required", "no basic auth credentials", "denied")
_MISSING_WORDS = ("manifest unknown", "not found", "does not exist")


def stored_credentials(registry: str) -> Credentials | None:
    """The login stored for ``registry`` in ``$DOCKER_CONFIG/config.json`` (or the credential
    helper it names), read by the Docker SDK as the docker CLI writes it; None when none is."""
    found = _stored_login(registry)
    if not found:
        return None
    username = found.get("username") or found.get("Username") or ""
    password = found.get("password") or found.get("Password") or ""
    if not (username and password):
        return None
    return Credentials(username=str(username), password=str(password))


def _auth_header(registry: str) -> str:
    """``X-Registry-Auth``: the login stored for ``registry`` as the Docker SDK resolves it (an
    identity token too), or an empty one, as the docker CLI sends."""
    import docker.auth

    return docker.auth.encode_header(_stored_login(registry) or {}).decode("ascii")


def _stored_login(registry: str) -> dict[str, Any] | None:
    """The login ``$DOCKER_CONFIG`` holds for ``registry`` (its credential helper asked), as the
    Docker SDK resolves it; None when it holds none."""
    import docker.auth
    import docker.errors

    try:
        found = docker.auth.load_config().resolve_authconfig(registry)
    except docker.errors.DockerException as exc:
        raise CredentialsMissing(
            f"the login stored for {registry} cannot be read ({_one_line(str(exc))[:160]}); "
            f"run `docker login {registry}` again"
        ) from None
    return dict(found) if found else None


def _stream(docker_host: str, call: transfer.Call) -> Iterator[dict[str, Any]]:
    """The engine's push or pull messages, inside the registry request timeout: how long it may
    go without moving (``engine.transfer``; tests without the docker marker block it, like
    ``_request``)."""
    from twinbuild.engine import transfer
    from twinbuild.util.exchange import TIMEOUT_ENV_VAR, request_timeout

    seconds = request_timeout()
    limit = transfer.Limit(seconds=seconds, hint=f"{TIMEOUT_ENV_VAR}={seconds} sets it")
    return transfer.stream(docker_host, call, limit)


def _registry_failure(what: str, ref: str, message: str) -> TwinbuildError:
    text = _one_line(message)
    registry = registry_of(ref)
    if any(word in text.lower() for word in _AUTH_WORDS):
        return CredentialsMissing(
            f"{what}: the registry {registry} wants credentials the engine was not given "
            f"({text[:120]}); run `docker login {registry}` (they go to "
            "$DOCKER_CONFIG/config.json) and retry"
        )
    return EngineError(f"{what}: the registry {registry} failed: {text[:200]}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _check_network(network: str) -> Network:
    if network not in NETWORKS:
        raise ConfigError(
            f"network {network!r} is not allowed; use 'none', or 'host' where a step must reach "
            "a registry"
        )
    return network


@contextlib.contextmanager
def _errors(what: str, docker_host: str) -> Iterator[None]:
    """Turn SDK and connection failures into one-line EngineErrors."""
    import docker.errors
    import requests.exceptions

    try:
        yield
    except requests.exceptions.ConnectionError as exc:
        raise EngineError(
            f"{what}: the engine at {docker_host} does not answer ({type(exc).__name__}); "
            "run `twinbuild engine up`"
        ) from exc
    except requests.exceptions.ReadTimeout as exc:
        raise EngineError(f"{what}: the engine at {docker_host} timed out") from exc
    except docker.errors.APIError as exc:
        detail = exc.explanation if exc.explanation else str(exc)
        raise EngineError(f"{what}: {_one_line(str(detail))}") from exc
    except docker.errors.DockerException as exc:
        raise EngineError(f"{what}: {_one_line(str(exc))}") from exc


def _open_client(docker_host: str) -> docker.APIClient:
    """The one place a Docker client is made (tests without the docker marker block it)."""
    import docker

    with _errors(f"cannot talk to the engine at {docker_host}", docker_host):
        return docker.APIClient(base_url=docker_host, version="auto", timeout=API_TIMEOUT_S)


def _request(
    docker_host: str, method: str, path: str, timeout: float = API_TIMEOUT_S
) -> tuple[int, bytes]:
    """One plain HTTP request to the Engine API, without the SDK (tests without the docker marker
    block it, like ``_open_client``).

    The up-to-date decision asks two or three small questions (inspect a tag, list by label);
    importing the SDK (requests, urllib3) to ask them took longer than the whole decision.
    """
    try:
        return wire.request(docker_host, method, path, timeout=timeout)
    except OSError as exc:
        raise EngineError(
            f"{method} {path.split('?', maxsplit=1)[0]}: the engine at {docker_host} does not "
            f"answer ({type(exc).__name__}); run `twinbuild engine up`"
        ) from exc


def _answer(what: str, status: int, body: bytes) -> Any:
    """The JSON of a 2xx answer; an EngineError with the engine's own message otherwise."""
    if 200 <= status < 300:
        return json.loads(body) if body.strip() else None
    try:
        message = str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        message = body.decode(errors="replace")
    raise EngineError(f"{what}: {_one_line(message) or f'HTTP {status}'}")


class Engine:
    """A connected engine. ``api`` is the SDK's low-level client, made on first use.

    Inspecting, listing and tagging images go over plain HTTP while no SDK client exists, so a
    run that finds everything up to date never imports the SDK; importing, pushing, pulling and
    containers make the client. A build is buildx's (``buildx_build``), never the SDK's. An
    Engine made with a client (unit tests' fakes) uses it for all.
    """

    def __init__(self, api: docker.APIClient | None, docker_host: str) -> None:
        self._api = api
        self._host = docker_host

    @property
    def api(self) -> docker.APIClient:
        if self._api is None:
            self._api = _open_client(self._host)
        return self._api

    @api.setter
    def api(self, value: docker.APIClient) -> None:
        self._api = value

    @property
    def docker_host(self) -> str:
        return self._host

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _errors(what, self._host)

    def _plain(self, method: str, path: str) -> tuple[int, bytes]:
        return _request(self._host, method, path)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def info(self) -> EngineInfo:
        with self._errors("engine info"):
            version = self.api.version()
            info = self.api.info()
            # The SDK's ping() drops the headers; Builder-Version is only in them.
            ping = self.api._get(self.api._url("/_ping"))  # type: ignore[attr-defined]
            ping.raise_for_status()
        return EngineInfo(
            docker_host=self._host,
            server_version=str(version.get("Version", "")),
            api_version=str(version.get("ApiVersion", "")),
            os_type=str(version.get("Os", "")),
            arch=str(version.get("Arch", "")),
            storage_driver=str(info.get("Driver", "")),
            builder_version=ping.headers.get("Builder-Version", "1") or "1",
        )

    def build(
        self, target: BuildTarget, *, line: Callable[[str], None], mirror: str, say: Say
    ) -> BuildOutcome:
        """Build ``target`` with ``docker buildx build`` on this engine's BuildKit (buildx
        installed from the Debian ``mirror`` where missing); each line of its progress to
        ``line``. An engine without BuildKit is told in one line before buildx starts."""
        missing = buildx_build.buildkit_missing(
            self._host, _answer("version", *self._plain("GET", "/version"))
        )
        if missing is not None:
            raise EngineError(missing)
        return buildx_build.run(buildx_build.docker_cli(mirror, say), self._host, target, line)

    def inspect_image(self, ref: str) -> Mapping[str, Any] | None:
        """The image's inspect document, or None when no image has that tag or id."""
        if self._api is None:
            status, body = self._plain("GET", f"/images/{quote(ref, safe='/:@')}/json")
            if status == 404:
                return None
            found: dict[str, Any] = _answer(f"inspect image {ref}", status, body)
            return found
        import docker.errors

        with self._errors(f"inspect image {ref}"):
            try:
                # types-docker leaves inspect_image untyped
                result: dict[str, Any] = self.api.inspect_image(ref)  # type: ignore[no-untyped-call]
            except docker.errors.NotFound:
                return None
        return result

    def image_exists(self, ref: str) -> bool:
        return self.inspect_image(ref) is not None

    def image_labels(self, ref: str) -> Mapping[str, str]:
        found = self.inspect_image(ref)
        if found is None:
            raise EngineError(f"image {ref} is not in the engine at {self._host}")
        labels = (found.get("Config") or {}).get("Labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    def images_by_label(
        self, key: str, value: str | None = None, *, intermediate: bool = False
    ) -> list[ImageSummary]:
        """Images with the label (``value`` None: any value); ``intermediate`` adds the untagged
        layers of builds too, which hold the label of the image they were built for."""
        wanted = key if value is None else f"{key}={value}"
        rows: list[dict[str, Any]]
        if self._api is None:
            query = {"filters": json.dumps({"label": [wanted]})} | (
                {"all": "1"} if intermediate else {}
            )
            what = f"list images with label {wanted}"
            rows = _answer(what, *self._plain("GET", f"/images/json?{urlencode(query)}")) or []
        else:
            with self._errors(f"list images with label {wanted}"):
                rows = self.api.images(all=intermediate, filters={"label": wanted})
        return [
            ImageSummary(
                id=str(row["Id"]),
                tags=tuple(t for t in row.get("RepoTags") or () if t != "<none>:<none>"),
                labels={str(k): str(v) for k, v in (row.get("Labels") or {}).items()},
                size=int(row.get("Size") or 0),
                created=int(row.get("Created") or 0),
            )
            for row in rows
        ]

    def import_rootfs(
        self,
        tar_path: Path,
        *,
        arch: Arch,
        labels: Mapping[str, str] | None = None,
        cmd: Sequence[str] = ("/bin/bash",),
    ) -> str:
        """Load a root filesystem tar as an untagged image of ``arch``; return its id.

        Untagged on purpose: the caller tags it only once it is complete, so a failed load never
        leaves a tag behind. The image is a one-layer ``docker load`` archive
        (``engine.archive``), since ``docker import`` cannot name the architecture.
        """
        from twinbuild.engine import archive

        with tempfile.TemporaryDirectory(prefix="load-", dir=tar_path.parent) as work:
            made = archive.write(
                tar_path, Path(work) / "image.tar", arch=arch, cmd=cmd, labels=labels
            )
            with made.path.open("rb") as data, self._errors(f"load {tar_path}"):
                out = self.api.load_image(data)  # type: ignore[no-untyped-call]
                for message in out or ():
                    if isinstance(message, dict) and message.get("error"):
                        raise EngineError(f"load {tar_path}: {message['error']}")
        if self.inspect_image(made.image_id) is None:
            raise EngineError(f"load {tar_path}: the engine has no image {made.image_id} after it")
        return made.image_id

    def tag(self, image: str, ref: str) -> None:
        repository, tag = split_tag(ref)
        if self._api is None:
            query = urlencode({"repo": repository, "tag": tag, "force": "1"})
            what = f"tag {image} as {ref}"
            _answer(what, *self._plain("POST", f"/images/{quote(image, safe='/:@')}/tag?{query}"))
            return
        with self._errors(f"tag {image} as {ref}"):
            self.api.tag(image, repository, tag, force=True)

    def remove_image(self, ref: str, *, force: bool = False, prune: bool = True) -> None:
        """Remove an image (or untag it); ``prune=False`` keeps its untagged parents."""
        with self._errors(f"remove image {ref}"):
            self.api.remove_image(ref, force=force, noprune=not prune)

    def layers_size(self) -> int:
        """Bytes the engine's image layers take on disk (``docker system df``'s total)."""
        with self._errors("disk usage"):
            usage = self.api.df()
        return int(usage.get("LayersSize") or 0)

    def push(self, ref: str) -> Pushed:
        """Push ``repository:tag`` (the engine's credentials for its registry); the digest.

        Layers the registry already holds are not sent again (``Layer already exists``). The
        push must move within ``TWINBUILD_REGISTRY_TIMEOUT`` (``engine.transfer``), or it is
        cancelled.
        """
        from twinbuild.engine import transfer

        repository, tag = split_tag(ref)
        what = f"push {ref}"
        sent = present = 0
        digest: str | None = None
        call = transfer.push_call(
            repository, tag, auth=_auth_header(registry_of(ref)), what=what,
            registry=registry_of(ref),
        )  # fmt: skip
        for message in _stream(self._host, call):
            if "error" in message or "errorDetail" in message:
                detail = (message.get("errorDetail") or {}).get("message")
                raise _registry_failure(what, ref, str(detail or message.get("error")))
            status = str(message.get("status", ""))
            if status == "Pushed":
                sent += 1
            elif status == "Layer already exists" or status.startswith("Mounted from"):
                present += 1  # in the registry already (another repository's blob mounted)
            aux = message.get("aux") or {}
            if isinstance(aux, dict) and str(aux.get("Digest", "")).startswith("sha256:"):
                digest = str(aux["Digest"])
        if digest is None:
            raise EngineError(f"{what}: the engine reported no digest; nothing was pushed")
        return Pushed(
            ref=f"{repository}@{digest}", digest=digest, layers_sent=sent, layers_present=present
        )

    def pull(self, ref: str) -> str:
        """Pull ``ref`` (by digest: ``repository@sha256:...``); the image id it gave. The pull
        must move within ``TWINBUILD_REGISTRY_TIMEOUT`` (``engine.transfer``), or it is
        cancelled."""
        from twinbuild.engine import transfer

        what = f"pull {ref}"
        call = transfer.pull_call(
            ref, auth=_auth_header(registry_of(ref)), what=what, registry=registry_of(ref)
        )
        try:
            for message in _stream(self._host, call):
                if "error" in message or "errorDetail" in message:
                    detail = (message.get("errorDetail") or {}).get("message")
                    raise _registry_failure(what, ref, str(detail or message.get("error")))
        except EngineError as exc:
            if type(exc) is EngineError and any(w in str(exc).lower() for w in _MISSING_WORDS):
                raise ConfigError(
                    f"{what}: the registry {registry_of(ref)} has no such image; pass a digest "
                    "that `twinbuild push` printed"
                ) from exc
            raise
        found = self.inspect_image(ref)
        if found is None:
            raise EngineError(f"{what}: the engine reported success but has no such image")
        return str(found["Id"])

    def run_container(
        self,
        image: str,
        command: Sequence[str],
        *,
        network: Network = "none",
        env: Mapping[str, str] | None = None,
        user: str | None = None,
        workdir: str | None = None,
        binds: Mapping[str, str] | None = None,
        timeout: int = RUN_TIMEOUT_S,
    ) -> RunResult:
        """Run ``command`` in a fresh container, wait, collect its output and remove it."""
        import requests.exceptions

        host_config = self.api.create_host_config(
            network_mode=_check_network(network),
            binds={src: {"bind": dst, "mode": "ro"} for src, dst in (binds or {}).items()},
        )
        with self._errors(f"run {list(command)} in {image}"):
            created = self.api.create_container(
                image,
                list(command),
                environment=dict(env or {}),
                user=user,
                working_dir=workdir,
                host_config=host_config,
                labels={OWNER_LABEL: "run"},
            )
        cid = str(created["Id"])
        try:
            with self._errors(f"run {list(command)} in {image}"):
                self.api.start(cid)
                try:
                    status = self.api.wait(cid, timeout=timeout)
                except requests.exceptions.ReadTimeout as exc:
                    raise EngineError(
                        f"run {list(command)} in {image}: still running after {timeout}s; stopped"
                    ) from exc
                logs = self.api.logs(cid, stdout=True, stderr=True)
        finally:
            self.remove_container(cid)
        return RunResult(exit_code=int(status["StatusCode"]), output=logs.decode(errors="replace"))

    def start_container(
        self,
        image: str,
        *,
        network: Network = "none",
        command: Sequence[str] = ("sleep", "infinity"),
        gpus: GpuAccess | None = None,
    ) -> str:
        """Start a long-lived container to `exec` into; the caller removes it.

        ``gpus`` hands it the machine's GPUs: NVIDIA through a device request, AMD through its
        device nodes and the video group.
        """
        import docker.errors

        extra: dict[str, Any] = {}
        if gpus is not None:
            # types-docker wants DeviceRequest objects; the SDK turns these dicts into them.
            extra = {
                "device_requests": cast(Any, list(gpus.device_requests)) or None,
                "devices": list(gpus.devices) or None,
                "group_add": list(gpus.group_add) or None,
                "ipc_mode": gpus.ipc_mode,
                "shm_size": gpus.shm_size,
                "ulimits": [{"name": "memlock", "soft": -1, "hard": -1}]
                if gpus.memlock_unlimited
                else None,
            }
        host_config = self.api.create_host_config(network_mode=_check_network(network), **extra)
        with self._errors(f"start a container from {image}"):
            created = self.api.create_container(
                image, list(command), host_config=host_config, labels={OWNER_LABEL: "exec"}
            )
            cid = str(created["Id"])
            try:
                self.api.start(cid)
            except docker.errors.APIError:
                self.remove_container(cid)
                raise
        return cid

    def exec(self, container: str, command: Sequence[str], *, user: str | None = None) -> RunResult:
        with self._errors(f"exec {list(command)} in {container[:12]}"):
            created = self.api.exec_create(container, list(command), user=user or "")
            out = self.api.exec_start(created["Id"])
            code = self.api.exec_inspect(created["Id"]).get("ExitCode")
        return RunResult(
            exit_code=int(code if code is not None else -1), output=out.decode(errors="replace")
        )

    def remove_container(self, container: str) -> None:
        import docker.errors

        with (
            self._errors(f"remove container {container[:12]}"),
            contextlib.suppress(docker.errors.NotFound),
        ):
            self.api.remove_container(container, force=True)


def connect(docker_host: str | None = None) -> Engine:
    """Connect to the engine ``daemon.docker_host()`` picks (or ``docker_host``) and ping it.

    The SDK client is made when first needed (see :class:`Engine`).
    """
    host = docker_host or daemon.docker_host()
    try:
        status, body = _request(host, "GET", "/_ping", timeout=10)
    except EngineError as exc:
        raise EngineError(
            f"no Docker engine answers at {host}; run `twinbuild engine up` or set DOCKER_HOST"
        ) from exc
    if status != 200 or body.strip() != b"OK":
        text = _one_line(body.decode(errors="replace"))[:120]
        raise EngineError(f"{host} answered the ping with HTTP {status} ({text}); is it Docker?")
    return Engine(None, host)
