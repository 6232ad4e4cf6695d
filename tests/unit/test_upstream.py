"""twinbuild.pins.upstream: a bumped commit must be on the upstream default branch (local clones)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.gitrepos import commit_file, git, init, isolate_git, needs_git
from twinbuild.errors import ConfigError, UpstreamRefused
from twinbuild.pins.upstream import check_commit, local_path

pytestmark = [pytest.mark.git, needs_git]


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    origin: Path  # the upstream's own repository (main checked out)
    clone: Path  # a clone: default branch via origin/HEAD
    mirror: Path  # a bare mirror: default branch via HEAD
    first: str
    feature: str  # a PR commit, merged into main by `merge`
    merge: str
    side: str  # only on an unmerged side branch


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Upstream:
    isolate_git(monkeypatch, tmp_path / "home")
    origin = init(tmp_path / "origin")
    first = commit_file(origin, "README", "one\n", "first")
    git(origin, "checkout", "-q", "-b", "feature")
    feature = commit_file(origin, "fix.txt", "fix\n", "VMM granularity fix")
    git(origin, "checkout", "-q", "main")
    git(origin, "merge", "-q", "--no-ff", "-m", "Merge pull request #82 from fork/fix", "feature")
    merge = git(origin, "rev-parse", "HEAD")
    git(origin, "checkout", "-q", "-b", "side")
    side = commit_file(origin, "side.txt", "side\n", "experiment")
    git(origin, "checkout", "-q", "main")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    git(clone, "fetch", "-q", "origin", "side:refs/remotes/origin/side")
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(origin), str(mirror))
    return Upstream(
        origin=origin, clone=clone, mirror=mirror, first=first, feature=feature, merge=merge,
        side=side,
    )  # fmt: skip


def test_merge_commit_on_default_branch_is_the_recommended_bump(upstream: Upstream) -> None:
    checked = check_commit(str(upstream.clone), upstream.merge, pin="tms")
    assert checked.default_branch == "main"
    assert checked.is_merge
    assert checked.parents == (upstream.first, upstream.feature)
    assert checked.describe() == (
        f"{upstream.merge[:12]} is on main: merge commit of {upstream.first[:12]}, "
        f"{upstream.feature[:12]} (Merge pull request #82 from fork/fix); "
        "the recommended minimal bump"
    )


def test_pr_commit_on_default_branch_names_its_merge(upstream: Upstream) -> None:
    checked = check_commit(str(upstream.clone), upstream.feature, pin="tms")
    assert not checked.is_merge
    assert checked.merged_by == upstream.merge
    assert checked.describe() == (
        f"{upstream.feature[:12]} is on main: a single commit (VMM granularity fix); "
        f"the merge commit that brought it in is {upstream.merge}, prefer pinning that"
    )


def test_side_branch_commit_is_refused_naming_the_default_branch(upstream: Upstream) -> None:
    with pytest.raises(UpstreamRefused) as caught:
        check_commit(str(upstream.clone), upstream.side, pin="tms")
    assert str(caught.value) == (
        f"pins.tms: commit {upstream.side} is not on {upstream.clone}'s default branch main "
        "(a side branch or an unmerged PR); pin the merge commit on main"
    )
    assert caught.value.exit_code == 8


def test_commit_missing_upstream_is_refused(upstream: Upstream) -> None:
    fork_only = "ab" * 20
    with pytest.raises(UpstreamRefused) as caught:
        check_commit(str(upstream.clone), fork_only, pin="tms")
    assert str(caught.value) == (
        f"pins.tms: commit {fork_only} is not in {upstream.clone} (a fork, or a clone that needs "
        "git fetch); pin a commit on main"
    )


def test_bare_mirror_and_file_url(upstream: Upstream) -> None:
    checked = check_commit(f"file://{upstream.mirror}", upstream.merge, pin="tms")
    assert checked.default_branch == "main"
    with pytest.raises(UpstreamRefused):
        check_commit(f"file://{upstream.mirror}", upstream.side, pin="tms")


def test_upstream_own_repository_uses_its_head(upstream: Upstream) -> None:
    assert check_commit(str(upstream.origin), upstream.merge, pin="tms").default_branch == "main"


def test_network_urls_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        local_path("https://github.com/fzyzcjy/torch_memory_saver")
    assert str(caught.value) == (
        "--upstream https://github.com/fzyzcjy/torch_memory_saver: only a local clone or mirror "
        "is read (a path or file:// URL); clone it first, e.g. git clone --mirror URL "
        "/tmp/upstream.git"
    )
    assert local_path("file:///srv/mirror.git") == Path("/srv/mirror.git")


def test_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ConfigError) as caught:
        check_commit(str(plain), "ab" * 20, pin="tms")
    assert str(caught.value) == (
        f"--upstream {plain}: not a git repository; pass a clone or mirror"
    )
