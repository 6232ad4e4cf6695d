"""The inputs hash decides "up to date": every input must move it, and nothing else may.

A hash that ignored an input would let a stale image pass as current (the wrong image ships); a
hash that moved on a README edit would rebuild for nothing. Each input gets its own test, on the
repository's real recipes and manifest, and the value itself is checked against a second
implementation written from the format's description (tests/unit/inputs_reference.py), which
finds the copied files with a plain regex instead of the recipe scanner.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from tests.helpers import edit, image, mini_project, repo_image
from tests.unit.gitrepos import commit_all, init, isolate_git, needs_git
from tests.unit.inputs_reference import NOT_INPUTS as REFERENCE_NOT_INPUTS
from tests.unit.inputs_reference import copied_by_regex, every_input, reference
from twinbuild.builder.inputs import builder_settings, image_inputs, input_files, inputs_hash
from twinbuild.errors import ConfigError
from twinbuild.inputs_rule import NOT_INPUTS, is_input
from twinbuild.manifest.loader import load
from twinbuild.manifest.model import PinManifest, Profile
from twinbuild.manifest.rendered import Rendered, recipe_path, render
from twinbuild.util.repo_tree import CommitTree

REPO = Path(__file__).resolve().parents[2]
MANIFEST = Path("pins/manifest.toml")
BASE_ID = "sha256:" + "a" * 64
CASES: list[tuple[Profile, str]] = [
    ("production", "cuda"),
    ("production", "rocm"),
    ("local", "cuda"),
    ("local", "rocm"),
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of the repository's pins/ and images/, plus files that are not inputs."""
    root = tmp_path / "repo"
    for part in ("pins", "images", "twinbuild"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    (root / "README.md").write_text("# readme\n")
    (root / "docs").mkdir()
    (root / "docs/building.md").write_text("# building\n")
    (root / "tests").mkdir()
    (root / "tests/test_x.py").write_text("def test_x() -> None: ...\n")
    return root


def _hash(
    root: Path,
    platform: str,
    profile: Profile = "production",
    *,
    base_id: str = BASE_ID,
) -> str:
    manifest = load(root / MANIFEST)
    # the mini project names its variants after their recipes; the repository's do not
    key = image(platform) if platform in manifest.variants else repo_image(platform)
    rendered = render(manifest, key, profile)
    return inputs_hash(root, rendered, base_id=base_id, builder=builder_settings(rendered))


@pytest.mark.parametrize(("profile", "platform"), CASES)
def test_the_hash_is_the_documented_format(repo: Path, profile: Profile, platform: str) -> None:
    rendered = render(load(repo / MANIFEST), repo_image(platform), profile)
    builder = builder_settings(rendered)
    expected = reference(repo, rendered, BASE_ID, builder)
    assert inputs_hash(repo, rendered, base_id=BASE_ID, builder=builder) == expected


@pytest.mark.parametrize(("profile", "platform"), CASES)
def test_input_files_are_the_recipe_and_what_it_copies(
    repo: Path, profile: Profile, platform: str
) -> None:
    rendered = render(load(repo / MANIFEST), repo_image(platform), profile)
    files = {e.path for e in input_files(repo, recipe_path(platform, profile), profile)}
    assert files == copied_by_regex(repo, repo / rendered.recipe)


def test_the_production_recipes_copy_the_common_scripts(repo: Path) -> None:
    """Guards the regex reference above: it must see the bind-mounted scripts, not only recipes."""
    files = {e.path for e in input_files(repo, recipe_path("cuda", "production"), "production")}
    assert {"images/cuda/Dockerfile", "images/common/checkout.sh"} <= files
    assert "images/rocm/Dockerfile" not in files


@pytest.mark.parametrize(("profile", "platform"), CASES)
def test_each_file_of_the_image_moves_its_hash(repo: Path, profile: Profile, platform: str) -> None:
    before = _hash(repo, platform, profile)
    files = input_files(repo, recipe_path(platform, profile), profile)
    assert files  # at least the recipe
    for entry in files:
        rel = entry.path
        path = repo / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n# changed\n")
        try:
            assert _hash(repo, platform, profile) != before, f"{rel} is not hashed"
        finally:
            path.write_bytes(original)
    assert _hash(repo, platform, profile) == before


def test_the_other_platforms_recipe_is_not_an_input(repo: Path) -> None:
    before = _hash(repo, "cuda")
    with (repo / "images/rocm/Dockerfile").open("a") as fh:
        fh.write("# rocm only\n")
    assert _hash(repo, "cuda") == before
    assert _hash(repo, "rocm") != _hash(repo, "cuda")


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_readme_docs_tests_and_manifest_comments_are_not_inputs(repo: Path, platform: str) -> None:
    before = _hash(repo, platform)
    (repo / "README.md").write_text("# another readme\n")
    (repo / "docs/building.md").write_text("# another page\n")
    (repo / "tests/test_x.py").write_text("def test_y() -> None: ...\n")
    text = (repo / MANIFEST).read_text()
    (repo / MANIFEST).write_text("# a comment moves no image\n" + text)
    assert _hash(repo, platform) == before


def test_a_file_no_recipe_copies_is_still_an_input(repo: Path) -> None:
    """Deny by default: the build's code may read it, so it counts unless the list says not."""
    before = {p: _hash(repo, p) for p in ("cuda", "rocm")}
    (repo / "images/NOTES.md").write_text("not copied by any recipe\n")
    assert all(_hash(repo, p) != before[p] for p in ("cuda", "rocm"))


def _pin_for(manifest: PinManifest, *, platforms: tuple[str, ...], install: str) -> str:
    """The first pin on exactly the variants of these groups (or variants), installed this way,
    with a version."""
    variants = tuple(v for g in platforms for v in manifest.members(g))
    resolved = {r.name: r for r in manifest.resolve(manifest.images((variants[0],))[0])}
    for pin in manifest.pins.values():
        if pin.name not in resolved:
            continue
        same = tuple(pin.variants) == variants and resolved[pin.name].install == install
        if same and pin.common.version is not None and not pin.overrides:
            return pin.name
    raise AssertionError(f"no {install} pin on {platforms} with a version in the manifest")


def _bump_version(root: Path, name: str) -> None:
    manifest = load(root / MANIFEST)
    old = manifest.pins[name].common.version
    assert old is not None
    line = manifest.line_of("pins", name, "version")
    lines = (root / MANIFEST).read_text().splitlines(keepends=True)
    assert f'"{old}"' in lines[line - 1], (name, line, lines[line - 1])
    lines[line - 1] = lines[line - 1].replace(f'"{old}"', f'"{old}.post99"')
    (root / MANIFEST).write_text("".join(lines))


@pytest.mark.parametrize(("only", "other"), [("cuda", "rocm"), ("rocm", "cuda")])
def test_a_pin_of_one_platform_moves_that_platform_only(repo: Path, only: str, other: str) -> None:
    name = _pin_for(load(repo / MANIFEST), platforms=(only,), install="pip")
    before = {p: _hash(repo, p) for p in ("cuda", "rocm")}
    _bump_version(repo, name)
    assert _hash(repo, only) != before[only], f"{only}-only pin {name} did not move {only}"
    assert _hash(repo, other) == before[other], f"{only}-only pin {name} moved {other}"


def test_a_generated_pip_file_is_an_input(repo: Path) -> None:
    """A pip pin reaches the build only through .twinbuild/pip/<layer>.txt."""
    name = _pin_for(load(repo / MANIFEST), platforms=("cuda", "rocm"), install="pip")
    before = _hash(repo, "cuda")
    _bump_version(repo, name)
    after = render(load(repo / MANIFEST), repo_image("cuda"), "production")
    assert after.args == render(load(repo / MANIFEST), repo_image("cuda"), "production").args
    assert _hash(repo, "cuda") != before


def _rendered(profile: Profile = "production") -> tuple[Path, Rendered]:
    return REPO, render(load(REPO / MANIFEST), repo_image("cuda"), profile)


def _direct(rendered: Rendered, **kw: object) -> str:
    base_id = str(kw.pop("base_id", BASE_ID))
    builder = kw.pop("builder", builder_settings(rendered))
    changed = dataclasses.replace(rendered, **kw)  # type: ignore[arg-type]
    return inputs_hash(REPO, changed, base_id=base_id, builder=builder)  # type: ignore[arg-type]


def test_each_generated_file_moves_the_hash() -> None:
    _, rendered = _rendered()
    before = _direct(rendered)
    assert len(rendered.files) > 1
    for name in rendered.files:
        files = {**rendered.files, name: rendered.files[name] + "extra==1\n"}
        assert _direct(rendered, files=files) != before, name
        renamed = {(k + ".x" if k == name else k): v for k, v in rendered.files.items()}
        assert _direct(rendered, files=renamed) != before, f"{name}: its name is not hashed"


def test_each_build_arg_moves_the_hash() -> None:
    _, rendered = _rendered()
    before = _direct(rendered)
    assert "BASE_IMAGE" in rendered.args
    for key in rendered.args:
        args = {**rendered.args, key: rendered.args[key] + "0"}
        assert _direct(rendered, args=args) != before, key
    assert _direct(rendered, args={**rendered.args, "NEW_ARG": "1"}) != before


def test_a_checkout_pin_moves_the_hash_through_its_build_args(repo: Path) -> None:
    """megatron-lm is a checkout pin: a build arg, not a pip line."""
    before = _hash(repo, "cuda")
    manifest = load(repo / MANIFEST)
    pin = next(
        p
        for p in manifest.resolve(repo_image("cuda"))
        if p.install == "checkout" and p.values.commit
    )
    commit = pin.values.commit
    assert commit is not None
    text = (repo / MANIFEST).read_text()
    assert text.count(commit) >= 1
    (repo / MANIFEST).write_text(text.replace(commit, "f" * 40))
    assert _hash(repo, "cuda") != before


def test_the_base_digest_moves_the_hash(repo: Path) -> None:
    assert _hash(repo, "cuda", base_id="sha256:" + "b" * 64) != _hash(repo, "cuda")


def test_the_base_pin_in_the_manifest_moves_the_hash(repo: Path) -> None:
    """The production base ref (repository:tag@digest) is the BASE_IMAGE build arg."""
    before = _hash(repo, "rocm")
    digest = load(repo / MANIFEST).variants["rocm720-mi35x"].base.digest
    edit(repo / MANIFEST, digest, "sha256:" + "c" * 64)
    assert _hash(repo, "rocm") != before


def test_builder_settings_move_the_hash() -> None:
    _, rendered = _rendered()
    assert _direct(rendered, builder={"builder": "other", "target": ""}) != _direct(rendered)


def test_builder_settings_are_written_out() -> None:
    _, production = _rendered()
    assert builder_settings(production) == {"builder": "buildx", "target": ""}
    _, local = _rendered("local")
    assert builder_settings(local) == {"builder": "buildx", "target": "cuda"}


def test_profile_and_target_move_the_hash() -> None:
    _, rendered = _rendered()
    before = _direct(rendered)
    assert _direct(rendered, profile="local") != before
    assert _direct(rendered, target="cuda") != before


def test_the_same_inputs_give_the_same_hash_twice(repo: Path) -> None:
    assert _hash(repo, "rocm") == _hash(repo, "rocm")
    assert _hash(repo, "rocm") != _hash(repo, "cuda")


# -- which files a recipe copies --------------------------------------------------------------


def _mini_with(tmp_path: Path, lines: str) -> Path:
    root = mini_project(tmp_path)
    (root / "images/common/sub").mkdir(parents=True)
    (root / "images/common/a.sh").write_text("a\n")
    (root / "images/common/sub/b.sh").write_text("b\n")
    (root / "images/cuda/x.patch").write_text("x\n")
    (root / "images/cuda/y.patch").write_text("y\n")
    with (root / "images/cuda/Dockerfile").open("a") as fh:
        fh.write(lines)
    return root


def test_copied_folders_globs_and_files_are_listed(tmp_path: Path) -> None:
    root = _mini_with(
        tmp_path,
        "COPY images/common/ /opt/common/\n"
        "COPY images/cuda/*.patch /tmp/\n"
        "COPY --from=builder /x /y\n"
        "ADD https://example.org/f.tar /tmp/\n",
    )
    assert [e.path for e in input_files(root, recipe_path("cuda", "production"), "production")] == [
        "images/common/a.sh",
        "images/common/sub/b.sh",
        "images/cuda/Dockerfile",
        "images/cuda/x.patch",
        "images/cuda/y.patch",
    ]


def test_a_file_in_a_copied_folder_moves_the_hash(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY images/common/ /opt/common/\n")
    before = _hash(root, "cuda")
    (root / "images/common/sub/b.sh").write_text("b2\n")
    assert _hash(root, "cuda") != before
    (root / "images/common/sub/new.sh").write_text("new\n")
    assert len(input_files(root, recipe_path("cuda", "production"), "production")) == 4


def test_a_missing_copied_file_names_the_recipe_line(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY images/common/gone.sh /opt/\n")
    with pytest.raises(ConfigError) as info:
        input_files(root, recipe_path("cuda", "production"), "production")
    assert str(info.value) == (
        f"images/cuda/Dockerfile:10: copies images/common/gone.sh, which does not exist under "
        f"{root}"
    )


def test_a_glob_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY images/cuda/*.diff /tmp/\n")
    with pytest.raises(ConfigError, match=r"Dockerfile:10: copies images/cuda/\*\.diff"):
        input_files(root, recipe_path("cuda", "production"), "production")


def test_an_absolute_copy_source_is_the_repository_path(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY /images/common/a.sh /opt/\n")
    assert "images/common/a.sh" in {
        e.path for e in input_files(root, recipe_path("cuda", "production"), "production")
    }


def test_builder_settings_hash_in_key_order(repo: Path) -> None:
    """{"builder", "target"} is hashed as sorted JSON: the order a dict was built in must not
    move the hash (the gate rebuilds the dict to compare)."""
    rendered = render(load(repo / MANIFEST), repo_image("cuda"), "local")
    builder = builder_settings(rendered)
    assert list(builder) == ["builder", "target"]
    reordered = dict(reversed(builder.items()))
    got = inputs_hash(repo, rendered, base_id=BASE_ID, builder=reordered)
    assert got == reference(repo, rendered, BASE_ID, builder)


def test_every_file_of_the_package_is_an_input_of_both_images(repo: Path) -> None:
    """Deny by default: any installed file may decide image bytes (a helper every manifest read
    goes through, the package's __init__.py), so each moves both hashes; the old list of
    "builder code" left these out. Only the written-out list and another platform's folder don't."""
    assert tuple(NOT_INPUTS) == REFERENCE_NOT_INPUTS
    before = {p: _hash(repo, p) for p in ("cuda", "rocm")}
    for rel in ("twinbuild/smoke/runner.py", "twinbuild/lint/checks.py", "twinbuild/cli/main.py",
                "twinbuild/evidence/evidence_check.py", "twinbuild/__init__.py", "twinbuild/util/bounded.py",
                "twinbuild/manifest/rendered.py", "twinbuild/builder/image.py", "pyproject.toml"):  # fmt: skip
        path = repo / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n# changed\n")
        try:
            moved = {p: _hash(repo, p) for p in ("cuda", "rocm")}
            assert moved["cuda"] != before["cuda"], rel
            assert moved["rocm"] != before["rocm"], rel
        finally:
            path.write_bytes(original)
    for new in ("setup.py", "twinbuild-hook.pth", "twinbuild/_hook.pth"):
        (repo / new).write_text("import os\n")
        assert _hash(repo, "cuda") != before["cuda"], new
        (repo / new).unlink()
    assert {p: _hash(repo, p) for p in ("cuda", "rocm")} == before


def test_build_outputs_and_caches_are_not_inputs_of_a_working_tree(repo: Path) -> None:
    before = _hash(repo, "cuda")
    (repo / "twinbuild/builder/__pycache__").mkdir(exist_ok=True)
    (repo / "twinbuild/builder/__pycache__/x.pyc").write_bytes(b"\0")
    (repo / "build/production/cuda").mkdir(parents=True)
    (repo / "build/production/cuda/image.json").write_text("{}")
    (repo / ".twinbuild").mkdir()
    (repo / ".twinbuild/pins.txt").write_text("x==1\n")
    assert _hash(repo, "cuda") == before


def test_the_hashed_files_are_every_file_but_the_list(repo: Path) -> None:
    for platform in ("cuda", "rocm"):
        rendered = render(load(repo / MANIFEST), repo_image(platform), "production")
        found = {e.path for e in image_inputs(repo, rendered)}
        copied = copied_by_regex(repo, repo / rendered.recipe)
        own = rendered.image.name
        assert found == every_input(repo, platform, image=own) | copied
        assert all(is_input(p, platform, image=own) for p in found - copied)
        assert f"pins/lock/{own}.toml" in found  # its own lock, and no other image's
        assert not {p for p in found if p.startswith("pins/lock/")} - {f"pins/lock/{own}.toml"}


def test_a_local_image_hashes_its_local_lock_and_no_production_lock(repo: Path) -> None:
    """The local lock is the local image's input and no other image's: a lock change rebuilds
    exactly that local image (issue #38)."""
    manifest = load(repo / MANIFEST)
    local = render(manifest, repo_image("cuda"), "local")
    own = local.image.name
    found = {e.path for e in image_inputs(repo, local)}
    assert {p for p in found if p.startswith("pins/lock/")} == {f"pins/lock/local/{own}.toml"}
    production = render(manifest, repo_image("cuda"), "production")
    assert f"pins/lock/local/{own}.toml" not in {e.path for e in image_inputs(repo, production)}
    before = inputs_hash(repo, local, base_id="b", builder=builder_settings(local))
    lock = repo / f"pins/lock/local/{own}.toml"
    lock.write_text(lock.read_text() + "# moved\n")
    assert inputs_hash(repo, local, base_id="b", builder=builder_settings(local)) != before


def test_the_executable_bit_of_an_input_moves_the_hash(repo: Path) -> None:
    script = repo / "images/common/checkout.sh"
    before = _hash(repo, "cuda")
    script.chmod(script.stat().st_mode ^ 0o100)
    assert _hash(repo, "cuda") != before


@pytest.mark.parametrize(
    "where", [".gitattributes", "images/.gitattributes", "twinbuild/.gitattributes"]
)
def test_gitattributes_above_an_input_move_the_hash(repo: Path, where: str) -> None:
    before = _hash(repo, "cuda")
    (repo / where).write_text("*.sh text eol=crlf\n")
    assert _hash(repo, "cuda") != before
    rendered = render(load(repo / MANIFEST), repo_image("cuda"), "production")
    builder = builder_settings(rendered)
    assert inputs_hash(repo, rendered, base_id=BASE_ID, builder=builder) == reference(
        repo, rendered, BASE_ID, builder
    )


def test_gitattributes_elsewhere_are_not_inputs(repo: Path) -> None:
    before = _hash(repo, "cuda")
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs/.gitattributes").write_text("*.md text\n")
    assert _hash(repo, "cuda") == before


def test_url_sources_are_not_repository_files(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY https://example.org/f.tar /tmp/\n")
    assert [e.path for e in input_files(root, recipe_path("cuda", "production"), "production")] == [
        "images/cuda/Dockerfile"
    ]


def test_absolute_sources_are_repository_paths_globbed_or_not(tmp_path: Path) -> None:
    """Only the leading "/" goes: a folder whose name starts with another character stays."""
    root = _mini_with(tmp_path, "COPY /Xtra/*.sh /opt/\nCOPY /Xtra/one.txt /opt/\n")
    (root / "Xtra").mkdir()
    (root / "Xtra/a.sh").write_text("a\n")
    (root / "Xtra/one.txt").write_text("1\n")
    assert [e.path for e in input_files(root, recipe_path("cuda", "production"), "production")] == [
        "Xtra/a.sh",
        "Xtra/one.txt",
        "images/cuda/Dockerfile",
    ]


# -- the input rule, globs and trees: found by mutation testing ---------------------------------


@pytest.mark.parametrize(
    ("path", "platform", "expected"),
    [
        ("twinbuild/builder/image.py", "cuda", True),
        ("twinbuild/smoke/runner.py", "cuda", True),
        ("pyproject.toml", "rocm", True),
        ("setup.py", "rocm", True),
        ("README.md", "cuda", False),
        ("README.md.orig", "cuda", True),  # a file on the list: the exact name only
        ("docs/building.md", "cuda", False),
        ("docsx/building.md", "cuda", True),  # a folder on the list: only below it
        ("tests/unit/test_x.py", "cuda", False),
        ("evidence/keys/ci.pub", "cuda", False),
        (".github/workflows/validate.yml", "cuda", True),
        (".github/CODEOWNERS", "cuda", False),
        ("images/rocm/Dockerfile", "cuda", False),
        ("images/rocm/Dockerfile", "rocm", True),
        ("images/common/checkout.sh", "rocm", True),
    ],
)
def test_is_input(path: str, platform: str, expected: bool) -> None:
    assert is_input(path, platform, ("cuda", "rocm")) is expected


def test_a_symlink_among_the_inputs_or_attributes_is_refused(repo: Path) -> None:
    rule = "every file but docs/, tests/, tools/, evidence/, README.md and CODEOWNERS"
    link = repo / "twinbuild/builder/link.py"
    link.symlink_to("image.py")
    with pytest.raises(ConfigError) as info:
        _hash(repo, "cuda")
    assert str(info.value) == (
        f"{repo}:twinbuild/builder/link.py: a symlink (mode 120000) among the image inputs "
        f"({rule}); commit the file itself, the gate hashes only what the commit holds"
    )
    link.unlink()
    (repo / "attrs").write_text("* -text\n")
    (repo / ".gitattributes").symlink_to("attrs")
    with pytest.raises(ConfigError) as info:
        _hash(repo, "cuda")
    assert str(info.value) == (
        f"{repo}:.gitattributes: a symlink (mode 120000) among the image inputs ({rule}); "
        "commit the file itself, the gate hashes only what the commit holds"
    )


@needs_git
def test_a_commit_hashes_like_its_working_tree(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_git(monkeypatch, repo.parent / "home")
    init(repo)
    commit_all(repo, "all of it")
    for platform in ("cuda", "rocm"):
        rendered = render(load(repo / MANIFEST), repo_image(platform), "production")
        builder = builder_settings(rendered)
        commit = inputs_hash(CommitTree(repo, "HEAD"), rendered, base_id=BASE_ID, builder=builder)
        assert commit == inputs_hash(repo, rendered, base_id=BASE_ID, builder=builder)
        assert commit == reference(repo, rendered, BASE_ID, builder)


def test_a_glob_in_the_first_segment(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY *.txt /opt/\n")
    (root / "top.txt").write_text("t\n")
    assert [e.path for e in input_files(root, recipe_path("cuda", "production"), "production")] == [
        "images/cuda/Dockerfile",
        "top.txt",
    ]


def test_a_glob_in_a_middle_segment_skips_shallower_files(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY images/*/x.patch /tmp/\n")
    (root / "images/ALPHA.md").write_text("sorted before images/cuda/, one level up\n")
    assert [e.path for e in input_files(root, recipe_path("cuda", "production"), "production")] == [
        "images/cuda/Dockerfile",
        "images/cuda/x.patch",
    ]


def test_a_glob_that_names_folders_takes_everything_below(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY images/comm* /opt/\n")
    assert [e.path for e in input_files(root, recipe_path("cuda", "production"), "production")] == [
        "images/common/a.sh",
        "images/common/sub/b.sh",
        "images/cuda/Dockerfile",
    ]


def test_a_symlinked_recipe_is_refused(repo: Path) -> None:
    recipe = repo / "images/cuda/Dockerfile"
    (repo / "images/cuda/Dockerfile.real").write_bytes(recipe.read_bytes())
    recipe.unlink()
    recipe.symlink_to("Dockerfile.real")
    with pytest.raises(ConfigError) as info:
        _hash(repo, "cuda")
    assert str(info.value) == (
        f"{repo}:images/cuda/Dockerfile: a symlink (mode 120000) among the image inputs (the recipe "
        "images/cuda/Dockerfile); commit the file itself, the gate hashes only what the commit holds"
    )


def test_a_missing_recipe_names_the_profile(repo: Path) -> None:
    (repo / "images/cuda/Dockerfile").unlink()
    with pytest.raises(ConfigError) as info:
        input_files(repo, recipe_path("cuda", "production"), "production")
    assert (
        str(info.value)
        == f"{repo}: no images/cuda/Dockerfile; the production profile builds from it"
    )


@pytest.mark.parametrize("source", ["..", "../outside.txt", "images/../../outside.txt"])
def test_a_copy_from_outside_the_repository_is_refused(tmp_path: Path, source: str) -> None:
    root = _mini_with(tmp_path, f"COPY {source} /opt/\n")
    with pytest.raises(ConfigError) as info:
        input_files(root, recipe_path("cuda", "production"), "production")
    assert str(info.value) == (
        f"images/cuda/Dockerfile:10: copies {source}, outside the repository; copy from it"
    )


@needs_git
def test_copying_the_whole_context_takes_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _mini_with(tmp_path, "COPY . /src/\n")
    files = {e.path for e in input_files(root, recipe_path("cuda", "production"), "production")}
    assert {"pins/manifest.toml", "images/common/sub/b.sh", "images/rocm/Dockerfile"} <= files
    assert not any(p.startswith("./") for p in files)
    isolate_git(monkeypatch, tmp_path / "home")
    init(root)
    commit_all(root, "context")
    committed = {
        e.path
        for e in input_files(
            CommitTree(root, "HEAD"), recipe_path("cuda", "production"), "production"
        )
    }
    assert committed == files


def test_a_symlink_among_copied_files_names_the_copy(tmp_path: Path) -> None:
    root = _mini_with(tmp_path, "COPY images/common/ /opt/\n")
    (root / "images/common/link.sh").symlink_to("a.sh")
    with pytest.raises(ConfigError) as info:
        input_files(root, recipe_path("cuda", "production"), "production")
    assert str(info.value) == (
        f"{root}:images/common/link.sh: a symlink (mode 120000) among the image inputs (copied by "
        "images/cuda/Dockerfile:10); commit the file itself, the gate hashes only what the commit "
        "holds"
    )


def test_a_recipe_that_does_not_parse_is_named(tmp_path: Path) -> None:
    root = mini_project(tmp_path)
    (root / "images/cuda/Dockerfile").write_text("RUN echo before any FROM\n")
    with pytest.raises(ConfigError) as info:
        input_files(root, recipe_path("cuda", "production"), "production")
    assert str(info.value).startswith("images/cuda/Dockerfile:1: ")


def test_a_cache_that_cannot_be_written_costs_only_a_parse(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = repo.parent / "cache"
    cache.mkdir()
    (cache / "recipe-copies").write_text("a file where the folder would go\n")
    monkeypatch.setenv("TWINBUILD_CACHE", str(cache))
    rendered = render(load(repo / MANIFEST), repo_image("cuda"), "production")
    builder = builder_settings(rendered)
    assert inputs_hash(repo, rendered, base_id=BASE_ID, builder=builder) == reference(
        repo, rendered, BASE_ID, builder
    )


@needs_git
def test_an_unparsable_recipe_in_a_commit_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = mini_project(tmp_path)
    (root / "images/cuda/Dockerfile").write_text("RUN echo before any FROM\n")
    isolate_git(monkeypatch, tmp_path / "home")
    init(root)
    commit_all(root, "bad recipe")
    with pytest.raises(ConfigError) as info:
        input_files(CommitTree(root, "HEAD"), recipe_path("cuda", "production"), "production")
    assert str(info.value).startswith("images/cuda/Dockerfile:1: ")


@needs_git
def test_a_commit_is_parsed_afresh_and_remembers_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate judges a commit: no parse remembered on the runner may stand in for it."""
    cache = repo.parent / "gate-cache"
    monkeypatch.setenv("TWINBUILD_CACHE", str(cache))
    isolate_git(monkeypatch, repo.parent / "home")
    init(repo)
    commit_all(repo, "all of it")
    input_files(CommitTree(repo, "HEAD"), recipe_path("cuda", "production"), "production")
    assert not (cache / "recipe-copies").exists()
    input_files(repo, recipe_path("cuda", "production"), "production")
    assert len(list((cache / "recipe-copies").iterdir())) == 1
