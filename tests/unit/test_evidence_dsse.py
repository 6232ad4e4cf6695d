"""DSSE envelopes: the signature covers payload and payloadType; only trusted keys count."""

from __future__ import annotations

import base64
import copy
import hashlib

import pytest
from cryptography.hazmat.primitives import serialization

from tests.unit.evidence_builders import Signer
from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.evidence import dsse


def test_pae_matches_the_dsse_spec_example() -> None:
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_sign_then_verify_returns_the_keyid() -> None:
    signer = Signer.new()
    envelope = dsse.sign(b'{"x":1}', signer.key)
    raw = signer.public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert envelope.signatures[0].keyid == hashlib.sha256(raw).hexdigest()
    assert dsse.verify(envelope, signer.trusted, source="e") == (signer.keyid,)
    again = dsse.Envelope.from_dict(envelope.to_dict(), source="e")
    assert again == envelope


def test_wrong_key_is_refused() -> None:
    signer, other = Signer.new(), Signer.new()
    envelope = dsse.sign(b"{}", other.key)
    with pytest.raises(EvidenceRefused) as info:
        dsse.verify(envelope, signer.trusted, source="e")
    assert str(info.value) == (
        f"e: signature: key {other.keyid[:16]} is not trusted (not in evidence/keys/); "
        "sign with the workflow's key, or add its public key by a PR"
    )


def test_forged_keyid_does_not_verify() -> None:
    signer, other = Signer.new(), Signer.new()
    good = dsse.sign(b"{}", other.key)
    forged = dsse.Envelope(
        payload_type=good.payload_type,
        payload=good.payload,
        signatures=(dsse.Signature(keyid=signer.keyid, sig=good.signatures[0].sig),),
    )
    with pytest.raises(EvidenceRefused) as info:
        dsse.verify(forged, signer.trusted, source="e")
    assert str(info.value) == (
        f"e: signature: does not verify with trusted key {signer.keyid[:16]}; the file changed "
        "after signing, re-run the validation to get fresh evidence"
    )


def test_payload_type_is_checked_and_signed() -> None:
    signer = Signer.new()
    envelope = dsse.sign(b"{}", signer.key, payload_type="application/json")
    with pytest.raises(EvidenceRefused) as info:
        dsse.verify(envelope, signer.trusted, source="e")
    assert str(info.value) == (
        "e: payloadType 'application/json' is not 'application/vnd.in-toto+json'; "
        "only in-toto statements signed by `twinbuild evidence sign` count"
    )


def test_unsigned_and_untrusted() -> None:
    signer = Signer.new()
    unsigned = dsse.Envelope(payload_type=dsse.PAYLOAD_TYPE, payload=b"{}", signatures=())
    with pytest.raises(EvidenceRefused, match="envelope is unsigned"):
        dsse.verify(unsigned, signer.trusted, source="e")
    with pytest.raises(EvidenceRefused) as info:
        dsse.verify(dsse.sign(b"{}", signer.key), {}, source="e")
    assert str(info.value) == (
        "e: signature: no trusted keys in evidence/keys/; a maintainer adds the signing key's "
        "public half there (`twinbuild evidence keygen`)"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "e: expected a DSSE envelope object"),
        (
            {"payloadType": "t", "payload": "", "signatures": [], "extra": 1},
            "e: envelope.extra: unknown key in a DSSE envelope",
        ),
        ({"payload": "", "signatures": []}, "e: envelope.payloadType: expected a string"),
        (
            {"payloadType": "t", "payload": "not base64!", "signatures": []},
            "e: envelope.payload: not valid base64",
        ),
        (
            {"payloadType": "t", "payload": "", "signatures": {}},
            "e: envelope.signatures: expected a list",
        ),
        (
            {"payloadType": "t", "payload": "", "signatures": [{"keyid": "k"}]},
            "e: envelope.signatures[0]: expected an object with keyid and sig",
        ),
        (  # characters outside the alphabet are refused, not skipped over
            {"payloadType": "t", "payload": "aGVsbG8=!", "signatures": []},
            "e: envelope.payload: not valid base64",
        ),
        (
            {"payloadType": "t", "payload": 5, "signatures": []},
            "e: envelope.payload: expected a string",
        ),
        (
            {"payloadType": "t", "payload": "", "signatures": [{"keyid": 5, "sig": ""}]},
            "e: envelope.signatures[0]: keyid and sig are strings",
        ),
        (
            {"payloadType": "t", "payload": "", "signatures": [{"keyid": "k", "sig": 5}]},
            "e: envelope.signatures[0]: keyid and sig are strings",
        ),
        (
            {"payloadType": "t", "payload": "", "signatures": [{"keyid": "k", "sig": "c2ln!"}]},
            "e: envelope.signatures[0].sig: not valid base64",
        ),
    ],
)
def test_malformed_envelope(data: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        dsse.Envelope.from_dict(data, source="e")
    assert str(info.value) == message


def test_to_dict_uses_standard_base64() -> None:
    envelope = dsse.Envelope(payload_type="t", payload=b"\xfb\xff", signatures=())
    assert envelope.to_dict()["payload"] == base64.standard_b64encode(b"\xfb\xff").decode()


def _one_meaning(text: str) -> str:
    """The same bytes spelled otherwise: the last character's unused low bit set (a canonical
    encoding leaves the bits after the data zero, which padding says there are)."""
    body, pad = text.rstrip("="), "=" * (len(text) - len(text.rstrip("=")))
    assert pad, "the attack needs padding, i.e. unused bits"
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    other = body[:-1] + alphabet[alphabet.index(body[-1]) | 1] + pad
    assert other != text
    assert base64.b64decode(other, validate=True) == base64.b64decode(text)
    return other


@pytest.mark.parametrize("field", ["payload", "sig"])
def test_a_second_spelling_of_the_same_bytes_is_refused(field: str) -> None:
    """Base64 with non-zero padding bits decodes to the same bytes: one envelope, two files."""
    signer = Signer.new()
    data = dsse.sign(b'{"a":1}', signer.key).to_dict()
    target = data if field == "payload" else data["signatures"][0]
    target[field] = _one_meaning(target[field])
    with pytest.raises(ConfigError) as info:
        dsse.Envelope.from_dict(data, source="e")
    where = "e: envelope.payload" if field == "payload" else "e: envelope.signatures[0].sig"
    assert str(info.value) == (
        f"{where}: not canonical base64 (padding bits set, or another spelling of the same "
        "bytes); re-sign with `twinbuild evidence sign`"
    )


def test_securesystemslib_verifies_our_envelopes() -> None:
    """The reference DSSE implementation reads and verifies what `evidence sign` writes."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]  # re-exported

    signer = Signer.new()
    ours = dsse.sign(b'{"_type":"https://in-toto.io/Statement/v1"}', signer.key).to_dict()
    theirs = Envelope.from_dict(copy.deepcopy(ours))  # it takes the dict apart as it reads
    key = SSlibKey.from_crypto(signer.public, keyid=signer.keyid)
    assert list(theirs.verify([key], 1)) == [signer.keyid]
    assert theirs.to_dict() == ours  # and it writes the same envelope back
