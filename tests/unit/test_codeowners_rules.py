"""CODEOWNERS as GitHub reads it: the gate must pick the owner GitHub would, or a PR could be
approved by someone GitHub does not consider an owner (or refused by the one it does).

The rules are GitHub's documented example file ("About code owners") and what it says each line
matches; the last matching line wins. These held already; nothing else pinned them down.
"""

from __future__ import annotations

import pytest

from twinbuild.errors import ConfigError
from twinbuild.util.codeowners import parse

GITHUB_EXAMPLE = """\
# This is a comment.
*       @global-owner1 @global-owner2
*.js    @js-owner #This is an inline comment.
*.go docs@example.com
*.txt @octo-org/octocats
/build/logs/ @doctocat
docs/*  docs@example.com
apps/ @octocat
/docs/ @doctocat
/scripts/ @doctocat @octocat
**/logs @octocat
/apps/ @octocat
/apps/github
/apps/ @octocat
/apps/github
"""


@pytest.mark.parametrize(
    ("path", "owners"),
    [
        ("README.md", ("@global-owner1", "@global-owner2")),
        ("src/deep/app.js", ("@js-owner",)),  # *.js anywhere; the comment is not an owner
        ("build/logs/today/run.txt", ("@octocat",)),  # /build/logs/, but **/logs is later
        ("build/logs.txt", ("@octo-org/octocats",)),  # a team: the gate counts no approval
        ("docs/getting-started.md", ("@doctocat",)),  # docs/* matches, /docs/ comes later
        ("x/docs/getting-started.md", ("@global-owner1", "@global-owner2")),  # a / inside anchors
        ("x/docs/build-app/troubleshooting.md", ("@global-owner1", "@global-owner2")),  # not nested
        ("deeply/nested/logs/x", ("@octocat",)),  # **/logs: any logs folder
        ("apps/github/x.py", ()),  # the last match has no owner: unowned
        ("apps/other.py", ("@octocat",)),
        ("Docs/x.md", ("@global-owner1", "@global-owner2")),  # paths are case-sensitive
    ],
)
def test_the_last_matching_line_decides_as_github_documents(
    path: str, owners: tuple[str, ...]
) -> None:
    rule = parse(GITHUB_EXAMPLE, source="CODEOWNERS").rule_for(path)
    assert rule is not None
    assert rule.owners == owners


@pytest.mark.parametrize("line", ["!docs/ @a", "doc[s]/ @a", "my\\ file @a", "x @not-an-owner!"])
def test_a_line_github_would_skip_is_refused_not_skipped(line: str) -> None:
    with pytest.raises(ConfigError, match=r"^CODEOWNERS:2: "):
        parse(f"* @maintainer\n{line}\n", source="CODEOWNERS")
