"""``twinbuild variants``: every variant of the manifest, as a person or a workflow reads it.

One line (or one JSON object) per variant: its vendor, toolkit, architectures, GPU targets, base,
recipe, whether the gate requires its evidence (``validate``), its CI runner labels, and the
upstream variant names it builds. The JSON is what workflows and scripts read; ``--matrix``
(``twinbuild.ci.matrix``) turns it into a job matrix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from twinbuild.manifest.loader import load
from twinbuild.manifest.model import DEFAULT_PATH, PinManifest, Variant


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantsOptions:
    """What ``twinbuild variants`` was asked for."""

    manifest: Path = DEFAULT_PATH
    format: Literal["text", "json"] = "text"


def variant_json(variant: Variant) -> dict[str, Any]:
    base = variant.base
    return {
        "name": variant.name,
        "vendor": variant.vendor,
        "toolkit": variant.toolkit,
        "archs": list(variant.archs),
        "gpu_archs": list(variant.gpu_archs),
        "base": {
            "repository": base.repository, "tag": base.tag, "digest": base.digest or None,
            "floating": base.floating,
        },
        "recipe": f"images/{variant.recipe}/Dockerfile",
        "python": variant.python,
        "validate": variant.validate,
        "runners": {"build": list(variant.runners.build), "gpu": list(variant.runners.gpu)},
        "build_args": dict(sorted(variant.build_args.items())),
        "upstream": list(variant.upstream),
        "images": [i.name for i in variant.images()],
    }  # fmt: skip


def listing(manifest: PinManifest, fmt: Literal["text", "json"] = "text") -> str:
    """The variants of ``manifest`` in ``fmt``."""
    if fmt == "json":
        doc = {
            "manifest": str(manifest.path),
            "variants": [variant_json(v) for v in manifest.variants.values()],
            "required": list(manifest.required()),
            "local": list(manifest.local_variants()),
        }
        return json.dumps(doc, indent=2) + "\n"
    lines = []
    for v in manifest.variants.values():
        base = f"{v.base.repository}:{v.base.tag}"
        base += f"@{v.base.digest[:19]}" if v.base.digest else " (no digest yet)"
        gated = "gate requires it" if v.validate == "pr" else "nightly"
        lines.append(
            f"{v.name}: {v.vendor} {v.toolkit}, {', '.join(v.archs)}, GPUs "
            f"{', '.join(v.gpu_archs)}; images/{v.recipe}/Dockerfile on {base}; {gated}"
            + (f"; upstream {', '.join(v.upstream)}" if v.upstream else "")
        )
    return "\n".join(lines) + "\n"


def variants(options: VariantsOptions) -> str:
    return listing(load(options.manifest), options.format)
