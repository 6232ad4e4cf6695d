"""What a recipe pin is: where it came from, how its name is normalised, when it floats.

The Dockerfile scan (``recipe``) and the RUN command recognisers (``recipe_commands``,
``recipe_pip``) judge values by these rules, so ``ARG TE_COMMIT=...`` and ``export TE_COMMIT=...``
agree, and record what they find through the one ``Scan`` interface defined here.
"""

from __future__ import annotations

import re
from typing import Literal, Protocol

Source = Literal[
    "from", "arg", "pip", "git-clone", "git-checkout", "git-fetch", "curl", "apt", "env", "image"
]

HEX = re.compile(r"[0-9a-f]{7,40}")
SHA40 = re.compile(r"[0-9a-f]{40}")
VERSION = re.compile(r"v?\d+(\.\d+)+([.+-]?[A-Za-z0-9]+)*")
_PIN_ARG = re.compile(r".*_(BRANCH|REF|COMMIT|VERSION|TAG|SHA)$")


def normalize_repo(url: str) -> str:
    """Normalise a repository URL so the same repository compares equal across recipes.

    >>> normalize_repo("git+HTTPS://GitHub.com/NVIDIA/Megatron-LM.git/")
    'https://github.com/nvidia/megatron-lm'
    """
    u = url.strip()
    u = u.removeprefix("git+")
    m = re.match(r"^git@([^:]+):(.*)$", u)
    if m:
        u = f"https://{m.group(1)}/{m.group(2)}"
    u = re.sub(r"^(ssh|git|http)://(git@)?", "https://", u, flags=re.IGNORECASE)
    u = u.rstrip("/").removesuffix(".git").rstrip("/")
    return u if "$" in u else u.lower()


def url_name(url: str) -> str:
    """A URL with its version parts replaced, so the same download matches across versions."""
    return re.sub(
        r"(?<=[/=_-])v?\d+(\.\d+)+(?=[/._-]|$)", "{version}", url.split("?", maxsplit=1)[0]
    )


def default_floating(source: Source, value: str) -> bool:
    """Default floating rule: git refs that are not commits, downloads without a version."""
    if value == "":
        return True
    if "$" in value:
        return False  # decided at build time; the lint checks the variable instead
    if source in ("git-clone", "git-checkout", "git-fetch"):
        return not HEX.fullmatch(value)
    if source == "curl":
        return "latest" in value or not re.search(r"\d+\.\d+", value)
    return False


def names_a_pin(variable: str) -> bool:
    """The variable's name says it holds a pin: ``*_VERSION``, ``*_COMMIT``, ``*_REF`` ..."""
    return bool(_PIN_ARG.match(variable.upper()))


def is_pin_value(name: str, value: str) -> bool:
    """An ARG default is a pin when its name says so or it looks like a commit or a version."""
    if names_a_pin(name):
        return True
    return bool(HEX.fullmatch(value) or VERSION.fullmatch(value))


def variable_floating(name: str, value: str) -> bool:
    """An ARG/ENV pin floats: a branch or tag unless it is a commit, the rest unless versioned."""
    upper = name.upper()
    if SHA40.fullmatch(value) or "$" in value:
        return False
    if upper.endswith(("_BRANCH", "_REF", "_TAG")):
        return not HEX.fullmatch(value)
    return not (HEX.fullmatch(value) or VERSION.fullmatch(value))


class Scan(Protocol):
    """What a recogniser reads (the shell state of the RUN being scanned) and writes (findings)."""

    cwd: str  # the shell's working directory
    scope: dict[str, str]  # ARG/ENV/export values visible here
    clones: dict[str, str]  # directory -> normalised repo URL of what was cloned there
    shell_vars: dict[str, str]  # variables this RUN's shell sets, and what they hold
    shell_undo: dict[str, str | None]  # what the scope held before this RUN set them

    def expand(self, s: str) -> str: ...

    def resolve_dir(self, d: str) -> str: ...

    def pin(
        self,
        *,
        line: int,
        source: Source,
        name: str,
        value: str,
        text: str,
        floating: bool | None = None,
        stdout: bool = False,
        **extra: str | None,
    ) -> None: ...

    def unrecognised(self, line: int, text: str) -> None: ...
