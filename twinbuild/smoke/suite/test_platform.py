"""The architecture the image runs as, the environment the recipe sets, the diagnostic binaries,
and the key imports."""

from __future__ import annotations

import re
from typing import Any

import pytest

from twinbuild.manifest.model import MACHINES
from twinbuild.smoke.spec import EnvCase, SuiteSpec
from twinbuild.smoke.suite.remote import run_argv

_VAR = re.compile(r"\$\{\w+(?::?[-+][^}]*)?\}|\$\w+")


def env_pattern(value: str) -> re.Pattern[str]:
    """The recipe's value as a pattern; a ``$VAR`` left unresolved (the base's) matches anything."""
    parts = _VAR.split(value)
    return re.compile(".*".join(re.escape(p) for p in parts), re.DOTALL)


def _last_line(result: Any) -> str:
    """The last line a failed command wrote on stderr: what the failure message quotes."""
    return str((result.stderr.strip().splitlines() or ["(no output)"])[-1])


def test_architecture(spec: SuiteSpec, host: Any) -> None:
    """Its interpreter runs as the architecture the image is for (under QEMU where that is not
    this machine's): an arm64 image that holds x86_64 programs is not an arm64 image."""
    want = MACHINES.get(spec.arch, spec.arch)  # type: ignore[call-overload]
    result = run_argv(host, [spec.python, "-c", "import platform; print(platform.machine())"])
    found = result.stdout.strip() if result.rc == 0 else f"nothing ({_last_line(result)})"
    if found != want:
        pytest.fail(f"architecture: expected {spec.arch} ({want}), found {found}", pytrace=False)


def test_env(env_case: EnvCase, spec: SuiteSpec, request: pytest.FixtureRequest) -> None:
    if spec.env_skip is not None:
        pytest.skip(spec.env_skip)
    # Asked for only here: a skipped ENV check never reads the environment.
    env: dict[str, str] = request.getfixturevalue("environment")
    found = env.get(env_case.key)
    expected = f"{env_case.key}={env_case.value} (set at {env_case.where})"
    if found is None:
        pytest.fail(f"env: expected {expected}, found {env_case.key} unset", pytrace=False)
    if not env_pattern(env_case.value).fullmatch(found):
        pytest.fail(f"env: expected {expected}, found {env_case.key}={found}", pytrace=False)


def test_binary(binary: str, spec: SuiteSpec, host: Any) -> None:
    if spec.binaries_skip is not None:
        pytest.skip(spec.binaries_skip)
    if "/" not in binary:
        where = host.run("command -v %s", binary)
        if where.rc != 0:
            pytest.fail(f"binary {binary}: expected on PATH, found nothing", pytrace=False)
        binary = where.stdout.strip()
    f = host.file(binary)
    if not f.exists:
        pytest.fail(f"binary {binary}: expected an executable file, found nothing", pytrace=False)
    if not f.is_file or not f.mode & 0o111:
        pytest.fail(
            f"binary {binary}: expected an executable file, found mode {f.mode:o}", pytrace=False
        )


def test_import(module: str, spec: SuiteSpec, host: Any) -> None:
    result = run_argv(host, [spec.python, "-c", f"import {module}"])
    if result.rc != 0:
        pytest.fail(
            f"import {module} with {spec.python}: expected success, found {_last_line(result)}",
            pytrace=False,
        )
