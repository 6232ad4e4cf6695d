"""``twinbuild evidence ...``: the parser; handlers (and cryptography) load only when one runs."""

from __future__ import annotations

import argparse

from twinbuild.cli.common import Handler
from twinbuild.manifest.model import DEFAULT_PATH, PLATFORMS


def _handler(name: str) -> Handler:
    """A handler of twinbuild.cli.evidence_handlers, imported when it runs."""

    def handler(args: argparse.Namespace) -> int:
        from twinbuild.cli import evidence_handlers

        func: Handler = getattr(evidence_handlers, name)
        return func(args)

    return handler


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser("evidence", help="record, sign, verify and gate on GPU evidence")
    ev = group.add_subparsers(dest="evidence_command", required=True, metavar="EVIDENCE_COMMAND")
    p = ev.add_parser("record", help="build the in-toto statement from a smoke report")
    p.add_argument("--platform", choices=PLATFORMS, required=True)
    p.add_argument(
        "--report-dir",
        required=True,
        help="folder holding the smoke report smoke-<platform>-<profile>.json",
    )
    p.add_argument("--out", required=True, help="folder for <platform>.statement.json")
    p.add_argument("--pr", type=int, help="the pull request this validates")
    p.set_defaults(func=_handler("cmd_record"))
    p = ev.add_parser("sign", help="sign statements into DSSE envelopes (ed25519)")
    p.add_argument("--in", dest="in_", required=True, help="folder searched for *.statement.json")
    p.add_argument("--out", required=True, help="folder for <platform>.dsse.json")
    p.add_argument("--key", help="private key file outside the work tree (default: env secret)")
    p.set_defaults(func=_handler("cmd_sign"))
    p = ev.add_parser("verify", help="check signatures and structure")
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument(
        "--image", metavar="REPO@sha256:DIGEST",
        help="fetch and verify the evidence `release` stored next to this image in its registry",
    )  # fmt: skip
    p.add_argument("--keys", default="evidence/keys", help="trusted public keys folder")
    p.set_defaults(func=_handler("cmd_verify"))
    p = ev.add_parser("gate", help="does the evidence count for this PR head?")
    p.add_argument("--head", required=True, help="the PR head commit (40 hex)")
    p.add_argument("--base", help="the PR base commit (informational)")
    p.add_argument("--evidence-ref", help="git ref carrying evidence/<platform>.dsse.json")
    p.add_argument("--evidence", action="append", default=[], help="an evidence file")
    p.add_argument("--keys", default="evidence/keys")
    p.add_argument("--manifest", default=str(DEFAULT_PATH))
    p.add_argument("--max-age-days", type=float, default=14.0)
    p.add_argument("--same-commit", action="store_true", help="accept the head commit only")
    p.add_argument("--default-branch", default="main")
    p.add_argument("--pr", type=int)
    p.add_argument("--summary", help="append the verdict as markdown to this file")
    p.set_defaults(func=_handler("cmd_gate"))
    p = ev.add_parser("keygen", help="make an ed25519 key pair for signing evidence")
    p.add_argument("--private", required=True)
    p.add_argument("--public", required=True)
    p.set_defaults(func=_handler("cmd_keygen"))
