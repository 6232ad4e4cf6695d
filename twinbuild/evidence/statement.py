"""The evidence record: an in-toto Statement v1 whose predicate is one GPU smoke run.

One statement per image: a variant on one architecture. ``subject`` names that image and the pin
manifest by digest; ``predicate`` says which variant and architecture (and the vendor the manifest
gives the variant), where the run came from (source, run), what it built (build), on what GPU,
and what every test did (results). Parsing is strict: every field has a type and a key path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.manifest.model import ARCHS, NAME_RE, VENDORS, Arch, ImageKey, Profile, Vendor
from twinbuild.smoke.run_summary import Counts, Gpu, read_counts, read_gpu
from twinbuild.util.strictjson import Fields

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
#: v2: a statement is about one image of a variant (variant, arch, vendor), not a platform.
PREDICATE_TYPE = "https://twinbuild.dev/gpu-smoke/v2"
MANIFEST_SUBJECT = "pins/manifest.toml"

Outcome = Literal["passed", "failed", "skipped"]
Verdict = Literal["passed", "failed"]
PROFILES: tuple[Profile, ...] = get_args(Profile)

DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
IMAGE_REF_RE = re.compile(r"[a-z0-9][a-z0-9._:/-]*@sha256:[0-9a-f]{64}")
COMMIT_RE = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Validated:
    """What the validation workflow's default-branch code established about the commit a run
    tested, before anything is recorded or signed: the commit and its PR (the trigger check: the
    build of ``validate/pr-<N>`` in this repository), its image inputs hash per image, the vendor
    of each variant and its manifest digest (computed from its git objects, never read from the
    PR's build)."""

    commit: str
    pr: int
    inputs: Mapping[ImageKey, str]
    vendors: Mapping[str, Vendor]
    manifest_digest: str
    #: Per image, the sha256 of its lock at the commit (pins/lock/<image>.toml); absent where
    #: the commit has none. The evidence names the exact closure it tested.
    locks: Mapping[ImageKey, str] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        return f"refs/heads/validate/pr-{self.pr}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    name: str
    sha256: str  # 64 hex, no prefix, as in-toto's DigestSet


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    repository: str  # owner/name the workflow ran in
    repository_id: int  # GitHub's numeric id: survives renames, differs for every fork
    head_repository: str  # where the code came from (the fork, for a fork PR)
    head_repository_id: int
    commit: str  # the commit that was built and tested
    ref: str  # refs/heads/validate/<name>, refs/heads/<default>, refs/pull/N/merge ...
    pr: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    event: str
    workflow_ref: str
    run_id: int
    run_attempt: int
    actor: str
    runner_name: str
    runner_environment: str  # github-hosted | self-hosted


@dataclass(frozen=True, slots=True, kw_only=True)
class Build:
    profile: Profile
    inputs_hash: str
    base_digest: str
    image_id: str
    image_ref: str | None  # repo@sha256:... once pushed
    manifest_digest: str
    #: sha256 of the image's lock (pins/lock/<image>.toml) at the validated commit: the closure
    #: the run tested; None for a commit without one.
    lock_digest: str | None = None

    def image_sha256(self) -> str:
        """The digest the image subject carries: the registry digest if pushed, else the id."""
        return (self.image_ref or self.image_id).rsplit("sha256:", 1)[1]


@dataclass(frozen=True, slots=True, kw_only=True)
class TestResult:
    __test__ = False  # a data record, not a pytest class

    id: str
    outcome: Outcome
    attempts: int
    flaky: bool
    duration_s: float
    markers: tuple[str, ...]

    @property
    def gpu(self) -> bool:
        return "gpu" in self.markers


@dataclass(frozen=True, slots=True, kw_only=True)
class Results:
    verdict: Verdict
    tests: tuple[TestResult, ...]
    counts: Counts


@dataclass(frozen=True, slots=True, kw_only=True)
class Predicate:
    variant: str
    arch: Arch
    vendor: Vendor  # the variant's, as the manifest at the validated commit declares it
    source: Source
    run: Run
    build: Build
    gpu: Gpu | None
    results: Results
    created_at: datetime

    @property
    def image(self) -> ImageKey:
        return ImageKey(variant=self.variant, arch=self.arch)


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    subject: tuple[Subject, ...]
    predicate: Predicate

    def image_subject(self) -> Subject:
        return next(s for s in self.subject if s.name != MANIFEST_SUBJECT)

    def manifest_subject(self) -> Subject:
        return next(s for s in self.subject if s.name == MANIFEST_SUBJECT)

    def to_dict(self) -> dict[str, Any]:
        p = self.predicate
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": s.name, "digest": {"sha256": s.sha256}} for s in self.subject],
            "predicateType": PREDICATE_TYPE,
            "predicate": {
                "variant": p.variant,
                "arch": p.arch,
                "vendor": p.vendor,
                "source": _fields(p.source),
                "run": _fields(p.run),
                "build": _fields(p.build),
                "gpu": None if p.gpu is None else _fields(p.gpu),
                "results": {
                    "verdict": p.results.verdict,
                    "tests": [{**_fields(t), "markers": list(t.markers)} for t in p.results.tests],
                    "counts": _fields(p.results.counts),
                },
                "created_at": format_time(p.created_at),
            },
        }

    @classmethod
    def from_dict(cls, data: object, *, source: str) -> Statement:
        """Parse a statement; a foreign type is refused, a malformed one is a ConfigError."""
        top = Fields(data, "statement", source)
        kind = top.text("_type")
        if kind != STATEMENT_TYPE:
            raise EvidenceRefused(
                f"{source}: statement._type: {kind!r} is not {STATEMENT_TYPE!r}; "
                "only in-toto Statement v1 records count"
            )
        predicate_type = top.text("predicateType")
        if predicate_type != PREDICATE_TYPE:
            raise EvidenceRefused(
                f"{source}: statement.predicateType: {predicate_type!r} is not "
                f"{PREDICATE_TYPE!r}; sign the record `twinbuild evidence record` wrote"
            )
        subjects = tuple(_subject(item) for item in top.items("subject"))
        predicate = _predicate(top.obj("predicate"))
        top.done()
        names = [s.name for s in subjects]
        if len(subjects) != 2 or names.count(MANIFEST_SUBJECT) != 1:
            raise ConfigError(
                f"{source}: statement.subject: expected the image and {MANIFEST_SUBJECT!r}, "
                f"got {names}"
            )
        statement = cls(subject=subjects, predicate=predicate)
        build = predicate.build
        if statement.image_subject().sha256 != build.image_sha256():
            raise ConfigError(
                f"{source}: statement.subject: image digest {statement.image_subject().sha256} "
                f"is not the digest predicate.build records ({build.image_sha256()})"
            )
        if "sha256:" + statement.manifest_subject().sha256 != build.manifest_digest:
            raise ConfigError(
                f"{source}: statement.subject: manifest digest "
                f"{statement.manifest_subject().sha256} is not predicate.build.manifest_digest "
                f"({build.manifest_digest})"
            )
        return statement


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, where: str) -> datetime:
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text):
        raise ConfigError(f"{where}: {text!r} is not a UTC time like 2025-01-31T12:00:00Z")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a valid date and time") from None


def _fields(obj: object) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}  # type: ignore[attr-defined]


def _subject(item: Fields) -> Subject:
    name = item.text("name")
    digest = item.obj("digest")
    sha = digest.text("sha256")
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ConfigError(f"{digest.where('sha256')}: {sha!r} is not 64 lowercase hex")
    digest.done()
    item.done()
    return Subject(name=name, sha256=sha)


def _predicate(p: Fields) -> Predicate:
    variant = p.match("variant", NAME_RE, "a variant name")
    arch = p.choice("arch", ARCHS)
    vendor = p.choice("vendor", VENDORS)
    s = p.obj("source")
    source = Source(
        repository=s.text("repository"),
        repository_id=s.integer("repository_id"),
        head_repository=s.text("head_repository"),
        head_repository_id=s.integer("head_repository_id"),
        commit=s.match("commit", COMMIT_RE, "a full 40-hex commit"),
        ref=s.text("ref"),
        pr=s.opt_integer("pr"),
    )
    s.done()
    r = p.obj("run")
    run = Run(
        event=r.text("event"),
        workflow_ref=r.text("workflow_ref"),
        run_id=r.integer("run_id"),
        run_attempt=r.integer("run_attempt"),
        actor=r.text("actor"),
        runner_name=r.text("runner_name"),
        runner_environment=r.text("runner_environment"),
    )
    r.done()
    b = p.obj("build")
    digest = "a digest like sha256:<64 hex>"
    build = Build(
        profile=b.choice("profile", PROFILES),
        inputs_hash=b.match("inputs_hash", DIGEST_RE, digest),
        base_digest=b.match("base_digest", DIGEST_RE, digest),
        image_id=b.match("image_id", DIGEST_RE, digest),
        image_ref=b.opt_match("image_ref", IMAGE_REF_RE, "repository@sha256:<64 hex>"),
        manifest_digest=b.match("manifest_digest", DIGEST_RE, digest),
        lock_digest=b.opt_match("lock_digest", DIGEST_RE, digest),
    )
    b.done()
    gpu = read_gpu(p.opt_obj("gpu"))
    res = p.obj("results")
    tests = tuple(parse_test(t) for t in res.items("tests"))
    counts = read_counts(res.obj("counts"))
    results = Results(
        verdict=res.choice("verdict", ("passed", "failed")), tests=tests, counts=counts
    )
    res.done()
    created_at = parse_time(p.text("created_at"), p.where("created_at"))
    p.done()
    return Predicate(
        variant=variant,
        arch=arch,
        vendor=vendor,
        source=source,
        run=run,
        build=build,
        gpu=gpu,
        results=results,
        created_at=created_at,
    )


def parse_test(t: Fields, *, ignore: tuple[str, ...] = ()) -> TestResult:
    """One test's result; ``ignore`` names keys a smoke report has and evidence leaves out."""
    t.ignore(*ignore)
    result = TestResult(
        id=t.text("id"),
        outcome=t.choice("outcome", ("passed", "failed", "skipped")),
        attempts=t.integer("attempts"),
        flaky=t.flag("flaky"),
        duration_s=t.number("duration_s"),
        markers=tuple(t.strings("markers")),
    )
    t.done()
    return result
