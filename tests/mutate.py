"""Mutation testing of the modules that guard images and evidence (``nox -s mutate``).

mutmut changes one thing at a time in a module (``<=`` for ``==``, a dropped argument, a changed
string) and runs the tests that cover the changed function; a change no test notices "survives".
Each guard module runs on its own, in a copy of the repository under ``build/mutate/<name>/``
whose pyproject.toml carries that module's ``[tool.mutmut]`` (mutmut reads only the current
folder's), with the narrow test selection below, under ``nice -n 19``.

A surviving mutant is either a missing test or an equivalent mutant (same behaviour, e.g.
``to_bytes(8, "big")`` -> ``to_bytes(8)``, whose default is big). Equivalent ones are listed in
``EQUIVALENT`` with the reason, keyed by function and the mutated line, and leave the kill rate's
denominator; any other survivor is printed with its diff. ``--write-docs`` puts the table in
docs/testing.md between its markers.

    python -m tests.mutate [--only NAME ...] [--max-children N] [--write-docs]
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutate"
DOCS = ROOT / "docs" / "testing.md"
BEGIN, END = "<!-- mutate:begin -->", "<!-- mutate:end -->"
#: What the copy needs besides twinbuild/ and tests/ (tests read the real recipes and workflows).
COPIED = ("pins", "images", ".github", "docs", "README.md", "noxfile.py")
KILLED = {"killed", "timeout", "caught by type check"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    name: str
    source: str  # the module file
    tests: tuple[str, ...]  # the pytest selection: the tests of this guard, nothing slow
    functions: tuple[str, ...] = ()  # only these functions; () = the whole module

    @property
    def module(self) -> str:
        return self.source.removesuffix(".py").replace("/", ".")

    def patterns(self) -> list[str]:
        if not self.functions:
            return [f"{self.module}.*"]
        return [f"{self.module}.x_{f}__mutmut_*" for f in self.functions]


TARGETS = (
    Target(
        name="inputs hash",
        source="twinbuild/builder/inputs.py",
        tests=("tests/unit/test_inputs_hash.py", "tests/unit/test_build.py"),
    ),
    Target(
        name="smoke conformance",
        source="twinbuild/smoke/conformance.py",
        tests=("tests/unit/test_conformance_values.py", "tests/unit/test_smoke_conformance.py"),
    ),
    Target(
        name="exact pin rule",
        source="twinbuild/util/exact_pin.py",
        tests=(
            "tests/unit/test_exact_pin.py",
            "tests/unit/test_exact_pin_rule.py",
            "tests/unit/test_conformance_values.py",
        ),
    ),
    Target(
        name="evidence gate",
        source="twinbuild/evidence/evidence_check.py",
        tests=(
            "tests/unit/test_evidence_gate.py",
            "tests/unit/test_evidence_gate_gpu.py",
            "tests/unit/test_evidence_gate_edges.py",
        ),
    ),
    Target(
        name="strict JSON",
        source="twinbuild/util/strictjson.py",
        tests=(
            "tests/unit/test_evidence_strictjson.py",
            "tests/unit/test_strictjson_bounds.py",
            "tests/unit/test_evidence_record.py",
        ),
    ),
    Target(
        name="DSSE verify",
        source="twinbuild/evidence/dsse.py",
        tests=("tests/unit/test_evidence_dsse.py", "tests/unit/test_evidence_signing.py"),
    ),
    Target(
        name="lint symmetry rules",
        source="twinbuild/lint/checks.py",
        tests=("tests/unit/test_lint.py", "tests/unit/test_lint_manifest_rules.py"),
        functions=("lint_manifest", "_lint_pin", "_differences", "_lint_values", "is_placeholder"),
    ),
    Target(
        name="pins bump",
        source="twinbuild/pins/bump.py",
        tests=("tests/unit/test_bump.py", "tests/unit/test_bump_platforms.py"),
    ),
)

#: Survivors that behave exactly like the original: (target, function, mutated line) -> why.
_HIGHER = (
    "starting the glob walk at a higher folder finds the same entries: fnmatch checks every "
    "segment of the pattern, the fixed ones too"
)
_WHOLE = "tree.entries(None) and tree.entries('') both list the whole tree (a falsy top)"
_ZIP = "strict=None and the default are strict=False: the same zip"
_ONE_BRACKET = "a PEP 508 name has one '[' (its extras); the text before it is the same either way"
_ON = 'f"{gpu.count}x {gpu.model} (driver {gpu.driver}, {gpu.runtime})"'
_HAS_GPU = "evidence is accepted only with a GPU (no GPU is refused), so 'no GPU' is never shown"
_CODEC = "codec names are case-insensitive: 'ASCII' is 'ascii', 'UTF-8' is 'utf-8'"
_FIRST = "only the closest match (close[0]) is shown; asking for more matches changes nothing"
_CAST = "typing.cast returns its value unchanged at run time; the type name is for mypy only"
_FALSY = "None is falsy like False: json.dumps treats both the same"
_PRE_ALONE = (
    "packaging >= 25 (26.4 here) accepts a pre-release given to contains() on its own when "
    "prereleases is None, as prereleases=True does"
)
_SAME_DEFAULT = "a missing part gets the same default on both sides of the comparison"
_MEMO = (
    "where (and under which key) a parse is remembered is the memo's own business: any "
    "consistent name finds the same answer"
)
_HAS_PATH = (
    "the manifest model refuses a checkout or file pin without a path, so the default is dead"
)
EQUIVALENT: dict[tuple[str, str, str], str] = {
    ("inputs hash", "inputs_hash", "digest.update(len(part).to_bytes(8, ) + part)"): (
        "int.to_bytes defaults to byteorder 'big' since Python 3.11"
    ),
    (
        "inputs hash",
        "input_files",
        'if source.startswith((GENERATED, "XX--XX")) or "://" in source:',
    ): "the recipe scanner strips COPY/ADD flags before it records a source, so none starts --",
    ("inputs hash", "_match", 'parts = pattern.split("/") if (pattern) or True else []'): (
        "'' split is [''], which has no glob either: both list the whole tree"
    ),
    ("inputs hash", "_match", "while fixed < len(parts) and _GLOB & set(parts[fixed]):"): _HIGHER,
    (
        "inputs hash",
        "_match",
        "while fixed < len(parts) and not _GLOB | set(parts[fixed]):",
    ): _HIGHER,
    ("inputs hash", "_match", "top = None"): _WHOLE,
    ("inputs hash", "_match", "for entry in tree.entries(None):"): _WHOLE,
    (
        "inputs hash",
        "_attributes",
        "found = [e for c in sorted(candidates) for e in tree.entries(None) if e.path == c]",
    ): _WHOLE,
    (
        "inputs hash",
        "_match",
        "if all(fnmatch.fnmatchcase(s, p) for s, p in zip(segments, parts, strict=None)):",
    ): _ZIP,
    (
        "inputs hash",
        "_match",
        "if all(fnmatch.fnmatchcase(s, p) for s, p in zip(segments, parts, )):",
    ): _ZIP,
    ("smoke conformance", "_checkout", 'path = pin.path or "XXXX"'): _HAS_PATH,
    (
        "smoke conformance",
        "_dist",
        "ok = spec.contains(dist.version, prereleases=None)",
    ): _PRE_ALONE,
    ("smoke conformance", "_dist", "ok = spec.contains(dist.version, )"): _PRE_ALONE,
    ("exact pin rule", "split", "while len(release) >= 1 and release[-1] == 0:"): (
        "both versions are normalised alike: stripping the last zero too maps 0 and 0.0 to the "
        "same release, so equality is unchanged"
    ),
    ("exact pin rule", "split", 'pre: tuple[str, int] | None = ""'): _SAME_DEFAULT,
    ("exact pin rule", "split", 'post: int | None = ""'): _SAME_DEFAULT,
    ("exact pin rule", "split", "int(part) if part.isdigit() else part.upper()"): (
        "both labels are folded alike, upper or lower: the comparison is case-insensitive either way"
    ),
    **{
        ("strict JSON", f"Fields.{func}", line.format(t)): _CAST
        for func, line, name in (
            ("text", 'return cast({}, self._typed(key, str, "a string"))', "str"),
            ("integer", 'value = cast({}, self._typed(key, int, "an integer"))', "int"),
            ("flag", 'return cast({}, self._typed(key, bool, "true or false"))', "bool"),
            ("strings", "return cast({}, items)", "list[str]"),
        )
        for t in ("None", f'"XX{name}XX"', f'"{name.upper()}"')
    },
    ("strict JSON", "loads", 'text = data.decode("UTF-8")'): _CODEC,
    (
        "inputs hash",
        "recipe_copies",
        "def x_recipe_copies__mutmut_orig(recipe: Path, data: bytes, *, remember: bool = False)"
        " -> list[tuple[int, str]]:",
    ): "its one caller, input_files, always passes remember",
    (
        "inputs hash",
        "recipe_copies",
        'key = hashlib.sha256(data + b"XX\\0XX" + _scanner_identity()).hexdigest()',
    ): _MEMO,
    (
        "inputs hash",
        "recipe_copies",
        'memo = cache_root() / "XXrecipe-copiesXX" / f"{key}.json"',
    ): _MEMO,
    (
        "inputs hash",
        "recipe_copies",
        'memo = cache_root() / "RECIPE-COPIES" / f"{key}.json"',
    ): _MEMO,
    (
        "inputs hash",
        "recipe_copies",
        "with contextlib.suppress(ConfigError):  # it only costs the next run a parse",
    ): "write_atomic turns every OSError into a ConfigError, so OSError never reaches here",
    ("evidence gate", "check_one", "if accepted is None and checks.refusals:"): (
        "_check returns None exactly when it added a refusal, so 'and' and 'or' agree here"
    ),
    (
        "lint symmetry rules",
        "_lint_pin",
        "f\"pins.{pin.name}: only on {'XX, XX'.join(pin.platforms)}; \"",
    ): "TB003 fires for a pin on one platform of two: one name, the separator never shows",
    ("lint symmetry rules", "_lint_pin", "float_key: tuple[str, ...] = None"): (
        "the first platform that floats sets float_key before it is read; with none it is unused"
    ),
    (
        "strict JSON",
        "load",
        "return loads(read_bytes(path, max_bytes=max_bytes), source=str(path), )",
    ): "read_bytes has already refused more than max_bytes, so loads' own size check cannot fire",
    ("strict JSON", "loads", "raise ConfigError(None) from None"): (
        "the RecursionError branch is unreachable: the depth check before json.loads refuses "
        "anything nested deeper than MAX_DEPTH (32), far under the recursion limit"
    ),
    ("strict JSON", "canonical", ').encode("UTF-8")'): _CODEC,
    **{
        ("strict JSON", "dumps", line): _FALSY
        for line in (
            'return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=None, allow_nan=False) + "\\n"',
            'return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=None) + "\\n"',
        )
    },
    (
        "strict JSON",
        "canonical",
        'value, sort_keys=True, separators=(",", ":"), ensure_ascii=None, allow_nan=False',
    ): _FALSY,
    (
        "strict JSON",
        "canonical",
        'value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=None',
    ): _FALSY,
    (
        "strict JSON",
        "Fields.done",
        "hint = difflib.get_close_matches(key, list(self.seen), )",
    ): _FIRST,
    (
        "strict JSON",
        "Fields.done",
        "hint = difflib.get_close_matches(key, list(self.seen), n=2)",
    ): _FIRST,
    (
        "strict JSON",
        "_depth",
        'brackets = _STRING.sub(b"XXXX", data).translate(None, _NOT_BRACKETS)',
    ): ("the placeholder has no bracket, and translate deletes everything but brackets"),
    ("strict JSON", "_depth", "return max(itertools.accumulate(steps), default=1)"): (
        "a document without brackets is 0 or 1 deep, both far under MAX_DEPTH"
    ),
    ("pins bump", "edit", 'table["divergence"] = request.reason or "XXXX"'): (
        "--diverge without a real --reason is refused before the edit, so the fallback is dead"
    ),
    (
        "pins bump",
        "_check_request",
        "close = difflib.get_close_matches(name, list(old.pins), )",
    ): _FIRST,
    (
        "pins bump",
        "_check_request",
        "close = difflib.get_close_matches(name, list(old.pins), n=2)",
    ): _FIRST,
    (
        "pins bump",
        "_carriers",
        "f\"leaves {'XX, XX'.join(others)} behind: drop --platform to move both, or pass \"",
    ): "with two platforms there is one other, so the separator never shows",
    (
        "pins bump",
        "_sub",
        "return sub if (isinstance(sub, Table | InlineTable)) or True else None",
    ): (
        "the loader accepts only a table (or an inline one) under a platform's key, so what "
        "_sub finds is a table or None, and None is returned either way"
    ),
    (
        "DSSE verify",
        "Envelope.to_dict",
        '"payload": base64.standard_b64encode(self.payload).decode("ASCII"),',
    ): _CODEC,
    (
        "DSSE verify",
        "Envelope.to_dict",
        '{"keyid": s.keyid, "sig": base64.standard_b64encode(s.sig).decode("ASCII")}',
    ): _CODEC,
    ("DSSE verify", "pae", 'kind = payload_type.encode("UTF-8")'): _CODEC,
    **{
        ("evidence gate", "Accepted.summary", f'on = {_ON} if {cond} else "{text}"'): _HAS_GPU
        for cond, text in (
            ("(gpu) or True", "no GPU"),
            ("gpu", "XXno GPUXX"),
            ("gpu", "no gpu"),
            ("gpu", "NO GPU"),
        )
    },
    (
        "smoke conformance",
        "_dist",
        'name = (pin.dist or pin.name).split("[", )[0].strip()  # "httpx[http2]": extras are no name',
    ): _ONE_BRACKET,
    (
        "smoke conformance",
        "_dist",
        'name = (pin.dist or pin.name).rsplit("[", 1)[0].strip()  # "httpx[http2]": extras are no name',
    ): _ONE_BRACKET,
    (
        "smoke conformance",
        "_dist",
        'name = (pin.dist or pin.name).split("[", 2)[0].strip()  # "httpx[http2]": extras are no name',
    ): _ONE_BRACKET,
    (
        "smoke conformance",
        "_dist",
        'expected = f"{name}{pin.range or \'XXXX\'} (floating)" if pin.range else f"{name} (unpinned)"',
    ): "that branch runs only when pin.range is non-empty, so the fallback is never used",
    ("smoke conformance", "_file", 'path = pin.path or "XXXX"'): _HAS_PATH,
    (
        "smoke conformance",
        "_url_dist",
        'algo, _, value = str(archive.get("hash") or "").rpartition("=")',
    ): "'sha256=<hex>' has one '='; hex never contains another",
    (
        "smoke conformance",
        "_url_dist",
        'algo, _, value = str(archive.get("hash") or "XXXX").partition("=")',
    ): "a placeholder without '=' yields an empty value, like the empty string it replaces",
}


@dataclass(slots=True)
class Outcome:
    target: Target
    seconds: float
    statuses: dict[str, str]  # mutant name -> mutmut status
    diffs: dict[str, str] = field(default_factory=dict)  # survivor -> its mutated line
    equivalent: dict[str, str] = field(default_factory=dict)  # survivor -> why

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.statuses.values())

    @property
    def killed(self) -> int:
        return sum(1 for s in self.statuses.values() if s in KILLED)

    @property
    def missed(self) -> list[str]:
        return [n for n, s in self.statuses.items() if s not in KILLED and n not in self.equivalent]

    @property
    def rate(self) -> float:
        denominator = len(self.statuses) - len(self.equivalent)
        return self.killed / denominator if denominator else 1.0


def _config(target: Target) -> str:
    def array(items: list[str]) -> str:
        return "[" + ", ".join(f'"{i}"' for i in items) + "]"

    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["twinbuild"]\n'
        f"only_mutate = {array([target.source])}\n"
        f"also_copy = {array(list(COPIED))}\n"
        f"pytest_add_cli_args = {array(['-p', 'no:cacheprovider'])}\n"
        f"pytest_add_cli_args_test_selection = {array(list(target.tests))}\n"
        # A mutant that loops counts as killed (timeout); mutmut's default waits 30x the tests'
        # time for it, minutes per mutant on a shared machine.
        "timeout_multiplier = 3.0\n"
    )


def prepare(target: Target) -> Path:
    """A fresh copy of the repository with this target's mutmut configuration."""
    work = _work(target)
    if work.exists():
        shutil.rmtree(work)
    ignore = shutil.ignore_patterns("__pycache__", ".twinbuild")  # build/ is not copied at all
    for part in ("twinbuild", "tests", *COPIED):
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, work / part, ignore=ignore)
        elif src.exists():
            work.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / part)
    pyproject = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(pyproject + _config(target))
    return work


def _mutmut(work: Path, *args: str, check: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # must import the mutants
    env["TWINBUILD_NO_DOCKER"] = "1"
    # pytest's numbered temp folders are shared by every pytest of this user; another run's
    # cleanup can race ours (a warning, an error under filterwarnings=error). One folder per copy.
    env["TMPDIR"] = str(work / "tmp")
    # Nothing a mutant computes may land in the real cache (the inputs hash remembers recipe
    # parses there); the tests' own fixture points it at their temp folder as well.
    env["TWINBUILD_CACHE"] = str(work / "cache")
    (work / "tmp").mkdir(exist_ok=True)
    proc = subprocess.run(
        ["nice", "-n", "19", sys.executable, "-m", "mutmut", *args],
        cwd=work, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise SystemExit(f"mutmut {' '.join(args)} failed in {work} ({proc.returncode}):\n{tail}")
    return proc.stdout


def _function(mutant: str) -> str:
    """``twinbuild.x.x_func__mutmut_3`` -> ``func``; a method ``xǁCǁm__mutmut_1`` -> ``C.m``."""
    last = mutant.rsplit(".", 1)[1].rsplit("__mutmut_", 1)[0]
    if last.startswith("xǁ"):
        return last[2:].replace("ǁ", ".")
    return last.removeprefix("x_")


def changed_lines(work: Path, source: str) -> dict[str, str]:
    """Each mutant's added line(s), by diffing its function with the original in mutants/.

    The same text ``mutmut show`` prints after its "+", without one mutmut process per mutant.
    """
    text = (work / "mutants" / source).read_text()
    lines = text.splitlines()
    bodies: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name:
            # From the def line (a mutated default lives there), named alike in every copy.
            body = lines[node.lineno - 1 : node.end_lineno]
            orig = node.name.rpartition("__mutmut_")[0] + "__mutmut_orig"
            bodies[node.name] = [body[0].replace(node.name, orig), *body[1:]]
    changed: dict[str, str] = {}
    for name, body in bodies.items():
        prefix, _, suffix = name.rpartition("__mutmut_")
        original = bodies.get(f"{prefix}__mutmut_orig")
        if suffix == "orig" or original is None:
            continue
        added = [
            line[1:].strip()
            for line in difflib.unified_diff(original, body, lineterm="", n=0)
            if line.startswith("+") and not line.startswith("+++")
        ]
        changed[name] = " / ".join(added) if added else "(line removed)"
    return changed


def _work(target: Target) -> Path:
    return WORK / re.sub(r"\W+", "-", target.name)


def run(target: Target, max_children: int) -> Outcome:
    work = prepare(target)
    started = time.monotonic()
    _mutmut(work, "run", "--max-children", str(max_children), *target.patterns())
    (work / "seconds.txt").write_text(f"{time.monotonic() - started:.0f}\n")
    return collect(target)


def collect(target: Target) -> Outcome:
    """The results of the last run of ``target`` (from its copy under build/mutate/)."""
    work = _work(target)
    if not (work / "seconds.txt").exists():
        raise SystemExit(f"{work}: no finished run of {target.name!r}; run it first")
    seconds = float((work / "seconds.txt").read_text())
    statuses: dict[str, str] = {}
    for line in _mutmut(work, "results", "--all", "true").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and any(fnmatch.fnmatchcase(name, p) for p in target.patterns()):
            statuses[name] = status
    outcome = Outcome(target=target, seconds=seconds, statuses=statuses)
    lines = changed_lines(work, target.source)
    for name, status in statuses.items():
        if status in KILLED:
            continue
        line = lines.get(name.rsplit(".", 1)[1], "(not found in mutants/)")
        outcome.diffs[name] = line
        why = EQUIVALENT.get((target.name, _function(name), line))
        if why is not None:
            outcome.equivalent[name] = why
    return outcome


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| guard | module | mutants | killed | equivalent | not killed | kill rate | minutes |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for o in outcomes:
        rows.append(
            f"| {o.target.name} | `{o.target.source}` | {len(o.statuses)} | {o.killed} | "
            f"{len(o.equivalent)} | {len(o.missed)} | {o.rate:.1%} | {o.seconds / 60:.1f} |"
        )
    return "\n".join(rows) + "\n"


def details(outcomes: list[Outcome]) -> str:
    lines: list[str] = []
    for o in outcomes:
        for name in o.missed:
            lines.append(f"- {o.target.name}: `{name}` ({o.statuses[name]}): `{o.diffs[name]}`")
        for name, why in o.equivalent.items():
            lines.append(f"- {o.target.name}: `{name}` equivalent: {why}")
    return "\n".join(lines) + ("\n" if lines else "")


def write_docs(text: str) -> None:
    page = DOCS.read_text()
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    DOCS.write_text(page[:start] + "\n" + text + page[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutate", description=__doc__)
    parser.add_argument("--only", action="append", metavar="NAME", help="a target's name")
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutants (1)")
    parser.add_argument("--write-docs", action="store_true", help=f"update {DOCS.name}")
    parser.add_argument(
        "--collect", action="store_true", help="report the last finished runs, run nothing"
    )
    args = parser.parse_args(argv)
    chosen = [t for t in TARGETS if not args.only or t.name in args.only]
    unknown = set(args.only or ()) - {t.name for t in TARGETS}
    if unknown:
        parser.error(f"unknown target {sorted(unknown)}; known: {[t.name for t in TARGETS]}")
    outcomes: list[Outcome] = []
    for target in chosen:
        print(f"mutate: {target.name} ({target.source}) ...", flush=True)
        outcome = collect(target) if args.collect else run(target, args.max_children)
        print(f"  {dict(outcome.counts)} in {outcome.seconds:.0f}s", flush=True)
        outcomes.append(outcome)
    total = sum(o.seconds for o in outcomes)
    report = table(outcomes) + f"\nTotal: {total / 60:.1f} minutes.\n\n" + details(outcomes)
    print(report, end="")
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "report.md").write_text(report)
    if args.write_docs:
        write_docs(report)
    return 0 if all(o.rate >= 0.9 for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
