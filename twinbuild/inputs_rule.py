"""Which files of a tree are image inputs: every one, deny by default, except a short named list.

An allowlist of "the code that matters" is always one file short: a helper every manifest read goes
through, ``twinbuild/__init__.py``, a new ``setup.py`` or ``.pth`` file that ``pip install .`` runs.
So every file a commit holds is an input of every image, except:

- :data:`NOT_INPUTS`: paths no build installs or runs (documentation, the tests, the evidence, the
  README); a recipe that copies one of them makes that file an input again;
- another recipe family's folder ``images/<other>/``: the inputs of the variants built from it
  (the manifest refuses a family no gated variant builds, and the gate wants every gated
  image's evidence from one commit, so each file still counts in some gated image's hash);
- the pin manifest, which each image's hash covers through its own rendered slice;
- another image's lock, ``pins/lock/<other image>.toml`` (and its base capture,
  ``pins/lock/base/<other image>.toml``), and the local profile's ``pins/lock/local/<image>.toml``
  for any image but that local one: each image's own lock is its input, so a lock change
  rebuilds exactly the images whose closure moved.

This list is the judging side's code: the gate runs the base's twinbuild, so a PR that edits it
changes only what its own copy would say (and is itself an input change). It sits below the
builder, the plan and the gate (it imports nothing of twinbuild but its errors): ``twinbuild
build``'s up-to-date check and the gate both apply it through
:func:`twinbuild.builder.inputs.inputs_hash`, the trust roots and the packaging check read
:data:`NOT_INPUTS` from here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from twinbuild.errors import ConfigError

#: Paths that are not image inputs, and why no build installs or runs them. A folder ends in "/".
NOT_INPUTS: Mapping[str, str] = {
    "docs/": "documentation, read by people",
    "tests/": "the test suite: pytest runs it in CI; no build or install runs it",
    "tools/": "the benchmarks: `nox -s bench` runs them on a developer's machine; pip installs "
    "only twinbuild/, and no build, validation or release job runs them",
    "evidence/": "the signed evidence and the trusted keys: data the gate reads "
    "(the keys are trust roots, twinbuild/evidence/trust_roots.py)",
    "README.md": "the README: pip copies it into the package metadata as text; nothing runs it",
    ".github/CODEOWNERS": "who may approve a trust root: GitHub and the gate read it, no build",
    "CODEOWNERS": "the same, where GitHub looks next",
}
#: How messages name the rule.
RULE = "every file but docs/, tests/, tools/, evidence/, README.md and CODEOWNERS"
#: What twinbuild itself writes into a working tree (build records, wheels, smoke reports; the
#: generated build files, the bake file): never an input of the next build, tracked or not.
WORK_OUTPUTS = ("build/", ".twinbuild/", "docker-bake.json")


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix`` itself (a file) or lies below it (a folder, ending in /)."""
    return path.startswith(prefix) if prefix.endswith("/") else path == prefix


def recipe_folder(family: str) -> str:
    """The folder of a recipe family's production recipe: its variants' own inputs."""
    return f"images/{family}/"


#: Where the images' locks live (twinbuild/closure/lockfile.py): one file per image.
LOCKS = "pins/lock/"


def lock_owner(path: str) -> str | None:
    """The image whose lock (or base capture) ``path`` is, ``cu13-amd64`` (a local lock's:
    ``local/cu13-amd64``, :func:`lock_name`); None for another path."""
    if not path.startswith(LOCKS) or not path.endswith(".toml"):
        return None
    name = path[len(LOCKS) : -len(".toml")].removeprefix("base/")
    local = name.startswith("local/")
    name = name.removeprefix("local/")
    if "/" in name:
        return None
    return f"local/{name}" if local else name


def lock_name(image: str, profile: str) -> str:
    """How :func:`lock_owner` names the image ``image`` (``cu13-amd64``) of ``profile``."""
    return f"local/{image}" if profile == "local" else image


def is_input(
    path: str, family: str | None = None, families: Collection[str] = (), image: str | None = None
) -> bool:
    """Whether ``path`` is an image input (of a variant of recipe ``family``, when given; the
    folders of the other ``families`` are not its inputs; of ``image``, when given, whose own
    lock is its input and no other image's).

    The manifest is an input too, but through its rendered slice: :mod:`twinbuild.builder.inputs`
    leaves its file out of the file list.
    """
    if any(under(path, prefix) for prefix in NOT_INPUTS):
        return False
    owner = lock_owner(path)
    if image is not None and owner is not None and owner != image:
        return False
    if family is None:
        return True
    return not any(under(path, recipe_folder(f)) for f in families if f != family)


def families_fed_by(path: str, families: Collection[str]) -> tuple[str, ...]:
    """The recipe families whose variants' image inputs include ``path`` (``twinbuild plan``)."""
    return tuple(f for f in families if is_input(path, f, families))


def check_name(where: str, path: str) -> None:
    """Refuse a tree path no checkout would write: a name '..', '.', '' or '.git' in it.

    ``git mktree`` makes such trees; checkouts refuse them. Read by prefix, ``tests/../x`` would
    be under tests/, and so not an input, while git itself reads it as ``x``.
    """
    for name in path.split("/"):
        if name in ("", ".", "..") or name.casefold() == ".git":
            shown = repr(name) if name else "an empty name"
            raise ConfigError(
                f"{where}:{path}: a path git would not check out ({shown} as a name); no commit "
                "of a repository holds one, rewrite the history without it"
            )
