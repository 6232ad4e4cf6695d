"""GitHub's side of its file formats, as the Actions runner reads them, for tests to read back."""

from __future__ import annotations


def runner_outputs(text: str) -> dict[str, str]:
    """Parse $GITHUB_OUTPUT as the Actions runner does (name=value lines and name<<DELIM blocks)."""
    found: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            found[line[:eq]] = line[eq + 1 :]
            continue
        name, delimiter = line[:heredoc], line[heredoc + 2 :]
        body: list[str] = []
        while lines[i] != delimiter:
            body.append(lines[i])
            i += 1
        i += 1
        found[name] = "\n".join(body)
    return found
