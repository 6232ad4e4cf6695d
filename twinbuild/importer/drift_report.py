"""The drift report of ``twinbuild import``: each dependency on CUDA and ROCm, side by side."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Literal

from twinbuild.util import shown

if TYPE_CHECKING:
    from twinbuild.importer.draft import Adoption, Dependency, Side

Format = Literal["text", "json", "markdown"]
HEADER = ("dependency", "CUDA", "ROCm", "verdict")


_TAG = re.compile(r"v?\d+(\.\d+)+([.+-]?[A-Za-z0-9]+)*")


def ref_kind(ref: str) -> str:
    """What a git ref most likely is, from its name alone (no network): a version-like name is a
    tag, ``HEAD`` the default branch, a name without a version a branch; anything else a ref."""
    if ref == "HEAD":
        return "default branch"
    if _TAG.fullmatch(ref):
        return "tag"
    if not re.search(r"\d+\.\d+", ref):
        return "branch"
    return "tag or branch"


def value(side: Side | None) -> str:
    """A side's pinned value as a person reads it."""
    if side is None:
        return "-"
    v = side.values
    kind = v.get("kind")
    if kind == "git":
        repo = v["repo"].split("://", 1)[-1].split("/", 1)[-1]
        ref = v["commit"][:12] if "commit" in v else f"{v['ref']} ({ref_kind(v['ref'])})"
        return f"{repo}@{ref}"
    if kind == "url":
        return v["url"]
    if kind == "apt":
        return f"{v['package']}={v['version']}"
    if "version" in v:
        return f"=={v['version']}"
    return v.get("range") or "(unpinned)"


def _cell(side: Side | None) -> str:
    if side is None:
        return "-"
    return f"{value(side)} ({', '.join(side.where)})"


def _rows(adoption: Adoption) -> list[tuple[str, str, str, str]]:
    rows = []
    c, r = adoption.bases["cuda"], adoption.bases["rocm"]
    cb = f"{c.repository}:{c.tag}" + (f"@{c.digest[:19]}" if c.digest else "")
    rb = f"{r.repository}:{r.tag}" + (f"@{r.digest[:19]}" if r.digest else "")
    rows.append(("base image", f"{cb} ({c.where})", f"{rb} ({r.where})", "per platform"))
    for dep in adoption.deps:
        rows.append((dep.name, _cell(dep.cuda), _cell(dep.rocm), dep.verdict))
    return rows


def _trailer(adoption: Adoption) -> list[str]:
    lines = [f"note: {n}" for n in adoption.notes]
    lines += [f"unrecognised: {u.path}:{u.line}: {u.text}" for u in adoption.unrecognised]
    return lines


def _summary(deps: list[Dependency]) -> str:
    counts = {v: sum(1 for d in deps if d.verdict == v)
              for v in ("same", "differs", "only CUDA", "only ROCm", "floating")}  # fmt: skip
    return f"{len(deps)} dependencies: " + ", ".join(f"{n} {v}" for v, n in counts.items())


def report(adoption: Adoption, fmt: Format = "text") -> str:
    """Render the report in the requested format; always ends with a newline."""
    if fmt == "json":
        return json.dumps(_json(adoption), indent=2) + "\n"
    rows = _rows(adoption)
    if fmt == "markdown":
        lines = ["| " + " | ".join(HEADER) + " |", "| --- | --- | --- | --- |"]
        lines += [shown.row(shown.cell(c) for c in row) for row in rows]
        extra = [f"- {line}" for line in _trailer(adoption)]
        return (
            "\n".join([*lines, "", _summary(adoption.deps), *(["", *extra] if extra else [])])
            + "\n"
        )
    widths = [max(len(row[i]) for row in [HEADER, *rows]) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)).rstrip()
        for row in [HEADER, *rows]
    ]
    return "\n".join([*lines, "", _summary(adoption.deps), *_trailer(adoption)]) + "\n"


def _json(adoption: Adoption) -> dict[str, Any]:
    def side(s: Side | None) -> dict[str, Any] | None:
        if s is None:
            return None
        return {"value": value(s), "values": dict(s.values), "where": list(s.where),
                "floating": s.floating}  # fmt: skip

    return {
        "bases": {
            p: {"repository": b.repository, "tag": b.tag, "digest": b.digest, "where": b.where}
            for p, b in adoption.bases.items()
        },
        "dependencies": [
            {"name": d.name, "verdict": d.verdict, "cuda": side(d.cuda), "rocm": side(d.rocm)}
            for d in adoption.deps
        ],
        "notes": adoption.notes,
        "unrecognised": [
            {"path": str(u.path), "line": u.line, "text": u.text} for u in adoption.unrecognised
        ],
    }
