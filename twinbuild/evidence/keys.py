"""Ed25519 keys: trusted public keys from the repository, the private key from a secret.

A keyid is the sha256 (hex) of the raw 32-byte public key, so anyone can recompute it from a file
in ``evidence/keys/``. A private key never lives in the work tree: it comes from an environment
variable (the workflow's secret) or a file outside the repository.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from twinbuild.errors import ConfigError
from twinbuild.util import bounded
from twinbuild.util.atomic import discard_own, leftovers, resolve_target, temporary
from twinbuild.util.signals import held

KEY_ENV = "TWINBUILD_EVIDENCE_KEY"
KEYS_DIR = Path("evidence/keys")
_MAX_KEY_BYTES = 16 * 1024
_NOT_ED25519 = "not an ed25519 key; evidence keys are ed25519"


def keyid(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def parse_public_key(data: bytes, *, source: str) -> Ed25519PublicKey:
    """A PEM ``PUBLIC KEY`` or the base64 of the raw 32 bytes."""
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(text)
        except UnsupportedAlgorithm:  # SM2, and curves this OpenSSL lacks: not ed25519 either
            raise ConfigError(f"{source}: {_NOT_ED25519}") from None
        except ValueError:
            raise ConfigError(f"{source}: not a readable PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise ConfigError(f"{source}: {_NOT_ED25519}")
        return key
    raw = _raw32(text, source, "public")
    return Ed25519PublicKey.from_public_bytes(raw)


def parse_private_key(data: bytes, *, source: str) -> Ed25519PrivateKey:
    """An unencrypted PEM ``PRIVATE KEY`` (PKCS#8) or the base64 of the raw 32-byte seed."""
    text = data.strip()
    if text.startswith(b"-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(text, password=None)
        except UnsupportedAlgorithm:
            raise ConfigError(f"{source}: {_NOT_ED25519}") from None
        except (ValueError, TypeError):
            raise ConfigError(
                f"{source}: not a readable unencrypted PEM private key; "
                "create one with `twinbuild evidence keygen`"
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"{source}: {_NOT_ED25519}")
        return key
    return Ed25519PrivateKey.from_private_bytes(_raw32(text, source, "private"))


def _raw32(text: bytes, source: str, kind: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise ConfigError(
            f"{source}: not an ed25519 {kind} key (PEM, or base64 of the raw 32 bytes)"
        )
    return raw


class TrustedKeys(dict[str, Ed25519PublicKey]):
    """Trusted public keys by keyid, and the folder they came from (``--keys``), which a
    refusal names: "not in evidence/keys/" about keys read from elsewhere misleads."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder


def keys_folder(trusted: Mapping[str, Ed25519PublicKey]) -> str:
    """Where ``trusted`` came from, for a message (``evidence/keys/`` unless it says)."""
    folder = trusted.folder if isinstance(trusted, TrustedKeys) else KEYS_DIR
    return f"{folder.as_posix().rstrip('/')}/"


def load_trusted(directory: Path = KEYS_DIR) -> TrustedKeys:
    """Every ``*.pub`` in ``directory`` by keyid; a missing folder means no trusted key.

    The folder and each key are read only as what they are, never through a link: the keys come
    from a checkout of the default branch, where a committed link would let its target (docs/,
    say: no trust root) decide who may sign.
    """
    keys = TrustedKeys(directory)
    _not_a_link(directory)
    if not directory.is_dir():
        return keys
    for path in sorted(directory.glob("*.pub")):
        _not_a_link(path)
        key = parse_public_key(_read_small(path), source=str(path))
        keys[keyid(key)] = key
    return keys


def load_private(
    *, env: Mapping[str, str], path: Path | None = None, env_var: str = KEY_ENV
) -> Ed25519PrivateKey:
    """The signing key from ``path`` (outside any git work tree) or else from ``env[env_var]``."""
    if path is not None:
        tree = work_tree_of(path, name="--key")
        if tree is not None:
            raise ConfigError(
                f"{path}: a private key inside the git work tree {tree} can be committed by "
                f"accident; move it outside the repository or pass it in ${env_var}"
            )
        return parse_private_key(_read_small(path), source=str(path))
    value = env.get(env_var, "")
    if not value.strip():
        raise ConfigError(
            f"${env_var} is not set; the workflow passes the signing key from a secret "
            "(or give --key PATH to a file outside the repository)"
        )
    return parse_private_key(value.encode("utf-8"), source=f"${env_var}")


def work_tree_of(path: Path, *, name: str) -> Path | None:
    """The git work tree that contains ``path``, if any (found by its ``.git`` entry); ``name``
    is the option that gave the path (a link loop is refused naming it)."""
    for parent in bounded.resolve(path, name=name).parents:
        if (parent / ".git").exists():
            return parent
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyPair:
    keyid: str
    private_path: Path
    public_path: Path
    finished: bool = False  # a killed keygen's pair, finished by this run


def keygen(private_path: Path, public_path: Path) -> KeyPair:
    """Write a new key pair: the private key (0600, outside the work tree) and its public PEM.

    Both are written to temporary files first; then the private key is linked into place (a
    link never replaces a file: a key that appeared meanwhile is kept) and the public file
    renamed over its path. Stopped (Ctrl-C, SIGTERM, a full disk) it keeps both keys or
    neither. Killed (SIGKILL) between the two steps, it leaves the private key and the
    temporary files of that run; the next run finds them, sees the run is gone and finishes
    it (:func:`_finish_killed`) instead of refusing the key as one it must not overwrite.
    """
    tree = work_tree_of(private_path, name="--private")
    if tree is not None:
        raise ConfigError(
            f"{private_path}: refusing to write a private key inside the git work tree {tree}; "
            "write it outside the repository and store it as the workflow secret"
        )
    if os.path.realpath(private_path) == os.path.realpath(public_path):
        raise ConfigError(
            f"--private and --public are the same file ({public_path}); the public key would "
            "overwrite the private one: pass two different paths"
        )
    finished = _finish_killed(private_path, public_path)
    if finished is not None:
        return finished
    if private_path.exists() or private_path.is_symlink():
        raise _exists(private_path)
    public_target = resolve_target(public_path)  # a link leading out is refused before all
    _check_public_target(public_path)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    linked = published = False
    try:
        for folder in (private_path.parent, public_target.parent):  # as write_atomic makes them
            folder.mkdir(parents=True, exist_ok=True)
        private_tmp = temporary(resolve_target(private_path), private_pem, mode=0o600)
        public_tmp = temporary(public_target, public_pem, mode=0o644)
        with held():  # the two steps that publish the pair: a signal waits until both are done
            try:
                os.link(private_tmp, private_path)
            except FileExistsError:  # made meanwhile by someone else: theirs, kept
                raise _exists(private_path) from None
            linked = True
            public_tmp.replace(public_target)
            published = True
    except BaseException as exc:  # a refusal, a full disk, Ctrl-C or SIGTERM mid-write
        if linked and not published:
            private_path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ConfigError(
                f"{private_path}: cannot write the key pair: {exc.strerror or exc}; nothing was "
                "written, check the folders exist and are writable"
            ) from None
        raise
    finally:
        with held():  # the temporary files, whenever a signal came
            discard_own(private_path)
            discard_own(public_target)
    return KeyPair(
        keyid=keyid(key.public_key()), private_path=private_path, public_path=public_path
    )


def _exists(private_path: Path) -> ConfigError:
    return ConfigError(f"{private_path}: exists; keygen never overwrites a key")


def _finish_killed(private_path: Path, public_path: Path) -> KeyPair | None:
    """The pair a killed keygen left half-done at these paths, finished; None when there is none.

    That run's private temporary file is a second link to ``private_path`` (the same file), and
    its public temporary file, if it had not been renamed yet, holds the public half of that
    key: both are this run's to finish, since no process of that id is alive.
    """
    if not private_path.is_file() or private_path.is_symlink():
        return None
    mine = [(tmp, pid) for tmp, pid in leftovers(private_path) if tmp.samefile(private_path)]
    if not mine:
        return None
    key = parse_private_key(_read_small(private_path), source=str(private_path))
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public_target = resolve_target(public_path)
    pids = {pid for _, pid in mine}
    for tmp, pid in leftovers(public_target):
        if pid in pids and tmp.read_bytes() == public_pem:
            tmp.replace(public_target)
    if not public_target.is_file() or public_target.read_bytes() != public_pem:
        return None  # not the pair this keygen asks for: the rule for an existing key applies
    for tmp, _ in mine:
        tmp.unlink(missing_ok=True)
    return KeyPair(
        keyid=keyid(key.public_key()), private_path=private_path, public_path=public_path,
        finished=True,
    )  # fmt: skip


def _check_public_target(path: Path) -> None:
    """An existing public file may only be one of our public keys (a rotation), never a README."""
    if not path.exists():  # nothing there, or a link to nothing yet: the file it names is made
        return
    try:
        parse_public_key(_read_small(path), source=str(path))
    except ConfigError:
        raise ConfigError(
            f"{path}: exists and is not an ed25519 public key; keygen replaces only a public "
            "key it wrote: pass a new path, e.g. evidence/keys/NAME.pub"
        ) from None


def _not_a_link(path: Path) -> None:
    if path.is_symlink():
        raise ConfigError(
            f"{path}: a symlink; a trusted key is a file committed in evidence/keys/ (a link lets "
            "what it points at, which is no trust root, decide): replace the link with the key"
        )


def _read_small(path: Path) -> bytes:
    return bounded.read_bytes(
        path, limit=_MAX_KEY_BYTES, what="key file", missing="no such key file"
    )
