"""The OCI revision and source labels: from the Actions run, else from the checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import image, mini_project
from tests.unit.gitrepos import git, init, isolate_git, needs_git
from twinbuild.builder import provenance
from twinbuild.manifest.loader import ManifestError, load


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("git@github.com:acme/twinbuild.git", "https://github.com/acme/twinbuild"),
        ("https://github.com/acme/twinbuild.git", "https://github.com/acme/twinbuild"),
        ("https://token:x-oauth@github.com/acme/twinbuild", "https://github.com/acme/twinbuild"),
        ("ssh://git@gitlab.example.org:2222/team/tb.git", "https://gitlab.example.org/team/tb"),
        ("/srv/git/twinbuild.git", None),
        ("file:///srv/git/twinbuild.git", None),
        ("", None),
    ],
)
def test_web_url(remote: str, url: str | None) -> None:
    assert provenance.web_url(remote) == url


def test_in_actions_the_run_says(tmp_path: Path) -> None:
    env = {
        "GITHUB_ACTIONS": "true", "GITHUB_SHA": "a" * 40, "GITHUB_REPOSITORY": "acme/tb",
        "GITHUB_SERVER_URL": "https://github.com",
    }  # fmt: skip
    assert provenance.revision(tmp_path, env) == "a" * 40
    assert provenance.source(tmp_path, env) == "https://github.com/acme/tb"


@needs_git
def test_elsewhere_the_checkout_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    root = init(mini_project(tmp_path / "repo"))
    assert provenance.revision(root, {}) is None  # no commit yet: no label rather than a guess
    assert provenance.source(root, {}) is None  # no remote
    git(root, "add", "-A")
    git(root, "commit", "-qm", "first")
    git(root, "remote", "add", "origin", "git@github.com:acme/twinbuild.git")
    sub = root / "images"  # a build started from a subdirectory says the same
    assert provenance.revision(sub, {}) == git(root, "rev-parse", "HEAD")
    assert provenance.source(sub, {}) == "https://github.com/acme/twinbuild"


def test_outside_a_checkout_no_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert provenance.revision(tmp_path, {}) is None
    assert provenance.source(tmp_path, {}) is None


def _declaring(tmp_path: Path, value: str | None) -> Path:
    """The mini project's manifest, with a top-level ``source = value`` unless None."""
    manifest = mini_project(tmp_path) / "pins/manifest.toml"
    if value is not None:
        manifest.write_text(f'source = "{value}"\n' + manifest.read_text())
    return manifest


def test_the_manifests_source_wins(tmp_path: Path) -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "fork/tb"}
    declared = "https://github.com/acme/twinbuild"
    assert provenance.source(tmp_path, env, declared=declared) == declared
    assert provenance.source(tmp_path, env) == "https://github.com/fork/tb"


@pytest.mark.parametrize(
    "value",
    ["https://github.com/acme/twinbuild", "https://git.example.org:8443/team/tb", None],
)
def test_a_manifest_source_is_read(tmp_path: Path, value: str | None) -> None:
    assert load(_declaring(tmp_path, value)).source == value


@pytest.mark.parametrize(
    "value",
    [
        "http://github.com/acme/twinbuild",
        "https://user:token@github.com/acme/twinbuild",
        "git@github.com:acme/twinbuild.git",
        "https://github.com/acme/twin build",
        "https://github.com/acme/tb?x=1",
        "https://github.com",
    ],
)
def test_a_bad_manifest_source_is_one_line_naming_it(tmp_path: Path, value: str) -> None:
    manifest = _declaring(tmp_path, value)
    with pytest.raises(ManifestError) as info:
        load(manifest)
    assert str(info.value) == (
        f"{manifest}:1: source: {value!r} is not a repository's web address; write it as "
        "'https://github.com/OWNER/NAME' (https, no credentials), or leave source out to take it "
        "from the git remote"
    )


def test_the_build_labels_the_manifests_source(tmp_path: Path) -> None:
    from twinbuild.builder.build_record import BaseRef
    from twinbuild.builder.labels import image_labels

    manifest = _declaring(tmp_path, "https://github.com/acme/twinbuild")
    root = manifest.parent.parent
    made = {"profile": "local", "inputs_hash": "sha256:" + "0" * 64, "left_out": ()}
    base = BaseRef(id="i", ref="r")
    labels = image_labels(load(manifest), image("cuda"), base=base, root=root, **made)  # type: ignore[arg-type]
    assert labels["org.opencontainers.image.source"] == "https://github.com/acme/twinbuild"
    given = "https://example.org/x/y"  # the option still wins
    labels = image_labels(
        load(manifest),
        image("rocm"),
        base=base,
        root=root,
        source=given,
        **made,  # type: ignore[arg-type]
    )
    assert labels["org.opencontainers.image.source"] == "https://example.org/x/y"
