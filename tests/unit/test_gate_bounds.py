"""Everything the gate parses is bounded: each input over a bound is one line and exit 2, never a
traceback (RecursionError, ValueError from int(), UnicodeDecodeError, a tarfile error)."""

from __future__ import annotations

import pytest

from tests.unit.gate_repos import EVIDENCE_REF, GateRepo, run_gate
from tests.unit.gitrepos import commit_all, git, needs_git
from twinbuild.cli.main import main
from twinbuild.evidence import dsse
from twinbuild.manifest.messages import MAX_DEPTH
from twinbuild.util import strictjson

pytestmark = needs_git

ENVELOPE = '{"payloadType": "application/vnd.in-toto+json", "payload": "e30=", "signatures": []'


def _evidence_commit(gate_repo: GateRepo, data: bytes) -> None:
    """Replace cuda's evidence on validate/pr-42 with ``data``, as a forged push would."""
    git(gate_repo.root, "checkout", "-q", "validate/pr-42")
    (gate_repo.root / "evidence/cuda-amd64.dsse.json").write_bytes(data)
    commit_all(gate_repo.root, "forged evidence")
    git(gate_repo.root, "checkout", "-q", "pr-42")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            (ENVELOPE + ', "n": ' + "1" * 5000 + "}").encode(),
            "a number of 5000 digits is larger than any evidence field; re-create the file",
        ),
        (
            b"[" * 100_000 + b"]" * 100_000,
            f"objects and arrays nested 100000 deep, over the limit of {strictjson.MAX_DEPTH}; "
            "evidence nests a few levels, re-create the file",
        ),
        (
            (ENVELOPE + ', "x": 1.' + "5" * 400 + "}").encode(),
            "a number of 402 characters is longer than any evidence field; re-create the file",
        ),
        (b'{"a": "\xff"}', "byte 7 is not UTF-8; evidence is UTF-8 JSON, re-create the file"),
        (
            b" " * (strictjson.MAX_BYTES + 1),
            f"over the {strictjson.MAX_BYTES}-byte limit of what is read here; "
            "is this the right file?",
        ),
    ],
    ids=["5000-digit-int", "nested-100000", "long-float", "not-utf8", "oversize"],
)
def test_a_hostile_envelope_is_one_line_and_exit_2(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str], data: bytes, message: str
) -> None:
    _evidence_commit(gate_repo, data)
    code, out, err = run_gate(capsys, gate_repo.tested, "--base", gate_repo.base)
    where = f"{EVIDENCE_REF}:evidence/cuda-amd64.dsse.json"
    assert (code, out) == (2, [])
    assert err == [f"twinbuild: {where}: {message}"]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"[" * 50_000 + b"]" * 50_000, "objects and arrays nested 50000 deep"),
        (
            b'{"n": ' + b"9" * 5000 + b"}",
            "a number of 5000 digits is larger than any evidence field",
        ),
    ],
    ids=["nested", "5000-digit-int"],
)
def test_a_hostile_payload_signed_with_the_key_is_one_line(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str], payload: bytes, message: str
) -> None:
    envelope = dsse.sign(payload, gate_repo.signer.key)
    _evidence_commit(gate_repo, strictjson.dumps(envelope.to_dict()).encode())
    code, _, err = run_gate(capsys, gate_repo.tested, "--base", gate_repo.base)
    assert (code, len(err)) == (2, 1)
    assert err[0].startswith(
        f"twinbuild: {EVIDENCE_REF}:evidence/cuda-amd64.dsse.json: payload: {message}"
    )


def test_a_symlinked_evidence_file_is_refused(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(gate_repo.root, "checkout", "-q", "validate/pr-42")
    target = gate_repo.root / "evidence/cuda-amd64.dsse.json"
    target.unlink()
    target.symlink_to("/etc/passwd")
    commit_all(gate_repo.root, "symlinked evidence")
    git(gate_repo.root, "checkout", "-q", "pr-42")
    code, _, err = run_gate(capsys, gate_repo.tested, "--base", gate_repo.base)
    assert (code, err) == (
        2,
        [
            f"twinbuild: {EVIDENCE_REF}:evidence/cuda-amd64.dsse.json: a symlink (mode 120000); "
            "evidence is a regular file, re-run the validation"
        ],
    )


def _head_manifest(gate_repo: GateRepo, data: bytes) -> str:
    (gate_repo.root / "pins/manifest.toml").write_bytes(data)
    return commit_all(gate_repo.root, "hostile manifest")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'schema = 1\nx = "\xff"\n',
            "pins/manifest.toml:2: not UTF-8 (byte 0xff); save the manifest as UTF-8",
        ),
        (
            b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n",
            f"pins/manifest.toml: tables or arrays nested more than {MAX_DEPTH} deep; a manifest "
            "nests a few levels (pins.NAME.VARIANT.KEY), fix the file",
        ),
        (
            b"x = " + b"[" * 100 + b"]" * 100 + b"\n",
            f"pins/manifest.toml: tables or arrays nested more than {MAX_DEPTH} deep; a manifest "
            "nests a few levels (pins.NAME.VARIANT.KEY), fix the file",
        ),
        (
            b"x = " + b"1" * 5000 + b"\n",
            "pins/manifest.toml:1: a number with over 4300 digits; a manifest holds no such "
            "number, is this the right file?",
        ),
        (
            b"# big\n" * 800_000,
            "pins/manifest.toml: over the 4194304-byte limit of what is read here; "
            "is this the right file?",
        ),
    ],
    ids=["not-utf8", "nested-5000", "nested-100", "5000-digit-int", "oversize"],
)
def test_a_hostile_head_manifest_is_one_line_and_exit_2(
    gate_repo: GateRepo, capsys: pytest.CaptureFixture[str], data: bytes, message: str
) -> None:
    head = _head_manifest(gate_repo, data)
    code, out, err = run_gate(capsys, head, "--base", gate_repo.base)
    assert (code, out) == (2, [])
    assert err == [f"twinbuild: {head}:{message}"]


@pytest.mark.parametrize("days", ["1e308", "nan", "-1", "inf"])
def test_max_age_is_bounded_before_timedelta_sees_it(days: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["evidence", "gate", "--head", "HEAD", "--max-age-days", days])
    assert info.value.code == 2
