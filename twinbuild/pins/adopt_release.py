"""``twinbuild pins adopt-release RELEASE_LOCK``: upstream's release lock as pins.

Upstream cuts a release with ``release-lock.json`` (its ``write_release_lock.py``): the SGLang and
Megatron-LM commits the release bakes, beside the branches they come from; the miles commit is the
tagged one. Here the same commits are pins: ``lock`` moves ``pins.sglang``, ``pins.megatron-lm``
(and ``pins.miles`` when the file or ``--miles-commit`` names it) to those commits on every variant,
one ``pins bump`` each, after checking that the lock's repository and branch are the pin's. A
release of these images then names the same commits upstream's did, and ``twinbuild lint
--strict`` finds no floating branch among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.lint.checks import lint_manifest
from twinbuild.manifest.loader import load, loads
from twinbuild.manifest.model import DEFAULT_PATH, ImageKey, PinManifest, Profile
from twinbuild.pins.bump import BumpRequest, edit
from twinbuild.pins.diff import rebuild_needed
from twinbuild.util import strictjson
from twinbuild.util.atomic import write_atomic

#: The lock's keys, and the pin each one moves: (commit key, repository key, branch key).
LOCKED = {
    "sglang": ("sglang_commit", "sglang_repo", "sglang_branch"),
    "megatron-lm": ("megatron_commit", "megatron_repo", "megatron_branch"),
    "miles": ("miles_commit", "miles_repo", "miles_branch"),
}
KNOWN = (
    "release_branch", "ci_image_tag", "wheels_fingerprint_cu130_x86_64",
    "wheels_fingerprint_cu130_aarch64", "wheels_fingerprint_cu129_x86_64",
    *(key for keys in LOCKED.values() for key in keys),
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class AdoptOptions:
    """What ``twinbuild pins adopt-release`` was asked for."""

    manifest: Path = DEFAULT_PATH
    lock: Path
    why: str
    miles_commit: str | None = None  # upstream's release bakes the tagged commit of miles
    dry_run: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AdoptResult:
    path: Path
    moved: dict[str, str]  # pin -> commit
    rebuild: dict[ImageKey, tuple[Profile, ...]]
    manifest: PinManifest
    written: bool

    def to_dict(self) -> dict[str, object]:
        """``pins adopt-release --format json``: what moved, what rebuilds (not the manifest)."""
        return {
            "manifest": str(self.path), "moved": dict(self.moved), "written": self.written,
            "rebuild": {i.name: list(profiles) for i, profiles in self.rebuild.items()},
        }  # fmt: skip

    def text(self) -> str:
        return self.report()

    def report(self) -> str:
        every = self.manifest.label(self.manifest.images())
        lines = [f"pins.{pin}: {every}: -> {commit}" for pin, commit in self.moved.items()]
        if self.rebuild:
            lines.append(f"rebuild: {self.manifest.label(list(self.rebuild))}")
        if not self.written:
            lines.append(f"dry run: {self.path} left as it was")
        return "\n".join(lines) + "\n"


def adopt_release(options: AdoptOptions) -> AdoptResult:
    """Move the locked pins to the lock's commits; write nothing unless all of them pass."""
    old = load(options.manifest)
    doc = strictjson.load(options.lock, what="release lock")
    if not isinstance(doc, dict):
        raise ConfigError(f"{options.lock}: a release lock is a JSON object")
    fields = strictjson.Fields(doc, "lock", str(options.lock), missing="the release lock names it")
    commits: dict[str, str] = {}
    for pin, (commit_key, repo_key, branch_key) in LOCKED.items():
        commit = fields.data.get(commit_key)
        if pin == "miles" and options.miles_commit is not None:
            commit = options.miles_commit
        if commit is None:
            if pin != "miles":
                fields.text(commit_key)  # raises: missing
            continue
        if not isinstance(commit, str):
            raise ConfigError(f"{options.lock}: lock.{commit_key}: expected a string")
        found = old.find(pin)
        if found is None:
            raise ConfigError(f"{old.path}: no pins.{pin} to take {commit_key} from {options.lock}")
        _same_source(old, pin, fields, repo_key, branch_key, options.lock)
        commits[found.name] = commit
    fields.ignore(*KNOWN)
    fields.done()
    text = old.text
    for pin, commit in commits.items():
        current = loads(text, old.path)
        text = edit(current, BumpRequest(name=pin, commit=commit, why=options.why))
    new = loads(text, old.path)
    findings = lint_manifest(new).findings
    if findings:
        listed = "\n".join(f"  {f}" for f in findings)
        raise ConfigError(f"{old.path}: the lock would fail the lint, nothing written:\n{listed}")
    if not options.dry_run:
        write_atomic(options.manifest, text)
    return AdoptResult(
        path=options.manifest, moved=commits, rebuild=rebuild_needed(old, new), manifest=new,
        written=not options.dry_run,
    )  # fmt: skip


def _same_source(
    old: PinManifest,
    pin: str,
    fields: strictjson.Fields,
    repo_key: str,
    branch_key: str,
    lock: Path,
) -> None:
    """The lock's ``owner/name`` and branch must be the pin's repository and ref, if it says."""
    repo, branch = fields.data.get(repo_key), fields.data.get(branch_key)
    for image in old.images(old.pins[pin].variants):
        values = next(r for r in old.resolve(image) if r.name == pin).values
        if isinstance(repo, str) and not (values.repo or "").rstrip("/").removesuffix(
            ".git"
        ).lower().endswith("/" + repo.lower()):
            raise ConfigError(
                f"{lock}: lock.{repo_key}: {repo!r} is not pins.{pin}'s repository "
                f"({values.repo}); this lock is for another fork"
            )
        if isinstance(branch, str) and values.ref is not None and values.ref != branch:
            raise ConfigError(
                f"{lock}: lock.{branch_key}: {branch!r}, but pins.{pin} follows {values.ref!r}; "
                "the lock froze another branch"
            )
