"""What the image's GPU code was built for, and whether this machine's GPUs are among it.

Three readings, each judged here (pure functions over data; empty list = passed):

- the manifest's ``gpu_archs`` against each GPU (:func:`declared`);
- ``torch.cuda.get_arch_list()``, the targets torch itself was compiled for (:func:`torch_archs`);
- the device code of the extension modules the manifest names (``kernel_modules``), as
  ``cuobjdump --list-elf`` (NVIDIA) or ``roc-obj-ls`` (AMD) lists it (:func:`kernels`).

A GPU runs an entry when it holds machine code the GPU can execute: NVIDIA ``sm_XY`` runs on
compute capability X.Z with Z >= Y (CUDA's binary compatibility within a major), ``sm_XYa``
only on X.Y itself, ``sm_XYf`` on the family X.Z, Z >= Y; PTX (``compute_XY``) does not count,
since the driver would have to JIT-compile every kernel at first use. AMD code objects run on
their own gfx target only (``gfx942:sramecc+:xnack-`` is ``gfx942``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_SM = re.compile(r"sm_(\d+?)(\d)([af]?)")
_ELF = re.compile(r"^ELF file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.cubin\s*$", re.MULTILINE)
_GFX = re.compile(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)")
#: What cuobjdump and roc-obj-ls say of a file without device code (both exit 255 then).
NO_DEVICE_CODE = ("does not contain device code", "No kernel section found")


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing:
    """One file's device code as the vendor tool listed it."""

    what: str  # the module name or the file, as messages name it
    path: str | None  # None: the module is not installed
    tool: str  # "cuobjdump --list-elf" | "roc-obj-ls"
    rc: int
    output: str


def device_target(vendor: str, found: str) -> str:
    """The target a GPU reports, as entries name it: "9.0" stays, "gfx942:sramecc+:xnack-"
    becomes "gfx942"."""
    return found.strip() if vendor == "nvidia" else found.split(":", 1)[0].strip()


def runs_on(vendor: str, entry: str, target: str) -> bool:
    """Does machine code for ``entry`` (sm_90a, gfx942, ...) run on a GPU of ``target``?"""
    if vendor != "nvidia":
        return entry.split(":", 1)[0] == target
    sm = _SM.fullmatch(entry)
    cc = re.fullmatch(r"(\d+)\.(\d)", target)
    if sm is None or cc is None:
        return False
    major, minor, suffix = int(sm.group(1)), int(sm.group(2)), sm.group(3)
    gpu_major, gpu_minor = int(cc.group(1)), int(cc.group(2))
    if suffix == "a":
        return (major, minor) == (gpu_major, gpu_minor)
    return major == gpu_major and minor <= gpu_minor


def parse_listing(tool: str, output: str) -> list[str]:
    """The targets in one tool's listing: ``sm_90`` from ``... .sm_90.cubin`` (cuobjdump), the
    gfx target of each ``hipv4-amdgcn-amd-amdhsa--gfx942`` bundle entry (roc-obj-ls)."""
    if tool.startswith("cuobjdump"):
        return _ELF.findall(output)
    return _GFX.findall(output)


def _targets(vendor: str, found: Sequence[str]) -> list[str]:
    return sorted({device_target(vendor, f) for f in found if f.strip()})


def _what(vendor: str) -> str:
    return "compute capability" if vendor == "nvidia" else "architecture"


def declared(*, vendor: str, archs: Sequence[str], found: Sequence[str]) -> list[str]:
    """Every GPU must be one the manifest says the image is built for (``gpu_archs``)."""
    targets = _targets(vendor, found)
    if not targets:
        return ["no GPU architecture could be read"]
    other = [t for t in targets if t not in set(archs)]
    if other:
        return [
            f"GPU {_what(vendor)} {', '.join(other)} is not one this image is built for "
            f"({', '.join(archs)}): use a build for it, or add it to gpu_archs and rebuild"
        ]
    return []


def torch_archs(*, vendor: str, arch_list: Sequence[str] | None, found: Sequence[str]) -> list[str]:
    """torch must carry machine code for every GPU (``torch.cuda.get_arch_list()``)."""
    targets = _targets(vendor, found)
    if not targets:
        return ["no GPU architecture could be read"]
    if not arch_list:
        return [f"torch.cuda.get_arch_list() is empty ({arch_list!r}): torch has no GPU code"]
    missing = [t for t in targets if not any(runs_on(vendor, e, t) for e in arch_list)]
    if missing:
        return [
            f"torch is built for {', '.join(arch_list)}, which has no machine code for GPU "
            f"{_what(vendor)} {', '.join(missing)}"
        ]
    return []


def kernels(*, vendor: str, listings: Sequence[Listing], found: Sequence[str]) -> list[str]:
    """Every named extension module must hold device code that runs on every GPU."""
    targets = _targets(vendor, found)
    if not targets:
        return ["no GPU architecture could be read"]
    if not listings:
        return ["no kernel module to read: name them in variants.<v>.kernel_modules"]
    problems: list[str] = []
    for item in listings:
        if item.path is None:
            problems.append(f"{item.what}: not installed (no module of that name)")
            continue
        entries = parse_listing(item.tool, item.output)
        none = any(marker in item.output for marker in NO_DEVICE_CODE)
        if none or (item.rc != 0 and not entries):
            tail = " ".join(item.output.split())[-200:]
            problems.append(
                f"{item.what} ({item.path}): {item.tool} found no device code (exit {item.rc}: "
                f"{tail}); a kernel module holds device code"
            )
            continue
        missing = [t for t in targets if not any(runs_on(vendor, e, t) for e in entries)]
        if missing:
            have = ", ".join(sorted(set(entries))) or "nothing"
            problems.append(
                f"{item.what} ({item.path}) is built for {have}: no machine code for GPU "
                f"{_what(vendor)} {', '.join(missing)}"
            )
    return problems


def summary(listings: Sequence[Listing]) -> Mapping[str, list[str]]:
    """For the report: each file's targets."""
    return {item.what: sorted(set(parse_listing(item.tool, item.output))) for item in listings}
