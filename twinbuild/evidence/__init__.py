"""Signed GPU evidence: record a smoke run as an in-toto statement, sign it, verify it, gate on it.

``record`` builds the statement from a smoke report and the GitHub Actions environment, ``sign``
wraps it in a DSSE envelope signed with ed25519, ``verify`` checks signature and structure, and
``gate`` decides whether the evidence counts for a pull request (see docs/trust.md).
"""

from __future__ import annotations

from twinbuild.evidence.evidence_check import Accepted, GateRefused, GateResult, Policy, gate
from twinbuild.evidence.keys import keygen, load_private, load_trusted
from twinbuild.evidence.record_statement import record, save
from twinbuild.evidence.signing import Blob, Signed, Verified, sign, sign_all, verify

__all__ = [
    "Accepted",
    "Blob",
    "GateRefused",
    "GateResult",
    "Policy",
    "Signed",
    "Verified",
    "gate",
    "keygen",
    "load_private",
    "load_trusted",
    "record",
    "save",
    "sign",
    "sign_all",
    "verify",
]
