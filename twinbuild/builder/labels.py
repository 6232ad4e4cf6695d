"""The labels every image twinbuild builds carries, whichever way it is built (``twinbuild build``,
``twinbuild bake --build`` or ``docker buildx bake`` on the file ``twinbuild bake`` writes): what
it was made from, and what the profile left out of it, so that the image itself tells
``twinbuild smoke`` what any build record would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from twinbuild import __version__
from twinbuild.builder.build_record import BaseRef
from twinbuild.manifest.model import ImageKey, PinManifest, Profile

LABEL = "org.twinbuild"
OCI = "org.opencontainers.image"
#: The manifest pins the profile left out of the image, comma-separated (empty: none; every
#: image carries it, so its absence marks an image built before it existed). ``twinbuild smoke``
#: skips exactly those, and only where the profile may leave the pin out
#: (``twinbuild.manifest.rendered.local_skip_reason``).
LEFT_OUT = f"{LABEL}.left-out"


def image_labels(
    manifest: PinManifest,
    image: ImageKey,
    *,
    profile: Profile,
    inputs_hash: str,
    base: BaseRef,
    left_out: Sequence[str],
    root: Path,
    source: str | None = None,
    revision: str | None = None,
) -> dict[str, str]:
    """Every label of one image; ``source`` and ``revision`` default to the checkout's."""
    labels = {
        f"{LABEL}.inputs-hash": inputs_hash,
        f"{LABEL}.manifest-hash": manifest.digest(),
        f"{LABEL}.image-manifest-hash": manifest.image_digest(image, profile),
        f"{LABEL}.variant": image.variant,
        f"{LABEL}.arch": image.arch,
        f"{LABEL}.profile": profile,
        f"{LABEL}.base-digest": base.id,
        f"{LABEL}.base-ref": base.ref,
        f"{LABEL}.version": __version__,
        f"{OCI}.title": f"twinbuild {image.variant} {image.arch} ({profile})",
        f"{OCI}.created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        f"{OCI}.base.name": base.ref,
        f"{OCI}.base.digest": base.id,
    }
    labels[LEFT_OUT] = ",".join(sorted(left_out))
    # Asked only here, when something is built: the no-op decision runs no git.
    from twinbuild.builder import provenance

    found = {
        "revision": revision or provenance.revision(root),
        "source": source or provenance.source(root, declared=manifest.source),
    }
    labels.update({f"{OCI}.{key}": value for key, value in found.items() if value})
    return labels


def left_out(labels: Mapping[str, str]) -> tuple[str, ...] | None:
    """The pins an image's label says its profile left out; None when it has no such label."""
    value = labels.get(LEFT_OUT)
    if value is None:
        return None
    return tuple(name for name in value.split(",") if name)
