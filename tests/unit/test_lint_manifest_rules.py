"""The manifest policy of the lint, every rule at once, each finding written out.

One manifest breaks each symmetry and pinning rule in its own pin; the lint must report exactly
these lines, in this order: a dropped rule, a wrong code, key, line or message fails. Found by
mutation testing (``nox -s mutate``). The lines were checked against the manifest text by hand
(``TB005`` points at the key that floats: a git pin's ``ref``, a pip pin's ``range``, else the
pin's table line, as for an unpinned apt package).
The cuda base is written as a table so that TB008's line is the digest's own.
"""

from __future__ import annotations

from pathlib import Path

from twinbuild.lint.checks import lint_manifest
from twinbuild.manifest.loader import loads

MANIFEST = """\
schema = 2

[variants.cuda]
archs = ["linux/amd64"]
recipe = "cuda"
runners = { build = ["self-hosted", "builder", "cuda"], gpu = ["self-hosted", "gpu", "cuda"] }
python = "3.12"
toolkit = "12.9"
vendor = "nvidia"
gpu_archs = ["9.0"]

[variants.cuda.base]
repository = "lmsysorg/sglang"
tag = "v0.5.6-cu129"
digest = "sha256:1111"

[variants.rocm]
archs = ["linux/amd64"]
recipe = "rocm"
runners = { build = ["self-hosted", "builder", "rocm"], gpu = ["self-hosted", "gpu", "rocm"] }
base = { repository = "rocm/sgl-dev", tag = "v0.5.6", digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222" }
python = "3.12"
toolkit = "7.0"
vendor = "amd"
gpu_archs = ["gfx942"]

[local]
suite = "bookworm"
# mirror: none (mmdebstrap's default)
packages = ["python3"]

[pins.diverged]
kind = "pypi"
version = "1.0"
why = "w w"

[pins.diverged.rocm]
version = "1.1"

[pins.same]
kind = "pypi"
version = "1.0"
divergence = { rocm = "rocm needs it" }
why = "w w"

[pins.lonely]
kind = "pypi"
version = "1.0"
variants = ["rocm"]
why = "w w"

[pins.short]
kind = "git"
repo = "https://github.com/a/b"
commit = "abc1234"
why = "w w"

[pins.branchy]
kind = "git"
repo = "https://github.com/a/c"
ref = "main"
why = "w w"

[pins.ranged]
kind = "pypi"
range = ">=1,<2"
why = "w w"

[pins.aptish]
kind = "apt"
why = "w w"

[pins.badver]
kind = "pypi"
version = "1.x"
why = "w w"

[pins.badrange]
kind = "pypi"
range = "=>1"
floating = "any"
why = "w w"

[pins.todo]
kind = "pypi"
version = "1.0"
why = "TODO"

[pins.self-named]
kind = "pypi"
version = "1.0"
why = "Self_Named"

[pins.tagged]
kind = "git"
repo = "https://github.com/a/f"
commit = "v1.2"
why = "w w"

[pins.hollow]
kind = "pypi"
version = "1.0"
floating = "tbd"
divergence = { rocm = "?" }
why = "w w"

[pins.hollow.rocm]
version = "1.1"

[pins.wheel]
kind = "url"
url = "https://example.org/w-1.0-py3-none-any.whl"
sha256 = "ABC"
version = "1.0"
why = "w w"

[pins.declared]
kind = "git"
repo = "https://github.com/a/d"
ref = "dev"
floating = "tracks dev on purpose"
why = "w w"

[pins.pinned-anyway]
kind = "pypi"
version = "1.0"
floating = "was a range once"
why = "w w"

[pins.halfbranch]
kind = "git"
repo = "https://github.com/a/e"
commit = "0123456789abcdef0123456789abcdef01234567"
divergence = { cuda = "cuda tracks a branch" }
floating = "cuda tracks main"
why = "w w"

[pins.halfbranch.cuda]
ref = "main"

[pins.echo]
kind = "pypi"
version = "1.0"
variants = ["rocm"]
asymmetry = "Echo"
why = "w w"

[pins.bothref]
kind = "git"
repo = "https://github.com/a/g"
why = "w w"

[pins.bothref.cuda]
ref = "a"

[pins.bothref.rocm]
ref = "b"

[pins.shortrocm]
kind = "git"
repo = "https://github.com/a/h"
commit = "0123456789abcdef0123456789abcdef01234567"
divergence = { rocm = "rocm on a fork commit" }
why = "w w"

[pins.shortrocm.rocm]
commit = "fedcba9"

[pins.upper]
kind = "git"
repo = "https://github.com/a/i"
commit = "ABCDEF0123456789ABCDEF0123456789ABCDEF01"
why = "w w"

[pins.wheel2]
kind = "url"
url = "https://example.org/w2-1.0-py3-none-any.whl"
sha256 = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
version = "1.x"
why = "w w"

[pins.anyver]
kind = "pypi"
range = ""
why = "w w"
"""

FINDINGS = [
    "pins/manifest.toml:15: TB008 variants.cuda.base.digest: 'sha256:1111' is not 'sha256:<64 hex>'; pin lmsysorg/sglang:v0.5.6-cu129 by digest",
    "pins/manifest.toml:37: TB001 pins.diverged: differs: version cuda='1.0' rocm='1.1'; move them together (twinbuild pins bump), or declare divergence = { VARIANT = \"reason\" } naming those that differ",
    "pins/manifest.toml:43: TB002 pins.same.divergence.rocm: rocm has the same values as every variant; drop it from 'divergence'",
    'pins/manifest.toml:49: TB003 pins.lonely: only on rocm; add asymmetry = "why the other variants do without it"',
    "pins/manifest.toml:55: TB004 pins.short.commit: 'abc1234' is not a full 40-hex commit (a short SHA is ambiguous and may not exist upstream); pin the merge commit, e.g. twinbuild pins bump short --commit <40 hex>",
    "pins/manifest.toml:61: TB005 pins.branchy: git ref 'main' on every variant; pin it, or declare floating = \"why\"",
    "pins/manifest.toml:66: TB005 pins.ranged: range '>=1,<2' on every variant; pin it, or declare floating = \"why\"",
    'pins/manifest.toml:69: TB005 pins.aptish: apt package unpinned on every variant; pin it, or declare floating = "why"',
    "pins/manifest.toml:75: TB006 pins.badver.version: '1.x' is not a PEP 440 version",
    "pins/manifest.toml:80: TB006 pins.badrange.range: '=>1' is not a PEP 440 specifier",
    "pins/manifest.toml:87: TB007 pins.todo.why: give the pin's provenance, not 'TODO'",
    "pins/manifest.toml:92: TB007 pins.self-named.why: give the pin's provenance, not 'Self_Named'",
    "pins/manifest.toml:97: TB004 pins.tagged.commit: 'v1.2' is not a full 40-hex commit (a branch or tag moves); pin the merge commit, e.g. twinbuild pins bump tagged --commit <40 hex>",
    "pins/manifest.toml:103: TB007 pins.hollow.floating: 'tbd' is a placeholder; write the real reason",
    "pins/manifest.toml:104: TB007 pins.hollow.divergence.rocm: '?' is a placeholder; write the real reason",
    "pins/manifest.toml:103: TB011 pins.hollow: declared floating but pinned on every variant; drop 'floating'",
    "pins/manifest.toml:113: TB009 pins.wheel.sha256: 'ABC' is not 64 lower-case hex",
    "pins/manifest.toml:127: TB011 pins.pinned-anyway: declared floating but pinned on every variant; drop 'floating'",
    "pins/manifest.toml:145: TB007 pins.echo.asymmetry: 'Echo' is a placeholder; write the real reason",
    "pins/manifest.toml:153: TB001 pins.bothref: differs: ref cuda='a' rocm='b'; move them together (twinbuild pins bump), or declare divergence = { VARIANT = \"reason\" } naming those that differ",
    "pins/manifest.toml:154: TB005 pins.bothref: git ref 'a' on cuda; git ref 'b' on rocm; pin it, or declare floating = \"why\"",
    "pins/manifest.toml:167: TB004 pins.shortrocm.rocm.commit: 'fedcba9' is not a full 40-hex commit (a short SHA is ambiguous and may not exist upstream); pin the merge commit, e.g. twinbuild pins bump shortrocm --commit <40 hex>",
    "pins/manifest.toml:172: TB004 pins.upper.commit: 'ABCDEF0123456789ABCDEF0123456789ABCDEF01' has upper-case hex; git names commits in lower case: write 'abcdef0123456789abcdef0123456789abcdef01'",
    "pins/manifest.toml:179: TB006 pins.wheel2.version: '1.x' is not a PEP 440 version",
    'pins/manifest.toml:184: TB005 pins.anyver: unpinned on every variant; pin it, or declare floating = "why"',
]
FLOATING = [
    "pins/manifest.toml:81: TB010 pins.badrange: floating (range '=>1' on every variant): any",
    "pins/manifest.toml:121: TB010 pins.declared: floating (git ref 'dev' on every variant): tracks dev on purpose",
    "pins/manifest.toml:135: TB010 pins.halfbranch: floating (git ref 'main' on cuda): cuda tracks main",
]


def _lint(strict: bool = False) -> tuple[list[str], list[str]]:
    manifest = loads(MANIFEST, Path("pins/manifest.toml"))
    report = lint_manifest(manifest, strict=True) if strict else lint_manifest(manifest)
    return [str(f) for f in report.findings], [str(f) for f in report.floating]


def test_every_rule_reports_its_line() -> None:
    findings, floating = _lint()
    assert findings == FINDINGS
    assert floating == FLOATING


def test_strict_also_fails_the_declared_floating_refs() -> None:
    findings, floating = _lint(strict=True)
    assert floating == FLOATING
    assert sorted(findings) == sorted(FINDINGS + FLOATING)
    assert [f for f in findings if " TB010 " in f] == FLOATING
