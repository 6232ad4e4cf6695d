"""Smoke reports for one image: JUnit XML, the JSON summary (the evidence module's input), markdown.

The JSON summary's shape is a contract with ``twinbuild.evidence``; ``SCHEMA`` changes with it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = 1
OUTCOMES = ("passed", "failed", "skipped")


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRef:
    id: str | None  # None in host mode
    digest: str | None = None  # "repo@sha256:..." when the image has a repo digest
    inputs_hash: str | None = None  # label org.twinbuild.inputs-hash
    base_digest: str | None = None  # label org.twinbuild.base-digest

    def to_json(self) -> dict[str, str | None]:
        return {
            "id": self.id,
            "digest": self.digest,
            "inputs_hash": self.inputs_hash,
            "base_digest": self.base_digest,
        }


def counts(tests: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys((*OUTCOMES, "flaky"), 0)
    for t in tests:
        out[str(t["outcome"])] += 1
        out["flaky"] += bool(t["flaky"])
    return out


def summary(
    *,
    platform: str,
    profile: str,
    image: ImageRef,
    manifest_digest: str,
    gpu: Mapping[str, Any] | None,
    tests: Sequence[Mapping[str, Any]],
    holds: Mapping[str, str],
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "platform": platform,
        "profile": profile,
        "image": image.to_json(),
        "manifest_digest": manifest_digest,
        "gpu": dict(gpu) if gpu is not None else None,
        "tests": [dict(t) for t in tests],
        "counts": counts(tests),
        "holds": dict(sorted(holds.items())),
    }


def junit_xml(data: Mapping[str, Any]) -> str:
    tests: list[Mapping[str, Any]] = data["tests"]
    c = data["counts"]
    suite = ET.Element(
        "testsuite",
        name=f"twinbuild-smoke-{data['platform']}-{data['profile']}",
        tests=str(len(tests)),
        failures=str(c["failed"]),
        errors="0",
        skipped=str(c["skipped"]),
        time=f"{sum(float(t['duration_s']) for t in tests):.3f}",
    )
    props = ET.SubElement(suite, "properties")
    image = data["image"]
    for key, value in (("image", image["id"]), ("manifest_digest", data["manifest_digest"])):
        ET.SubElement(props, "property", name=key, value=str(value))
    for t in tests:
        path, _, name = str(t["id"]).partition("::")
        case = ET.SubElement(
            suite,
            "testcase",
            classname=path.removesuffix(".py").replace("/", "."),
            name=name,
            time=f"{float(t['duration_s']):.3f}",
        )
        if t["attempts"] > 1 or t["flaky"]:
            cprops = ET.SubElement(case, "properties")
            ET.SubElement(cprops, "property", name="attempts", value=str(t["attempts"]))
            ET.SubElement(cprops, "property", name="flaky", value=str(bool(t["flaky"])).lower())
        if t["outcome"] == "failed":
            ET.SubElement(case, "failure", message=str(t["message"])).text = str(t["message"])
        elif t["outcome"] == "skipped":
            ET.SubElement(case, "skipped", message=str(t["message"]))
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def markdown(summaries: Sequence[Mapping[str, Any]]) -> str:
    """One table row per image, then every failure and flaky test, for CI's step summary."""
    out = [
        "## twinbuild smoke",
        "",
        "| platform | profile | image | passed | failed | skipped | flaky | GPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        c = s["counts"]
        image = s["image"]["id"] or "host"
        gpu = s["gpu"]
        where = f"{gpu['count']}x {gpu['model']}" if gpu else "none"
        out.append(
            f"| {s['platform']} | {s['profile']} | `{image[:19]}` | {c['passed']} | {c['failed']} "
            f"| {c['skipped']} | {c['flaky']} | {where} |"
        )
    for s in summaries:
        bad = [t for t in s["tests"] if t["outcome"] == "failed" or t["flaky"]]
        if bad:
            out += ["", f"### {s['platform']} ({s['profile']})", ""]
            for t in bad:
                tag = "FLAKY (passed on rerun)" if t["flaky"] else "FAILED"
                out.append(f"- **{tag}** `{t['id']}`: {_one_line(str(t['message']))}")
    return "\n".join(out) + "\n"


def collected(report_dir: Path) -> list[dict[str, Any]]:
    """Every summary under ``report_dir``, by file name: ``smoke.md`` lists them all, so a run
    for one platform or one image does not drop what earlier runs found."""
    found = []
    for path in sorted(report_dir.glob("smoke-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not ours, or half-written by a run that died: the table skips it
        if isinstance(data, dict) and {"platform", "profile", "image", "counts"} <= data.keys():
            found.append(data)
    return found


def _one_line(text: str) -> str:
    return " ".join(text.split())[:400]


def write(data: Mapping[str, Any], report_dir: Path, *, keyed: bool = False) -> dict[str, Path]:
    """Write ``smoke-<platform>-<profile>[-host|-<image>].json`` and ``.junit.xml``.

    ``keyed`` adds the image id (12 hex) to the name: an image other than the one the last build
    recorded (``smoke --image``) gets its own report instead of overwriting the built one's.
    """
    report_dir.mkdir(parents=True, exist_ok=True)
    stem = f"smoke-{data['platform']}-{data['profile']}"
    if data["image"]["id"] is None:
        stem += "-host"
    elif keyed:
        stem += "-" + str(data["image"]["id"]).removeprefix("sha256:")[:12]
    paths = {"json": report_dir / f"{stem}.json", "junit": report_dir / f"{stem}.junit.xml"}
    paths["json"].write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    paths["junit"].write_text(junit_xml(data), encoding="utf-8")
    return paths
