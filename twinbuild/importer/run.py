"""``twinbuild import``: the drift report of two recipes, then the draft manifest from them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from twinbuild.errors import ConfigError, FindingsError
from twinbuild.importer import drift_report
from twinbuild.importer.draft import adopt, draft, write_draft

DEFAULT_OUT = Path("pins/manifest.toml")


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOptions:
    """What ``twinbuild import`` was asked for."""

    cuda_dockerfile: Path
    rocm_dockerfile: Path
    out: Path = DEFAULT_OUT
    format: Literal["text", "json", "markdown"] = "text"
    force: bool = False  # overwrite ``out``
    allow_unrecognised: bool = False  # exit 0 with pin-like text left unclassified


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:  # either is missing (or unreadable): not one file
        return False


def run_import(options: ImportOptions, stream: TextIO) -> int:
    """:func:`run` with the options of ``twinbuild import``."""
    return run(
        options.cuda_dockerfile, options.rocm_dockerfile, out=options.out, fmt=options.format,
        force=options.force, allow_unrecognised=options.allow_unrecognised, stream=stream,
    )  # fmt: skip


def run(
    cuda: Path,
    rocm: Path,
    *,
    out: Path = DEFAULT_OUT,
    fmt: Literal["text", "json", "markdown"] = "text",
    force: bool = False,
    allow_unrecognised: bool = False,
    stream: TextIO,
) -> int:
    """The whole `twinbuild import`: report, then draft; exit 1 when a pin was not classified.

    The drift report comes first, so a refused write (``out`` exists) still shows the drift;
    an ``out`` that is one of the recipes is refused before anything is read.
    """
    for recipe, platform in ((cuda, "CUDA"), (rocm, "ROCm")):
        if _same_file(out, recipe):
            raise ConfigError(
                f"--out {out}: is the {platform} recipe this import reads; pass another path "
                "for the draft"
            )
    adoption = adopt(cuda, rocm)
    if adoption.adopted:
        message = (
            f"{cuda} and {rocm} already take every pin from a manifest (no literal version, "
            "commit, URL or base image in them): nothing to import; check them against the "
            "manifest with `twinbuild lint`"
        )
        if fmt == "json":
            message = json.dumps({"adopted": True, "message": message}, indent=2)
        stream.write(message + "\n")
        return 0
    stream.write(drift_report.report(adoption, fmt))
    if out.exists() and not force:
        raise ConfigError(f"{out}: already exists, so the draft was not written; pass --force "
                          "to overwrite it, or --out another path")  # fmt: skip
    # pins/ is made for the manifest's own place; any other --out names an existing folder
    write_draft(draft(adoption), out, force=force, parents=out.parts[-2:] == DEFAULT_OUT.parts)
    if adoption.unrecognised and not allow_unrecognised:
        raise FindingsError(
            f"{len(adoption.unrecognised)} unrecognised pin(s) (listed above); the draft at {out} "
            "lacks them: add them by hand, then rerun with --allow-unrecognised"
        )
    return 0
