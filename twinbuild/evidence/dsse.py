"""DSSE envelopes (github.com/secure-systems-lab/dsse): sign and verify with ed25519.

The signature covers ``PAE(payloadType, payload)``, so neither the payload nor its declared type can
change after signing. Signing and verifying never parse the payload; the caller does that after
:func:`verify` has said whose signature it carries.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinbuild.errors import ConfigError, EvidenceRefused
from twinbuild.evidence.keys import keyid, keys_folder

PAYLOAD_TYPE = "application/vnd.in-toto+json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "payloadType": self.payload_type,
            "payload": base64.standard_b64encode(self.payload).decode("ascii"),
            "signatures": [
                {"keyid": s.keyid, "sig": base64.standard_b64encode(s.sig).decode("ascii")}
                for s in self.signatures
            ],
        }

    @classmethod
    def from_dict(cls, data: object, *, source: str) -> Envelope:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a DSSE envelope object")
        unknown = sorted(set(data) - {"payloadType", "payload", "signatures"})
        if unknown:
            raise ConfigError(f"{source}: envelope.{unknown[0]}: unknown key in a DSSE envelope")
        payload_type = _text(data, "payloadType", source)
        payload = _b64(_text(data, "payload", source), f"{source}: envelope.payload")
        sigs = data.get("signatures")
        if not isinstance(sigs, list):
            raise ConfigError(f"{source}: envelope.signatures: expected a list")
        signatures = []
        for i, item in enumerate(sigs):
            where = f"{source}: envelope.signatures[{i}]"
            if not isinstance(item, dict) or set(item) != {"keyid", "sig"}:
                raise ConfigError(f"{where}: expected an object with keyid and sig")
            kid, sig = item["keyid"], item["sig"]
            if not isinstance(kid, str) or not isinstance(sig, str):
                raise ConfigError(f"{where}: keyid and sig are strings")
            signatures.append(Signature(keyid=kid, sig=_b64(sig, f"{where}.sig")))
        return cls(payload_type=payload_type, payload=payload, signatures=tuple(signatures))


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: what is actually signed."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def sign(payload: bytes, key: Ed25519PrivateKey, *, payload_type: str = PAYLOAD_TYPE) -> Envelope:
    signature = Signature(keyid=keyid(key.public_key()), sig=key.sign(pae(payload_type, payload)))
    return Envelope(payload_type=payload_type, payload=payload, signatures=(signature,))


def verify(
    envelope: Envelope, trusted: Mapping[str, Ed25519PublicKey], *, source: str
) -> tuple[str, ...]:
    """The keyids that signed ``envelope``; refused unless every signature verifies with a trusted
    key and the payload is an in-toto statement."""
    if envelope.payload_type != PAYLOAD_TYPE:
        raise EvidenceRefused(
            f"{source}: payloadType {envelope.payload_type!r} is not {PAYLOAD_TYPE!r}; "
            "only in-toto statements signed by `twinbuild evidence sign` count"
        )
    if not envelope.signatures:
        raise EvidenceRefused(
            f"{source}: signature: the envelope is unsigned; run `twinbuild evidence sign`"
        )
    if not trusted:
        raise EvidenceRefused(
            f"{source}: signature: no trusted keys in {keys_folder(trusted)}; a maintainer adds "
            "the signing key's public half there (`twinbuild evidence keygen`)"
        )
    message = pae(envelope.payload_type, envelope.payload)
    for signature in envelope.signatures:
        key = trusted.get(signature.keyid)
        if key is None:
            raise EvidenceRefused(
                f"{source}: signature: key {signature.keyid[:16]} is not trusted (not in "
                f"{keys_folder(trusted)}); sign with the workflow's key, or add its public key "
                "by a PR"
            )
        try:
            key.verify(signature.sig, message)
        except InvalidSignature:
            raise EvidenceRefused(
                f"{source}: signature: does not verify with trusted key {signature.keyid[:16]}; "
                "the file changed after signing, re-run the validation to get fresh evidence"
            ) from None
    return tuple(s.keyid for s in envelope.signatures)


def _text(data: dict[str, Any], key: str, source: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ConfigError(f"{source}: envelope.{key}: expected a string")
    return value


def _b64(text: str, where: str) -> bytes:
    """Standard base64 with padding, spelled the one way it encodes: ``QR==`` decodes to what
    ``QQ==`` does (the bits after the data are ignored), so without this check one signed
    envelope has many spellings, and two files that differ carry the same evidence."""
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{where}: not valid base64") from None
    if base64.standard_b64encode(data).decode("ascii") != text:
        raise ConfigError(
            f"{where}: not canonical base64 (padding bits set, or another spelling of the same "
            "bytes); re-sign with `twinbuild evidence sign`"
        )
    return data
