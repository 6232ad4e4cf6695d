"""`evidence sign` and `evidence verify` on files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.evidence_builders import (
    NOW,
    Signer,
    github_env,
    smoke_report,
    validated,
    write_json,
)
from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.evidence import Blob, dsse, record, save, sign, verify
from twinbuild.util import strictjson

ABOUT = validated(smoke_report("rocm"))


def _statement(tmp_path: Path) -> Path:
    path = write_json(tmp_path / "smoke.json", smoke_report("rocm"))
    statement = record(path, env=github_env(), now=NOW, validated=ABOUT)
    out = tmp_path / "rocm.statement.json"
    save(statement, out)
    return out


def test_sign_then_verify(tmp_path: Path) -> None:
    signer = Signer.new()
    statement_path = _statement(tmp_path)
    signed = sign(
        statement_path, tmp_path / "evidence" / "rocm.dsse.json", key=signer.key, validated=ABOUT
    )
    assert signed.keyid == signer.keyid
    envelope = json.loads(signed.path.read_text())
    assert envelope["payloadType"] == dsse.PAYLOAD_TYPE
    verified = verify(signed.path, trusted=signer.trusted)
    assert verified.keyids == (signer.keyid,)
    assert verified.statement == signed.statement
    assert (verified.statement.predicate.variant, verified.statement.predicate.arch) == (
        "rocm",
        "linux/amd64",
    )


def test_sign_refuses_a_malformed_statement_and_writes_nothing(tmp_path: Path) -> None:
    statement_path = _statement(tmp_path)
    data = json.loads(statement_path.read_text())
    data["predicate"]["run"]["run_id"] = "9001"
    statement_path.write_text(json.dumps(data))
    out = tmp_path / "rocm.dsse.json"
    with pytest.raises(ConfigError) as info:
        sign(statement_path, out, key=Signer.new().key, validated=ABOUT)
    assert str(info.value) == (
        f"{statement_path}: statement.predicate.run.run_id: expected an integer, got str"
    )
    assert not out.exists()


def test_a_failed_sign_keeps_the_previous_evidence(tmp_path: Path) -> None:
    signer = Signer.new()
    statement_path = _statement(tmp_path)
    out = tmp_path / "rocm.dsse.json"
    sign(statement_path, out, key=signer.key, validated=ABOUT)
    before = out.read_bytes()
    statement_path.write_text(statement_path.read_text()[:100])
    with pytest.raises(ConfigError, match="ends early"):
        sign(statement_path, out, key=signer.key, validated=ABOUT)
    assert out.read_bytes() == before


def test_verify_refuses_an_untrusted_signature(tmp_path: Path) -> None:
    out = tmp_path / "rocm.dsse.json"
    sign(_statement(tmp_path), out, key=Signer.new().key, validated=ABOUT)
    with pytest.raises(EvidenceRefused, match="is not trusted"):
        verify(out, trusted=Signer.new().trusted)


def test_the_signed_payload_is_canonical_json(tmp_path: Path) -> None:
    signer = Signer.new()
    out = tmp_path / "rocm.dsse.json"
    signed = sign(_statement(tmp_path), out, key=signer.key, validated=ABOUT)
    envelope = dsse.Envelope.from_dict(strictjson.load(out), source="e")
    text = envelope.payload.decode("utf-8")
    assert json.loads(text) == signed.statement.to_dict()
    # Canonical, by the standard library's spelling of it: keys sorted at every level, no
    # whitespace between tokens, non-ASCII kept as UTF-8.
    assert text == json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert text.startswith('{"_type":"https://in-toto.io/Statement/v1","predicate":{')


def test_sign_in_actions_refuses_a_statement_from_another_run(tmp_path: Path) -> None:
    statement_path = _statement(tmp_path)
    out = tmp_path / "rocm.dsse.json"
    signer = Signer.new()
    sign(statement_path, out, key=signer.key, validated=ABOUT, env=github_env())
    with pytest.raises(EvidenceRefused) as info:
        sign(
            statement_path,
            out,
            key=signer.key,
            validated=ABOUT,
            env=github_env(GITHUB_RUN_ATTEMPT="2"),
        )
    assert str(info.value) == (
        f"{statement_path}: predicate.run.run_attempt: '1' is not this run's "
        "$GITHUB_RUN_ATTEMPT ('2'); sign only the statement this run recorded"
    )


def test_verify_reads_evidence_from_git_objects(tmp_path: Path) -> None:
    signer = Signer.new()
    out = tmp_path / "rocm.dsse.json"
    sign(_statement(tmp_path), out, key=signer.key, validated=ABOUT)
    blob = Blob(name="refs/twinbuild/evidence:evidence/rocm-amd64.dsse.json", data=out.read_bytes())
    assert verify(blob, trusted=signer.trusted).path == blob.name
    with pytest.raises(ConfigError) as info:
        verify(Blob(name=blob.name, data=b""), trusted=signer.trusted)
    assert str(info.value) == f"{blob.name}: empty file; re-run the step that writes it"
