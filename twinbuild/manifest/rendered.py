"""What one build of one image receives: build args and generated files, from the manifest alone.

Recipes carry no version, commit, branch, base tag or build setting. They read:
- ``BASE_IMAGE`` and ``<PIN>_<FIELD>`` build args (checkout, file and apt pins);
- in production, ``GPU_ARCHS`` (the variant's GPU targets, ';'-separated) and the recipe settings
  of ``[build_args]`` and the variant's own ``build_args`` (compile jobs, ``*_FORCE_BUILD``
  switches, how Megatron-LM and the collective tests are checked out and installed);
- ``.twinbuild/pip/<layer>.txt`` requirement files in the build context (pip pins), one per layer,
  so a pin that moves often can live in a late layer and invalidate only what follows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from twinbuild.errors import ConfigError
from twinbuild.manifest.model import Arch, ImageKey, PinManifest, Profile, ResolvedPin

GENERATED = ".twinbuild"
#: The local profile's one recipe: a stage per recipe family (``cuda``, ``rocm``).
LOCAL_RECIPE = Path("images/local/Dockerfile")
#: BASE_IMAGE where the base's tag cannot be known here (no mmdebstrap to ask its version).
UNKNOWN_BASE = "twinbuild/base:<unknown>"
#: Where the local profile finds git mirrors and wheels inside the image during the build.
CONTEXT_IN_IMAGE = "/twinbuild"


def recipe_path(recipe: str, profile: Profile) -> Path:
    """The recipe a variant of recipe family ``recipe`` builds from in ``profile``."""
    return LOCAL_RECIPE if profile == "local" else Path(f"images/{recipe}/Dockerfile")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    image: ImageKey
    profile: Profile
    recipe: Path
    target: str | None
    family: str  # the variant's recipe family: images/<family>/ is its own recipe folder
    families: tuple[str, ...]  # every family the manifest's variants build from
    args: dict[str, str]
    files: dict[str, str]
    installed: list[ResolvedPin]
    skipped: list[tuple[ResolvedPin, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what render could not know, and why
    #: Why a production build of this image cannot run yet (a base or download not pinned),
    #: each saying what to run; `twinbuild build` refuses while there is one.
    blockers: list[str] = field(default_factory=list)

    @property
    def variant(self) -> str:
        return self.image.variant

    @property
    def arch(self) -> Arch:
        return self.image.arch

    def to_dict(self) -> dict[str, object]:
        """``twinbuild render --format json``: the same, as one JSON object."""
        return {
            "variant": self.variant, "arch": self.arch, "profile": self.profile,
            "recipe": str(self.recipe),
            "target": self.target, "args": dict(sorted(self.args.items())),
            "files": dict(sorted(self.files.items())), "notes": list(self.notes),
            "installed": [pin.name for pin in self.installed],
            "skipped": [{"pin": pin.name, "reason": reason} for pin, reason in self.skipped],
        }  # fmt: skip

    def text(self) -> str:
        """Exactly what the build receives, for ``twinbuild render``."""
        out = [
            f"# twinbuild render {self.variant} --arch {self.arch} --profile {self.profile}",
            f"recipe: {self.recipe}",
            f"platform: {self.arch}",
        ]
        if self.target:
            out.append(f"target: {self.target}")
        out += [f"# not buildable yet: {b}" for b in self.blockers]
        out.append("build args:")
        out += [f"# {note}" for note in self.notes]
        out += [f"  {k}={v}" for k, v in sorted(self.args.items())]
        for name, body in sorted(self.files.items()):
            out.append(f"file {name}:")
            out += [f"  {line}" for line in body.splitlines()] or ["  (empty)"]
        for pin, reason in self.skipped:
            out.append(f"not in {self.profile} profile: {pin.name} ({reason})")
        return "\n".join(out) + "\n"


def pin_args(pin: ResolvedPin) -> dict[str, str]:
    """Build args of a pin that a recipe consumes by ARG (checkout, file and apt pins)."""
    prefix = pin.arg_prefix()
    values = {
        "REPO": pin.values.repo,
        "COMMIT": pin.values.commit,
        "REF": pin.values.ref,
        "URL": pin.values.url,
        "SHA256": pin.values.sha256,
        "VERSION": pin.values.version,
        "PACKAGE": pin.values.package if pin.kind == "apt" else None,
    }
    return {f"{prefix}_{k}": v for k, v in values.items() if v is not None}


def requirement(pin: ResolvedPin, *, mirror: str | None = None) -> str:
    """One pip requirement line for a pip-installed pin."""
    name = pin.values.dist or pin.name
    if pin.kind == "git":
        url = f"git+{mirror or pin.values.repo}@{pin.values.commit or pin.values.ref}"
        if mirror is not None:
            # The URL form, not PEP 508: the pip of Debian bookworm (23.0) rejects
            # 'name @ git+file:///...' (no host), and it is the pip that installs local images.
            fragment = f"#egg={name}"
            if pin.values.subdirectory:
                fragment += f"&subdirectory={pin.values.subdirectory}"
            return url + fragment
        if pin.values.subdirectory:
            url += f"#subdirectory={pin.values.subdirectory}"
        return f"{name} @ {url}"
    if pin.kind == "url":
        return f"{name} @ {pin.values.url}#sha256={pin.values.sha256}"
    if pin.values.version is not None:
        return f"{name}=={pin.values.version}"
    return f"{name}{pin.values.range or ''}"


def check_mirrors(manifest: PinManifest, mirrors: Mapping[str, str]) -> None:
    """Every ``--mirror PIN=PATH`` names a git pin of the manifest: a misspelt name would be
    ignored, and the pin it meant silently left out of the local build."""
    git = sorted(
        {pin.name for i in manifest.images() for pin in manifest.resolve(i) if pin.kind == "git"}
    )
    for name, path in mirrors.items():
        if name not in git:
            raise ConfigError(
                f"--mirror {name}={path}: no git pin named {name!r} in {manifest.path}; "
                f"git pins: {', '.join(git) or 'none'}"
            )


def local_skip_reason(pin: ResolvedPin, mirrors: Mapping[str, str]) -> str | None:
    """Why the local profile cannot install ``pin`` (None when it can)."""
    if pin.local_skip is not None:
        return pin.local_skip.removeprefix("skip:").strip()
    if pin.install == "checkout":
        return (
            f"checkout of {pin.values.repo} needs GitHub; "
            "the local profile builds only pip installs"
        )
    if pin.install == "file":
        return f"downloads {pin.values.url}, a production-only artifact"
    if pin.install == "apt":
        return "apt pins target the production base's distribution"
    if pin.kind == "git" and pin.name not in mirrors:
        return f"no local mirror of {pin.values.repo}; pass --mirror {pin.name}=PATH to include it"
    if pin.kind == "url":
        return f"wheel URL {pin.values.url} is not on a registry this profile reaches"
    return None


def render(
    manifest: PinManifest,
    image: ImageKey,
    profile: Profile,
    *,
    local_base: str = "twinbuild/base:local",
    mirrors: Mapping[str, str] | None = None,
) -> Rendered:
    """The args and files for one build; ``mirrors`` maps git pin names to local clone paths."""
    mirrors = mirrors or {}
    variant = manifest.variant(image.variant)
    pins = manifest.resolve(image)
    args: dict[str, str] = {}
    layers: dict[str, list[str]] = {layer: [] for layer in manifest.layers()}
    installed: list[ResolvedPin] = []
    skipped: list[tuple[ResolvedPin, str]] = []
    blockers: list[str] = []
    if profile == "production":
        args["BASE_IMAGE"] = variant.base.ref
        args["GPU_ARCHS"] = ";".join(variant.gpu_archs)
        args.update(manifest.recipe_args(image.variant))
        if variant.base.floating is not None:
            blockers.append(
                f"variants.{variant.name}.base.digest is not pinned ({variant.base.floating}); "
                f"set it in {manifest.path} and build again"
            )
    else:
        args["BASE_IMAGE"] = local_base
        args["TWINBUILD_VARIANT"] = image.variant
    for pin in pins:
        if profile == "local":
            reason = local_skip_reason(pin, mirrors)
            if reason is not None:
                skipped.append((pin, reason))
                continue
        elif pin.kind == "url" and not pin.values.sha256:
            blockers.append(
                f"pins.{pin.name}.sha256 is not pinned: on a machine that reaches "
                f"{_host(pin.values.url)} run `twinbuild pins bump {pin.name} --fetch`, commit "
                f"{manifest.path}, and build again"
            )
        installed.append(pin)
        if pin.install == "pip":
            mirror = None
            if profile == "local" and pin.kind == "git":
                mirror = f"file://{CONTEXT_IN_IMAGE}/mirrors/{pin.name}.git"
            if pin.values.index and profile == "production":
                layers[pin.layer].append(f"--extra-index-url {pin.values.index}")
            layers[pin.layer].append(requirement(pin, mirror=mirror))
            if pin.kind == "pypi" and pin.values.version is not None:
                # A recipe may repeat a pip pin's version as a marker (ENV FLASHINFER_VERSION):
                # it takes it from this arg, never as a literal.
                args[f"{pin.arg_prefix()}_VERSION"] = pin.values.version
        else:
            args.update(pin_args(pin))
    files = {
        f"{GENERATED}/pip/{layer}.txt": "".join(f"{line}\n" for line in lines)
        for layer, lines in layers.items()
    }
    return Rendered(
        image=image,
        profile=profile,
        recipe=recipe_path(variant.recipe, profile),
        target=variant.recipe if profile == "local" else None,
        family=variant.recipe,
        families=tuple(dict.fromkeys(v.recipe for v in manifest.variants.values())),
        args=args,
        files=files,
        installed=installed,
        skipped=skipped,
        blockers=blockers,
    )


def _host(url: str | None) -> str:
    return urlsplit(url or "").hostname or "its host"
