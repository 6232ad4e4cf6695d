"""A git pin's branch or tag, resolved to the commit it names now, where its source answers.

``git ls-remote`` (through the one git runner: no prompt, bounded) of the pin's repository; a
tag is peeled to its commit. A source that does not answer (GitHub is out of reach here) is no
error: the lock entry stays unresolved and says what to run where the source can be reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from twinbuild.errors import ConfigError
from twinbuild.util.git import OID_RE, rev_arg, run_git


@dataclass(frozen=True, slots=True, kw_only=True)
class RefAnswer:
    commit: str  # "" when the source did not answer or has no such ref
    why: str = ""  # what went wrong, when it did


def resolve_ref(repo: str, ref: str) -> RefAnswer:
    """The commit ``ref`` (a branch or tag) names in ``repo`` now."""
    rev_arg(ref, option=f"ref of {repo}")
    if repo.startswith("-"):
        return RefAnswer(commit="", why=f"{repo!r} is not a repository address")
    try:
        proc = run_git(Path(), "ls-remote", "--", repo, f"refs/heads/{ref}", f"refs/tags/{ref}",
                       f"refs/tags/{ref}^{{}}")  # fmt: skip
    except ConfigError as exc:
        return RefAnswer(commit="", why=str(exc))
    if proc.returncode != 0:
        said = " ".join(proc.stderr.split())[:200] or f"git ls-remote exited {proc.returncode}"
        return RefAnswer(commit="", why=said)
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        words = line.split("\t")
        if len(words) == 2 and OID_RE.fullmatch(words[0]):
            found[words[1]] = words[0]
    for name in (f"refs/tags/{ref}^{{}}", f"refs/heads/{ref}", f"refs/tags/{ref}"):
        if name in found:
            return RefAnswer(commit=found[name])
    return RefAnswer(commit="", why=f"{repo} has no branch or tag {ref!r}")
