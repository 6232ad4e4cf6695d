"""``twinbuild plan``: which images a change affects, and which input says so.

An image is fed by its platform's slice of the manifest (``platform_digest``, both profiles) and,
deny by default, by every other file but docs/, tests/, evidence/, README.md and the other
platform's ``images/<other>/`` (``input_paths.platforms_fed_by``: the rule the inputs hash uses).
A change to the docs or the tests builds nothing. When the change cannot be computed (no git,
unknown or shallow base) the plan builds everything and says why: a missed rebuild is worse than
a spare one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from twinbuild.builder.input_paths import platforms_fed_by
from twinbuild.errors import ConfigError
from twinbuild.manifest.loader import load, load_bytes
from twinbuild.manifest.model import DEFAULT_PATH, PLATFORMS, Manifest, Platform
from twinbuild.pins.diff import bytes_at, compare
from twinbuild.util import github
from twinbuild.util.git import rev_arg, run_git

DEFAULT_REMOTE_BRANCH = "origin/main"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    base: str | None  # what the working tree was compared with
    base_note: str  # how the base was chosen
    reasons: dict[Platform, list[str]] = field(default_factory=dict)
    fallback: str | None = None  # set when everything is planned because the diff failed

    def builds(self, platform: Platform) -> bool:
        return self.fallback is not None or bool(self.reasons.get(platform))

    @property
    def any(self) -> bool:
        return any(self.builds(p) for p in PLATFORMS)

    def reason_lines(self) -> list[str]:
        if self.fallback is not None:
            return [f"{p}: {self.fallback}" for p in PLATFORMS]
        return [f"{p}: {why}" for p in PLATFORMS for why in self.reasons.get(p, [])]

    def text(self) -> str:
        if self.fallback is not None:
            out = [f"plan: build everything ({self.fallback})"]
        else:
            out = [f"plan: changes since {self.base} ({self.base_note})"]
        for platform in PLATFORMS:
            if not self.builds(platform):
                out.append(f"{platform}: skip (no image input changed)")
                continue
            out.append(f"{platform}: build")
            out += [f"  {why}" for why in self.reasons.get(platform, [])]
        return "\n".join(out) + "\n"

    def outputs(self) -> dict[str, str]:
        """The step outputs: ``cuda``, ``rocm`` and ``any`` (true/false), and the reasons."""
        values: dict[str, str] = {p: str(self.builds(p)).lower() for p in PLATFORMS}
        values["any"] = str(self.any).lower()
        values["reasons"] = "\n".join(self.reason_lines())
        return values


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanOptions:
    """What ``twinbuild plan`` was asked for."""

    manifest: Path = DEFAULT_PATH
    root: Path = Path()
    base: str | None = None  # None: merge-base with origin/main, else HEAD~1
    github_output: bool = False  # append the plan to $GITHUB_OUTPUT


def plan_change(options: PlanOptions) -> Plan:
    """The plan for the working tree under ``options.root``; written as step outputs if asked."""
    result = plan(options.root, options.base, manifest=options.manifest)
    if options.github_output:
        github.write_outputs(result.outputs(), who="plan")
    return result


def plan(root: Path = Path(), base: str | None = None, *, manifest: Path = DEFAULT_PATH) -> Plan:
    """Compare ``base`` (default: merge-base with origin/main, else HEAD~1) with the worktree."""
    if base is not None:
        rev_arg(base, option="--base")
    if run_git(root, "rev-parse", "--is-inside-work-tree").returncode != 0:
        return _everything(base, f"{root} is not a git repository")
    manifest = _in_repository(root, manifest)
    base, note = _choose_base(root, base)
    if run_git(root, "rev-parse", "--verify", "-q", f"{base}^{{commit}}").returncode != 0:
        shallow = run_git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        why = (
            f"cannot resolve base '{base}' in a shallow clone; fetch full history "
            "(actions/checkout fetch-depth: 0)"
            if shallow
            else f"unknown base revision '{base}'"
        )
        return _everything(base, why)
    changed = _changed_files(root, base)
    if changed is None:
        return _everything(base, f"git diff {base} failed")
    reasons: dict[Platform, list[str]] = {p: [] for p in PLATFORMS}
    for path in changed:
        if path == manifest.as_posix():
            for platform, why in _manifest_reasons(root, base, manifest):
                reasons[platform].append(why)
            continue
        for platform in platforms_fed_by(path):
            reasons[platform].append(f"{path} changed")
    return Plan(base=base, base_note=note, reasons={p: r for p, r in reasons.items() if r})


def _everything(base: str | None, why: str) -> Plan:
    return Plan(base=base, base_note="", fallback=why)


def _choose_base(root: Path, base: str | None) -> tuple[str, str]:
    if base is not None:
        return base, "--base"
    if run_git(root, "rev-parse", "--verify", "-q", DEFAULT_REMOTE_BRANCH).returncode == 0:
        merge_base = run_git(root, "merge-base", "HEAD", DEFAULT_REMOTE_BRANCH)
        if merge_base.returncode == 0 and merge_base.stdout.strip():
            return merge_base.stdout.strip(), f"merge-base with {DEFAULT_REMOTE_BRANCH}"
    return "HEAD~1", f"no {DEFAULT_REMOTE_BRANCH} to compare with"


def _changed_files(root: Path, base: str) -> list[str] | None:
    tracked = run_git(root, "diff", "--name-only", "--no-renames", "--relative", base, "--")
    untracked = run_git(root, "ls-files", "--others", "--exclude-standard")
    if tracked.returncode != 0 or untracked.returncode != 0:
        return None
    return sorted({*tracked.stdout.splitlines(), *untracked.stdout.splitlines()} - {""})


def _in_repository(root: Path, manifest: Path) -> Path:
    """The manifest as git names it (relative to ``root``): an absolute path compared with git's
    relative names would never match, and a manifest change would plan nothing."""
    if not manifest.is_absolute():
        return manifest
    try:
        return manifest.resolve().relative_to(root.resolve())
    except ValueError:
        raise ConfigError(
            f"--manifest {manifest}: not inside the repository {root.resolve()}; "
            "plan compares revisions of a tracked manifest"
        ) from None


def _manifest_reasons(root: Path, base: str, manifest: Path) -> list[tuple[Platform, str]]:
    """Which platforms' slices of the manifest moved, naming the pins and settings that did."""
    where = f"{manifest}"
    old_data = bytes_at(base, manifest, repo=root)
    if old_data is None:
        return [(p, f"{where} is new since {base}") for p in PLATFORMS]
    try:
        old = load_bytes(old_data, Path(f"{base}:{manifest}"))
    except ConfigError:
        return [(p, f"{where} does not load at {base}") for p in PLATFORMS]
    try:
        new: Manifest = load(root / manifest)
    except ConfigError as exc:
        first = str(exc).split("\n", 1)[0]
        return [(p, f"{where} does not load ({first})") for p in PLATFORMS]
    diff = compare(old, new)
    out: list[tuple[Platform, str]] = []
    for platform, profiles in diff.rebuild.items():
        items = [f"pins.{c.name} {c.status}" for c in diff.pins if platform in c.values]
        items += [
            s.key for s in diff.settings if s.key.startswith((f"platforms.{platform}.", "local."))
        ]
        what = ", ".join(items) or "slice changed"
        out.append((platform, f"{where} ({', '.join(profiles)}): {what}"))
    return out
