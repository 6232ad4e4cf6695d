"""The gate's view of the PR head (read from git objects) hashes exactly as the build does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fake_engine import FakeEngine
from tests.helpers import MINI_VARIANTS, edit, image, mini_project
from tests.unit.gate_repos import copy_builder_code
from tests.unit.gitrepos import git, isolate_git, needs_git
from twinbuild.builder.build_options import BuildOptions
from twinbuild.builder.image import plan_image
from twinbuild.evidence.head import commit_inputs
from twinbuild.manifest.loader import load

MANIFEST = Path("pins/manifest.toml")


@needs_git
def test_head_inputs_equal_the_build_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path / "home")
    root = mini_project(tmp_path)
    copy_builder_code(root)  # the builder code is an input: both sides must hash the same bytes
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "mini")
    head = git(root, "rev-parse", "HEAD")
    # The working tree moves on; the gate must see the commit, not the checkout.
    edit(root / MANIFEST, 'version = "0.65.1"', 'version = "0.66.0"')
    monkeypatch.chdir(root)
    found = commit_inputs(head)
    hashes, digest = found.inputs, found.manifest_digest

    git(root, "checkout", "-q", "--", ".")
    manifest = load(root / MANIFEST)
    options = BuildOptions(root=root, profile="production")
    engine = FakeEngine()
    for platform in MINI_VARIANTS:
        expected = plan_image(
            manifest, engine, image(platform), options, lambda _: None
        ).inputs_hash
        assert hashes[image(platform)] == expected
    assert engine.calls == []  # the production profile hashes without asking the engine
    assert digest == manifest.digest()
