"""The exact-pin rule on the PEP 440 cases its normalisation must get right, written out.

Found by mutation testing (``nox -s mutate``); each pair is what PEP 440 says, not what the
function returns (``packaging`` agrees on every one: ``Version(a) == Version(b)``).
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from twinbuild.util.exact_pin import matches


@pytest.mark.parametrize(
    ("pinned", "installed", "expected"),
    [
        ("1", "1.0", True),  # trailing zeros of the release do not count
        ("1.0", "1.0.0", True),
        ("1.0rc1", "1.0rc2", False),  # the pre-release number counts
        ("1.0rc", "1.0rc0", True),  # an implicit pre-release number is 0
        ("1.0.post", "1.0.post0", True),  # an implicit post-release number is 0
        ("1.0.post1", "1.0.post2", False),
        ("1.0.dev1", "1.0", False),  # a dev release is not the release
        ("1.0", "1.0.dev0", False),
        ("1.0.dev1", "1.0.dev2", False),
        ("1.0.dev", "1.0.dev0", True),  # an implicit dev number is 0
    ],
)
def test_pep_440_normalisation(pinned: str, installed: str, expected: bool) -> None:
    assert matches(pinned, installed) is expected
    assert (Version(pinned) == Version(installed)) is expected  # the reference agrees
