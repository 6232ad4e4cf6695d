"""Keys: trusted public keys from the repository, the private key from a secret, never the tree."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.unit.evidence_builders import Signer
from twinbuild.errors import ConfigError
from twinbuild.evidence import keys


def _pem(signer: Signer) -> bytes:
    return signer.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _raw_b64(signer: Signer) -> str:
    raw = signer.key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return base64.b64encode(raw).decode()


def test_trusted_keys_read_pem_and_raw_base64(tmp_path: Path) -> None:
    a, b = Signer.new(), Signer.new()
    (tmp_path / "a.pub").write_bytes(
        a.public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    raw = b.public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    (tmp_path / "b.pub").write_text(base64.b64encode(raw).decode() + "\n")
    (tmp_path / "README.md").write_text("not a key")
    assert sorted(keys.load_trusted(tmp_path)) == sorted([a.keyid, b.keyid])


def test_missing_keys_folder_means_no_trusted_key(tmp_path: Path) -> None:
    assert keys.load_trusted(tmp_path / "absent") == {}


def test_a_non_ed25519_public_key_is_refused(tmp_path: Path) -> None:
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    (tmp_path / "ec.pub").write_bytes(pem)
    with pytest.raises(ConfigError) as info:
        keys.load_trusted(tmp_path)
    path = tmp_path / "ec.pub"
    assert str(info.value) == f"{path}: not an ed25519 key; evidence keys are ed25519"


def test_garbage_public_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.pub").write_text("hello")
    with pytest.raises(ConfigError) as info:
        keys.load_trusted(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'x.pub'}: not an ed25519 public key (PEM, or base64 of the raw 32 bytes)"
    )


@pytest.mark.parametrize("form", ["pem", "raw"])
def test_private_key_from_env(form: str) -> None:
    signer = Signer.new()
    value = _pem(signer).decode() if form == "pem" else _raw_b64(signer)
    key = keys.load_private(env={"TWINBUILD_EVIDENCE_KEY": value})
    assert keys.keyid(key.public_key()) == signer.keyid


def test_private_key_env_unset() -> None:
    with pytest.raises(ConfigError) as info:
        keys.load_private(env={})
    assert str(info.value) == (
        "$TWINBUILD_EVIDENCE_KEY is not set; the workflow passes the signing key from a secret "
        "(or give --key PATH to a file outside the repository)"
    )


def test_private_key_file_inside_a_work_tree_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    path = repo / "secrets" / "key.pem"
    path.parent.mkdir()
    path.write_bytes(_pem(Signer.new()))
    with pytest.raises(ConfigError) as info:
        keys.load_private(env={}, path=path)
    assert str(info.value) == (
        f"{path}: a private key inside the git work tree {repo.resolve()} can be committed by "
        "accident; move it outside the repository or pass it in $TWINBUILD_EVIDENCE_KEY"
    )


def test_private_key_file_outside_the_tree(tmp_path: Path) -> None:
    signer = Signer.new()
    path = tmp_path / "key.pem"
    path.write_bytes(_pem(signer))
    assert keys.keyid(keys.load_private(env={}, path=path).public_key()) == signer.keyid


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    pair = keys.keygen(tmp_path / "evidence.key", tmp_path / "keys" / "ci.pub")
    assert stat.S_IMODE((tmp_path / "evidence.key").stat().st_mode) == 0o600
    assert list(keys.load_trusted(tmp_path / "keys")) == [pair.keyid]
    signing = keys.load_private(env={}, path=tmp_path / "evidence.key")
    assert keys.keyid(signing.public_key()) == pair.keyid
    with pytest.raises(ConfigError) as info:
        keys.keygen(tmp_path / "evidence.key", tmp_path / "other.pub")
    assert str(info.value) == f"{tmp_path / 'evidence.key'}: exists; keygen never overwrites a key"


def test_keygen_refuses_the_work_tree(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    with pytest.raises(ConfigError, match="refusing to write a private key inside the git work"):
        keys.keygen(tmp_path / "k", tmp_path / "k.pub")
    assert not (tmp_path / "k").exists()
