"""``twinbuild base capture``: a base image's installed set, read from the image itself.

The image runs by id or digest, without network, through the engine client (as smoke runs its
images): ``python3`` (the interpreter the layers build on: the local venv is made
``--system-site-packages`` over it) lists every distribution it sees with ``importlib.metadata``
(name, version, the PEP 610 commit of a git install), and ``dpkg-query`` every installed Debian
package. The answer is a capture file (``closure/capture.py`` renders and reads it):

- ``--variant V [--arch A]``: the variant's production base, pulled by digest where it is not
  in the engine, into ``pins/lock/base/<image>.toml`` (committed; ``twinbuild lock`` then takes
  it as the lock's constraints, and a base digest bump makes it stale: TB203);
- ``--image REF``: any image of the engine, printed (or ``--output FILE``);
- the embedded base (:func:`embedded_capture`): made per machine from Debian's archive, so its
  capture is per machine too, kept in the cache by the base's image id (``twinbuild base``
  makes it right after it makes or finds the base; the local smoke reads it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from twinbuild.closure.capture import BaseCapture, capture_path, read_capture, render_capture
from twinbuild.engine.api import EngineAPI
from twinbuild.errors import ConfigError, EngineError, LockInvalid
from twinbuild.manifest.model import Arch, ImageKey
from twinbuild.util.atomic import write_atomic

#: What the base's layers run: the local venv sees this interpreter's site-packages too.
INTERPRETER = "python3"
_MARK = "@@twinbuild-dpkg@@"
#: Runs in the image: standard library only, valid on Python 3.8+.
_PROBE = r"""
import json
from importlib import metadata
out = []
for d in metadata.distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    commit = ""
    text = d.read_text("direct_url.json")
    if text:
        try:
            vcs = json.loads(text).get("vcs_info") or {}
            commit = vcs.get("commit_id", "") or ""
        except (ValueError, AttributeError):
            commit = ""
    out.append([name, d.version, commit])
print(json.dumps(out))
"""
#: How images/local/Dockerfile makes the venv its layers install into, word for word (a test
#: holds the two together): the venv brings distributions of its own (ensurepip's pip and
#: setuptools) beside the interpreter's, and no layer of the lock installs them.
LOCAL_VENV = "python3 -m venv --system-site-packages /opt/venv"
#: The embedded base's capture runs in that venv, as the local layers do.
IN_LOCAL_VENV = f"{LOCAL_VENV} || exit 70; /opt/venv/bin/python3"


def _script(interpreter: str) -> str:
    return (
        f'{interpreter} -c "$1" || exit 70; echo {_MARK}; '
        "command -v dpkg-query >/dev/null || exit 0; "
        "dpkg-query -W -f='${db:Status-Abbrev}\\t${Package}\\t${Version}\\n'"
    )


#: How long the two listings may take in the image (a large base lists thousands).
TIMEOUT_S = 120


@dataclass(frozen=True, slots=True, kw_only=True)
class Captured:
    """What one capture found, as the capture file holds it."""

    image: str  # the reference captured, with its digest or id
    dists: dict[str, str]
    commits: dict[str, str]
    apt: dict[str, str]

    def text(self) -> str:
        return render_capture(self.image, self.dists, self.apt, commits=self.commits)


def capture_image(engine: EngineAPI, ref: str, *, interpreter: str = INTERPRETER) -> Captured:
    """Run ``ref`` (network none) and read its installed set; :class:`EngineError` in one line
    where the image has no ``python3`` or the listing fails. ``interpreter`` is the shell words
    that run the listing's Python (:data:`IN_LOCAL_VENV` for the embedded base)."""
    inspected = engine.inspect_image(ref)
    if inspected is None:
        raise ConfigError(
            f"base capture: no image {ref} in the engine at {engine.docker_host}; pull or build "
            "it first (`twinbuild base` for the embedded one)"
        )
    image_id = str(inspected["Id"])
    run = engine.run_container(
        image_id,
        ["sh", "-c", _script(interpreter), "sh", _PROBE],
        network="none",
        timeout=TIMEOUT_S,
    )
    return parse_output(run.output, ok=run.ok, ref=ref, image=_named(ref, image_id))


def _named(ref: str, image_id: str) -> str:
    """The captured image by its digest where the reference has one, else by its id (alone
    where the reference is that id, or a prefix of it)."""
    if "@sha256:" in ref:
        return ref
    if image_id.removeprefix("sha256:").startswith(ref.removeprefix("sha256:")):
        return image_id
    return f"{ref.split('@', 1)[0]}@{image_id}"


def parse_output(output: str, *, ok: bool, ref: str, image: str) -> Captured:
    """The probe's answer (the interpreter's JSON line, the mark, dpkg's lines)."""
    head, mark, tail = output.partition(_MARK)
    listing = next((ln for ln in reversed(head.splitlines()) if ln.startswith("[")), None)
    if not ok or not mark or listing is None:
        last = (output.strip().splitlines() or ["(no output)"])[-1][:200]
        raise EngineError(
            f"base capture of {ref}: {INTERPRETER} in the image could not list its "
            f"distributions ({last}); the image needs a Python 3.8+ as {INTERPRETER}"
        )
    dists: dict[str, str] = {}
    commits: dict[str, str] = {}
    try:
        rows = json.loads(listing)
    except ValueError:
        raise EngineError(f"base capture of {ref}: the listing is not JSON") from None
    from packaging.utils import canonicalize_name

    for name, version, commit in rows:
        key = canonicalize_name(str(name))
        if key in dists:  # sys.path order: the first of a name is the one imported
            continue
        dists[key] = str(version)
        if commit:
            commits[key] = str(commit)
    apt: dict[str, str] = {}
    for line in tail.splitlines():
        status, _, rest = line.partition("\t")
        package, _, version = rest.partition("\t")
        if status.strip() == "ii" and package:
            apt[package] = version
    return Captured(image=image, dists=dists, commits=commits, apt=apt)


# -- the production bases: committed ---------------------------------------------------------------


def capture_variant(engine: EngineAPI, root: Path, image: ImageKey, base_ref: str) -> Path:
    """Capture the variant's base into ``pins/lock/base/<image>.toml`` (pulled when absent)."""
    if "@sha256:" not in base_ref:
        raise ConfigError(
            f"variants.{image.variant}.base: {base_ref} has no digest; pin it "
            "(`twinbuild pins bump`) before capturing: a capture names the digest it read"
        )
    if engine.inspect_image(base_ref) is None:
        engine.pull(base_ref)
    captured = capture_image(engine, base_ref)
    path = capture_path(root, image.name)
    write_atomic(path, captured.text(), within=root)
    return path


# -- the embedded base: per machine, in the cache -----------------------------------------------


def embedded_path(cache: Path, image_id: str) -> Path:
    """Where the embedded base's capture is kept: ``<cache>/base-capture/venv-<id>.toml`` (taken
    in the local venv: a capture of the bare interpreter, kept before, is not read)."""
    return cache / "base-capture" / f"venv-{image_id.removeprefix('sha256:')}.toml"


def embedded_capture(engine: EngineAPI, tag: str, cache: Path) -> BaseCapture:
    """The capture of the embedded base ``tag`` (its image id decides): read from the cache, or
    made now and kept there."""
    inspected = engine.inspect_image(tag)
    if inspected is None:
        raise ConfigError(f"base capture: no image {tag}; run `twinbuild base` first")
    image_id = str(inspected["Id"])
    path = embedded_path(cache, image_id)
    try:
        found = read_capture(path)
    except LockInvalid:
        found = None  # a damaged cache entry is made again
    if found is not None:
        return found
    captured = capture_image(engine, image_id, interpreter=IN_LOCAL_VENV)
    named = image_id if tag == image_id else f"{tag}@{image_id}"
    captured = Captured(image=named, dists=captured.dists,
                        commits=captured.commits, apt=captured.apt)  # fmt: skip
    write_atomic(path, captured.text())
    return _reread(path)


def _reread(path: Path) -> BaseCapture:
    """The capture just written, read back as every reader reads it."""
    made = read_capture(path)
    if made is None:
        raise ConfigError(f"{path}: removed while it was being written; run the capture again")
    return made


# -- the command -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureOptions:
    """What ``twinbuild base capture`` was asked for: ``variant`` (and ``arch``), or ``image``."""

    manifest: Path
    root: Path = Path()
    image: str | None = None
    variant: str | None = None
    arch: Arch | None = None
    output: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureResult:
    image: str
    dists: int
    apt: int
    written: str  # the file written; "" where the capture went to stdout
    capture: str = ""  # the capture's text where it went to stdout

    def text(self) -> str:
        if not self.written:
            return self.capture
        counts = f"{self.dists} distributions, {self.apt} dpkg packages"
        return f"{self.image}: {counts} -> {self.written}\n"


def capture(options: CaptureOptions) -> CaptureResult:
    from twinbuild.engine import binfmt
    from twinbuild.engine.client import connect

    if options.image is not None:
        if options.arch is not None:
            raise ConfigError("base capture: --arch goes with --variant (an --image is one arch)")
        with connect() as engine:
            found = capture_image(engine, options.image)
        if options.output is not None:
            out = Path(options.output)
            write_atomic(out, found.text(), parents=False)
            return CaptureResult(image=found.image, dists=len(found.dists), apt=len(found.apt),
                                 written=str(out))  # fmt: skip
        return CaptureResult(image=found.image, dists=len(found.dists), apt=len(found.apt),
                             written="", capture=found.text())  # fmt: skip
    if options.output is not None:
        raise ConfigError("base capture: --output goes with --image; --variant writes its file")
    from twinbuild.manifest.loader import load

    manifest = load(options.manifest)
    arch = options.arch or binfmt.host_arch()
    variant = manifest.variant(options.variant or "")
    image = ImageKey(variant=variant.name, arch=arch)
    if image not in variant.images():
        raise ConfigError(
            f"base capture: variant {variant.name} has no {arch} image in {manifest.path}"
        )
    with connect() as engine:
        path = capture_variant(engine, options.root, image, variant.base.ref)
    got = _reread(path)
    shown = path.relative_to(options.root) if path.is_relative_to(options.root) else path
    return CaptureResult(image=got.image, dists=len(got.dists), apt=len(got.apt),
                         written=str(shown))  # fmt: skip
