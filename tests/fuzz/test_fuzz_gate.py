"""The evidence gate's parsers: envelopes as bytes, and statements a trusted key signed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from tests.fuzz.conftest import outcome
from tests.fuzz.strategies import as_bytes, json_edit, mutated
from tests.unit.evidence_builders import (
    HEAD,
    NOW,
    REPO,
    REPO_ID,
    REQUIRED,
    Signer,
    evidence,
    payload_of,
    resign,
)
from twinbuild.evidence import Policy, gate

POLICY = Policy(
    base_repository=REPO, base_repository_id=REPO_ID, head_commit=HEAD, pr=42, required=REQUIRED
)
SIGNER = Signer.new()


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return evidence(tmp_path_factory.mktemp("evidence"), SIGNER, "cuda")


def _gate(path: Path) -> object:
    return gate([path], policy=POLICY, trusted=SIGNER.trusted, now=NOW)


def test_the_seed_parses(signed: Path, tmp_path: Path) -> None:
    # both platforms are needed to pass; one well-formed file gets as far as that refusal
    result = outcome(lambda: _gate(signed), folder=tmp_path)
    assert "rocm" in str(result)


def test_any_envelope_bytes(signed: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    seed = signed.read_text()
    folder = tmp_path_factory.mktemp("bytes")

    @given(data=as_bytes(mutated([seed])))
    def run(data: bytes) -> None:
        path = folder / "cuda.dsse.json"
        path.write_bytes(data)
        outcome(lambda: _gate(path), folder=folder)

    run()


def test_any_statement_a_trusted_key_signed(
    signed: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    payload = payload_of(signed)
    folder = tmp_path_factory.mktemp("signed")

    @given(doc=json_edit(payload))
    def run(doc: Any) -> None:
        path = resign(folder / "cuda.dsse.json", doc, SIGNER)
        outcome(lambda: _gate(path), folder=folder)

    run()
