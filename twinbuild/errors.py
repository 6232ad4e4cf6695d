"""One error family, one exit code per class.

The work raises; only ``twinbuild.cli.main`` catches and exits. Every message is one line that names
the file (and line or key) and says what to do.
"""

from __future__ import annotations


class TwinbuildError(Exception):
    """Root of every error twinbuild reports to a person (never a traceback)."""

    exit_code = 2


class ConfigError(TwinbuildError):
    """Unusable input: the manifest, a recipe, an argument, an evidence file that cannot be read."""

    exit_code = 2


class FindingsError(TwinbuildError):
    """A check ran and found problems (lint findings, smoke failures, gate refusals)."""

    exit_code = 1


class EngineError(TwinbuildError):
    """No Docker engine answers, or it went away mid-operation."""

    exit_code = 3


class BuildFailed(TwinbuildError):
    """A build step failed; the previous image for that tag is untouched."""

    exit_code = 4


class Interrupted(TwinbuildError):
    """SIGINT/SIGTERM stopped the work; nothing half-done was kept."""

    exit_code = 130


class LockBusy(TwinbuildError):
    """Another twinbuild process holds the lock for this image."""

    exit_code = 5


class DiskFull(TwinbuildError):
    """The disk filled up; partial outputs were removed."""

    exit_code = 6


class EvidenceRefused(TwinbuildError):
    """The evidence gate refused: the evidence cannot count for this PR."""

    exit_code = 7


class TrustRootRefused(TwinbuildError):
    """The gate refused: the PR changes a trust root (keys, workflows, CODEOWNERS, twinbuild's own
    code) without a code owner's approval of its exact head commit."""

    exit_code = 9


class UpstreamRefused(TwinbuildError):
    """A pin bump points at a commit that is not on the upstream default branch."""

    exit_code = 8


class LockInvalid(TwinbuildError):
    """A lock under pins/lock/ that does not parse, lacks a key, or was edited by hand."""

    exit_code = 20


class ResolutionFailed(TwinbuildError):
    """The resolver found no closure: a package or version the index does not have, or two
    requirements that conflict. The lock files are untouched."""

    exit_code = 21


class IndexUnreachable(TwinbuildError):
    """The package index did not answer, or stalled past the deadline, while locking."""

    exit_code = 22


class ResolverFailed(TwinbuildError):
    """The resolver (uv) was killed or ended without a result; the lock files are untouched."""

    exit_code = 23


class HashMismatch(TwinbuildError):
    """A downloaded file's sha256 is not one the lock holds for it: refused, nothing kept."""

    exit_code = 24


class CredentialsMissing(ConfigError):
    """A registry wants credentials that are not stored for it (`docker login` fixes it)."""

    exit_code = 2


class StdoutClosed(TwinbuildError):
    """Whatever read stdout went away (``twinbuild pins table | head -1``): end quietly, with the
    exit status of a process SIGPIPE ended, as ``head``'s other writers do."""

    exit_code = 141
