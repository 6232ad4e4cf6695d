"""The smoke report of one image: the typed :class:`SmokeReport`, its JSON file, JUnit, markdown.

The JSON file is what ``twinbuild evidence record`` reads: its shape is written once, here, by
:meth:`SmokeReport.to_json` and read back, strictly, by :meth:`SmokeReport.load`. ``SCHEMA``
changes with it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import ARCHS, NAME_RE, PROFILES, Arch, ImageKey, Profile
from twinbuild.smoke.gpu import GpuInfo
from twinbuild.smoke.run_summary import Counts, read_counts, read_gpu
from twinbuild.util import strictjson
from twinbuild.util.strictjson import Fields

SCHEMA = 2  # 2: an image is a variant on one architecture
Outcome = Literal["passed", "failed", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "skipped")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeTest:
    """One test of the suite, as the suite's recorder wrote it (``smoke/flaky.py``)."""

    __test__ = False  # a data record, not a pytest class

    id: str
    outcome: Outcome
    attempts: int
    flaky: bool
    duration_s: float
    markers: tuple[str, ...]
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "attempts": self.attempts,
            "flaky": self.flaky,
            "duration_s": self.duration_s,
            "markers": list(self.markers),
            "message": self.message,
        }

    @classmethod
    def from_json(cls, t: Fields) -> SmokeTest:
        test = cls(
            id=t.text("id"),
            outcome=t.choice("outcome", OUTCOMES),
            attempts=t.integer("attempts"),
            flaky=t.flag("flaky"),
            duration_s=t.number("duration_s"),
            markers=tuple(t.strings("markers")),
            message=t.text("message") if "message" in t.data else "",
        )
        t.done()
        return test


@dataclass(frozen=True, slots=True, kw_only=True)
class SmokeReport:
    """One smoke run of one image (or of this machine): what it tested and what every test did."""

    variant: str
    arch: Arch
    profile: Profile
    image: ImageRef
    manifest_digest: str
    gpu: GpuInfo | None
    tests: tuple[SmokeTest, ...]
    counts: Counts
    holds: Mapping[str, str] = field(default_factory=dict)  # pin -> what the image holds

    @property
    def image_key(self) -> ImageKey:
        return ImageKey(variant=self.variant, arch=self.arch)

    @property
    def failures(self) -> list[SmokeTest]:
        return [t for t in self.tests if t.outcome == "failed"]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "variant": self.variant,
            "arch": self.arch,
            "profile": self.profile,
            "image": self.image.to_json(),
            "manifest_digest": self.manifest_digest,
            "gpu": self.gpu.to_json() if self.gpu is not None else None,
            "tests": [t.to_json() for t in self.tests],
            "counts": {
                "passed": self.counts.passed,
                "failed": self.counts.failed,
                "skipped": self.counts.skipped,
                "flaky": self.counts.flaky,
            },
            "holds": dict(self.holds),
        }

    @classmethod
    def from_json(cls, data: object, source: str) -> SmokeReport:
        """The report in ``data``; every key typed and named with its path, counts checked."""
        top = Fields(data, "report", source)
        schema = top.integer("schema")
        if schema != SCHEMA:
            raise ConfigError(
                f"{source}: report.schema: {schema} is not {SCHEMA}; update twinbuild"
            )
        variant = top.match("variant", NAME_RE, "a variant name")
        arch = top.choice("arch", ARCHS)
        profile = top.choice("profile", PROFILES)
        image = top.obj("image")
        ref = ImageRef(
            id=_opt_text(image, "id"),
            digest=_opt_text(image, "digest"),
            inputs_hash=_opt_text(image, "inputs_hash"),
            base_digest=_opt_text(image, "base_digest"),
        )
        image.done()
        manifest_digest = top.text("manifest_digest")
        gpu = _gpu(top.opt_obj("gpu"))
        tests = tuple(SmokeTest.from_json(t) for t in top.items("tests"))
        holds = _holds(top.obj("holds")) if "holds" in top.data else {}
        claimed = read_counts(top.obj("counts"))
        top.done()
        counts = Counts.of(tests)
        if claimed != counts:
            raise ConfigError(
                f"{source}: report.counts: {claimed.describe()} disagrees with its tests "
                f"({counts.describe()}); the report is inconsistent, re-run the smoke tests"
            )
        return cls(
            variant=variant, arch=arch, profile=profile, image=ref,
            manifest_digest=manifest_digest, gpu=gpu, tests=tests, counts=counts, holds=holds,
        )  # fmt: skip

    @classmethod
    def load(cls, path: Path) -> SmokeReport:
        """The report at ``path``, read strictly (see :meth:`from_json`)."""
        return cls.from_json(strictjson.load(path, what="smoke report"), str(path))

    def save(self, report_dir: Path, *, keyed: bool = False) -> dict[str, Path]:
        """Write ``smoke-<variant>-<arch>-<profile>[-host|-<image>].json`` and ``.junit.xml``.

        ``keyed`` adds the image id (12 hex) to the name: an image other than the one the last
        build recorded (``smoke --image``) gets its own report instead of overwriting the built
        one's.
        """
        report_dir.mkdir(parents=True, exist_ok=True)
        stem = f"smoke-{self.image_key.name}-{self.profile}"
        if self.image.id is None:
            stem += "-host"
        elif keyed:
            stem += "-" + self.image.id.removeprefix("sha256:")[:12]
        paths = {"json": report_dir / f"{stem}.json", "junit": report_dir / f"{stem}.junit.xml"}
        paths["json"].write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        paths["junit"].write_text(junit_xml(self), encoding="utf-8")
        return paths


def summary(
    *,
    image_key: ImageKey,
    profile: Profile,
    image: ImageRef,
    manifest_digest: str,
    gpu: GpuInfo | None,
    tests: Sequence[SmokeTest],
    holds: Mapping[str, str],
) -> SmokeReport:
    """The report of one run: its tests counted, what the image holds sorted by pin."""
    return SmokeReport(
        variant=image_key.variant, arch=image_key.arch, profile=profile, image=image,
        manifest_digest=manifest_digest, gpu=gpu, tests=tuple(tests), counts=Counts.of(tests),
        holds=dict(sorted(holds.items())),
    )  # fmt: skip


def read_results(path: Path) -> tuple[tuple[SmokeTest, ...], dict[str, str]]:
    """The records the suite itself wrote (every test, what the image holds), in these types."""
    top = Fields(strictjson.load(path, what="smoke report"), "results", str(path))
    tests = tuple(SmokeTest.from_json(t) for t in top.items("tests"))
    holds = _holds(top.obj("holds"))
    top.done()
    return tests, holds


def collected(report_dir: Path) -> list[SmokeReport]:
    """Every report under ``report_dir``, by file name: ``smoke.md`` lists them all, so a run
    for one variant or one image does not drop what earlier runs found."""
    found = []
    for path in sorted(report_dir.glob("smoke-*.json")):
        try:
            found.append(SmokeReport.load(path))
        except ConfigError:
            continue  # not ours, or half-written by a run that died: the table skips it
    return found


def junit_xml(data: SmokeReport) -> str:
    tests = data.tests
    suite = ET.Element(
        "testsuite",
        name=f"twinbuild-smoke-{data.image_key.name}-{data.profile}",
        tests=str(len(tests)),
        failures=str(data.counts.failed),
        errors="0",
        skipped=str(data.counts.skipped),
        time=f"{sum(t.duration_s for t in tests):.3f}",
    )
    props = ET.SubElement(suite, "properties")
    for key, value in (("image", data.image.id), ("manifest_digest", data.manifest_digest)):
        ET.SubElement(props, "property", name=key, value=str(value))
    for t in tests:
        path, _, name = t.id.partition("::")
        case = ET.SubElement(
            suite,
            "testcase",
            classname=path.removesuffix(".py").replace("/", "."),
            name=name,
            time=f"{t.duration_s:.3f}",
        )
        if t.attempts > 1 or t.flaky:
            cprops = ET.SubElement(case, "properties")
            ET.SubElement(cprops, "property", name="attempts", value=str(t.attempts))
            ET.SubElement(cprops, "property", name="flaky", value=str(t.flaky).lower())
        if t.outcome == "failed":
            ET.SubElement(case, "failure", message=t.message).text = t.message
        elif t.outcome == "skipped":
            ET.SubElement(case, "skipped", message=t.message)
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def markdown(summaries: Sequence[SmokeReport]) -> str:
    """One table row per image, then every failure and flaky test, for CI's step summary."""
    out = [
        "## twinbuild smoke",
        "",
        "| variant | arch | profile | image | passed | failed | skipped | flaky | GPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        c = s.counts
        image = s.image.id or "host"
        where = f"{s.gpu.count}x {s.gpu.model}" if s.gpu else "none"
        out.append(
            f"| {s.variant} | {s.arch} | {s.profile} | `{image[:19]}` | {c.passed} | {c.failed} "
            f"| {c.skipped} | {c.flaky} | {where} |"
        )
    for s in summaries:
        bad = [t for t in s.tests if t.outcome == "failed" or t.flaky]
        if bad:
            out += ["", f"### {s.image_key} ({s.profile})", ""]
            for t in bad:
                tag = "FLAKY (passed on rerun)" if t.flaky else "FAILED"
                out.append(f"- **{tag}** `{t.id}`: {_one_line(t.message)}")
    return "\n".join(out) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:400]


def _opt_text(fields: Fields, key: str) -> str | None:
    """A string or null; a missing key is still refused."""
    if key in fields.data and fields.data[key] is None:
        fields.ignore(key)
        return None
    return fields.text(key)


def _gpu(g: Fields | None) -> GpuInfo | None:
    """The keys the evidence shares (:func:`run_summary.read_gpu`), and first the one only a smoke
    report writes: each GPU's compute capability (none in a report of an AMD run)."""
    if g is None:
        return None
    archs = tuple(g.strings("archs")) if "archs" in g.data else ()
    seen = read_gpu(g)
    return None if seen is None else GpuInfo(**asdict(seen), archs=archs)


def _holds(h: Fields) -> dict[str, str]:
    holds = {key: h.text(key) for key in list(h.data)}
    h.done()
    return holds
