"""``twinbuild import``: draft the manifest from two recipes that hard-code their pins."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from twinbuild.cli.common import add_format
from twinbuild.manifest.model import DEFAULT_PATH


def cmd_import(args: argparse.Namespace) -> int:
    from twinbuild.importer.run import ImportOptions, run_import

    options = ImportOptions(
        cuda_dockerfile=args.cuda_dockerfile, rocm_dockerfile=args.rocm_dockerfile, out=args.out,
        format=args.format, force=args.force, allow_unrecognised=args.allow_unrecognised,
    )  # fmt: skip
    return run_import(options, sys.stdout)


#: The top-level commands :func:`register` adds (``twinbuild.cli.main`` builds only the one run).
COMMANDS = ("import",)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "import", help="draft pins/manifest.toml from two recipes that hard-code their pins"
    )
    p.add_argument(
        "cuda_dockerfile", type=Path, metavar="CUDA_DOCKERFILE", help="the CUDA image's recipe"
    )
    p.add_argument(
        "rocm_dockerfile", type=Path, metavar="ROCM_DOCKERFILE", help="the ROCm image's recipe"
    )
    p.add_argument(
        "--out", type=Path, default=DEFAULT_PATH, help="draft path (default: %(default)s)"
    )
    add_format(p, "markdown", what="the drift report")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument(
        "--allow-unrecognised", action="store_true",
        help="exit 0 even when some pin-like text could not be classified",
    )  # fmt: skip
    p.set_defaults(func=cmd_import)
