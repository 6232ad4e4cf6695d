"""Where twinbuild's images live in a registry, whichever registry it is: the naming policy.

Two namespaces: ``twinbuild-ci/`` for what CI and `twinbuild push` write (images by digest, the
local base, the build cache tags), ``twinbuild/`` for release tags, which only `twinbuild release`
writes. And what a registry address may be (``HOST[:PORT][/NAMESPACE]``), checked where one is
given. Running a registry is ``engine/registry.py``'s; talking to one ``ship/oci.py``'s.
"""

from __future__ import annotations

import re

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import ImageKey, Profile
from twinbuild.util import values

# What `twinbuild push` (and so every CI build job) writes: images by digest, the local base.
CI_NAMESPACE = "twinbuild-ci"
# Where release tags live; only `twinbuild release` writes here, after checking the evidence.
RELEASE_NAMESPACE = "twinbuild"


def ci_repository(registry: str, name: str) -> str:
    """``<registry>/twinbuild-ci/<name>``: where `push` puts ``name`` (a variant, ``base``)."""
    return f"{registry}/{CI_NAMESPACE}/{name}"


def ci_ref(registry: str, local: str) -> str:
    """The registry name of a local ``twinbuild/<name>:<tag>`` (the local base): in the CI
    namespace, like everything `push` writes."""
    return ci_repository(registry, local.removeprefix(f"{RELEASE_NAMESPACE}/"))


def repository(registry: str, variant: str) -> str:
    """Where `push` puts a variant's images: ``<registry>/twinbuild-ci/<variant>``."""
    return ci_repository(registry, variant)


def cache_ref(registry: str, image: ImageKey, profile: Profile) -> str:
    """The tag the last push of ``image`` moved (``<profile>-<arch>``): the registry build cache
    of the next build of it. The variant's tag ``<profile>`` names its image index."""
    return f"{repository(registry, image.variant)}:{profile}-{image.short}"


def index_ref(registry: str, variant: str, profile: Profile) -> str:
    """The tag of a variant's image index: every architecture's image under one name."""
    return f"{repository(registry, variant)}:{profile}"


#: A registry's host and port: no leading or trailing dot or hyphen, a host name's 253 characters.
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]+)?"
_ADDRESS_RE = re.compile(_HOST + r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*")
_HOST_RE = re.compile(_HOST)


def address_reason(value: str, *, namespace: bool = True) -> str | None:
    """Why ``value`` is not a registry ``HOST[:PORT]`` (with ``namespace``, optionally
    ``/NAMESPACE``), or None when it is one."""
    pattern = _ADDRESS_RE if namespace else _HOST_RE
    port = value.partition("/")[0].partition(":")[2]
    if pattern.fullmatch(value) and not (port and values.whole_reason(port, low=1, high=65535)):
        return None
    shape = "HOST[:PORT][/NAMESPACE]" if namespace else "HOST[:PORT]"
    return (
        f"expected a registry {shape} such as 127.0.0.1:5000 or registry.example"
        f"{'/acme' if namespace else ':5000'} (no scheme, no tag, a port from 1 to 65535)"
    )


def check_address(value: str, where: str) -> str:
    """``host[:port]`` or ``host[:port]/namespace`` (images go to ``<it>/twinbuild/<variant>``)."""
    value = value.strip().rstrip("/")
    reason = address_reason(value)
    if reason is not None:
        raise ConfigError(f"{where}={value!r}: {reason}")
    return value
