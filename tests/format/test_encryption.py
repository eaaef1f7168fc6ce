"""``format/_encryption.py``: the two classes, their key files, and the dataset-side checks."""

from __future__ import annotations

import json
import pickle
from typing import TYPE_CHECKING

import pytest

from litstream import ConfigurationError, EncryptionError, FernetEncryption, FormatError, RSAEncryption
from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._encrypted import check_encryption, check_writer_encryption, decrypt_chunk, encrypt_chunk

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def fernet() -> FernetEncryption:
    return FernetEncryption("s3cret", level="sample")


@pytest.fixture(scope="module")
def rsa() -> RSAEncryption:
    return RSAEncryption("s3cret", level="chunk")


def test_fernet_round_trip_and_key_file(fernet: FernetEncryption, tmp_path: Path) -> None:
    token = fernet.encrypt(b"hello")
    assert token != b"hello"
    assert fernet.decrypt(token) == b"hello"
    fernet.save(tmp_path / "key.json")
    state = json.loads((tmp_path / "key.json").read_text())
    assert set(state) == {"algorithm", "level", "salt"}
    assert (state["algorithm"], state["level"]) == ("fernet", "sample")
    again = FernetEncryption.load(tmp_path / "key.json", "s3cret")
    assert (again.key, again.level) == (fernet.key, "sample")
    assert again.decrypt(token) == b"hello"


def test_fernet_with_a_wrong_password_cannot_decrypt(fernet: FernetEncryption, tmp_path: Path) -> None:
    fernet.save(tmp_path / "key.json")
    wrong = FernetEncryption.load(tmp_path / "key.json", "not it")
    with pytest.raises(EncryptionError, match="wrong password or key file"):
        wrong.decrypt(fernet.encrypt(b"x"))


def test_same_password_new_object_is_a_new_key(fernet: FernetEncryption) -> None:
    other = FernetEncryption("s3cret")
    assert other.salt != fernet.salt
    with pytest.raises(EncryptionError):
        other.decrypt(fernet.encrypt(b"x"))


def test_objects_survive_pickling(fernet: FernetEncryption, rsa: RSAEncryption) -> None:
    for enc in (fernet, rsa):
        copy = pickle.loads(pickle.dumps(enc))
        assert (copy.algorithm, copy.level) == (enc.algorithm, enc.level)
        assert copy.decrypt(enc.encrypt(b"abc")) == b"abc"


def test_rsa_round_trip_limit_and_key_files(rsa: RSAEncryption, tmp_path: Path) -> None:
    assert rsa.decrypt(rsa.encrypt(b"x" * 190)) == b"x" * 190
    with pytest.raises(EncryptionError, match="at most 190 bytes, got 191"):
        rsa.encrypt(b"x" * 191)
    rsa.save(tmp_path / "rsa.json")
    state = json.loads((tmp_path / "rsa.json").read_text())
    assert set(state) == {"private_key", "public_key", "password", "level"}
    assert "ENCRYPTED" in state["private_key"]
    loaded = RSAEncryption.load(tmp_path / "rsa.json", "s3cret")
    assert loaded.level == "chunk"
    assert loaded.decrypt(rsa.encrypt(b"secret")) == b"secret"
    with pytest.raises(EncryptionError, match="cannot load the RSA keys"):
        RSAEncryption.load(tmp_path / "rsa.json", "wrong")
    rsa.save_keys(tmp_path / "private.pem", tmp_path / "public.pem")
    other = RSAEncryption("s3cret", level="chunk")
    with pytest.raises(EncryptionError, match="another key pair"):
        other.decrypt(rsa.encrypt(b"y"))
    other.load_keys(tmp_path / "private.pem", tmp_path / "public.pem", "s3cret")
    assert other.decrypt(rsa.encrypt(b"y")) == b"y"


@pytest.mark.parametrize("bad", [{"level": "file"}, {"password": 123}])
def test_bad_constructor_arguments(bad: dict[str, object]) -> None:
    kwargs: dict[str, object] = {"password": "pw", "level": "sample", **bad}
    with pytest.raises(ConfigurationError, match=next(iter(bad))):
        FernetEncryption(**kwargs)  # type: ignore[arg-type]


def test_load_of_a_file_that_is_no_key_file(tmp_path: Path) -> None:
    (tmp_path / "k.json").write_text("[1, 2]")
    with pytest.raises(EncryptionError, match="not a JSON object"):
        FernetEncryption.load(tmp_path / "k.json", "pw")
    (tmp_path / "k.json").write_text("{}")
    with pytest.raises(EncryptionError, match="not a Fernet key file"):
        FernetEncryption.load(tmp_path / "k.json", "pw")


def test_check_encryption_cases(fernet: FernetEncryption) -> None:
    recorded = {"algorithm": "fernet", "level": "sample"}
    assert check_encryption(None, None, "s3://b/d") is None
    assert check_encryption(recorded, fernet, "s3://b/d") == "sample"
    with pytest.raises(EncryptionError, match=r"s3://b/d is encrypted \(fernet, level 'sample'\).*FernetEncryption"):
        check_encryption(recorded, None, "s3://b/d")
    with pytest.raises(EncryptionError, match="encrypted with fernet at level 'chunk'"):
        check_encryption({"algorithm": "fernet", "level": "chunk"}, fernet, "s3://b/d")
    with pytest.raises(ConfigurationError, match="is not encrypted"):
        check_encryption(None, fernet, "s3://b/d")
    with pytest.raises(ConfigurationError, match="not an encryption object"):
        check_encryption(recorded, "pw", "s3://b/d")
    with pytest.raises(FormatError, match="records encryption="):
        check_encryption({"algorithm": "rot13", "level": "sample"}, fernet, "s3://b/d")


def test_writer_check_refuses_token_loader_and_non_objects(fernet: FernetEncryption) -> None:
    from litstream import TokensLoader

    assert check_writer_encryption(None) is None
    assert check_writer_encryption(fernet) is fernet
    with pytest.raises(ConfigurationError, match="TokensLoader"):
        check_writer_encryption(fernet, TokensLoader())
    with pytest.raises(ConfigurationError, match="not an encryption object"):
        check_writer_encryption("password")


def test_decrypt_chunk_at_both_levels(fernet: FernetEncryption) -> None:
    items = [b"a", b"bb", b"ccc"]
    plain = pack_chunk(items)
    sample_level = pack_chunk([fernet.encrypt(x) for x in items])
    assert ChunkView(sample_level).num_items == 3
    assert decrypt_chunk(fernet, "sample", sample_level, "chunk-0-0.bin") == plain
    chunk_level = encrypt_chunk(fernet, plain)
    assert decrypt_chunk(fernet, "chunk", chunk_level, "chunk-0-0.bin") == plain
    tampered = bytearray(chunk_level)
    tampered[-5] ^= 1
    with pytest.raises(EncryptionError, match=r"cannot decrypt chunk-0-0\.bin"):
        decrypt_chunk(fernet, "chunk", bytes(tampered), "chunk-0-0.bin")
    with pytest.raises(EncryptionError, match=r"cannot decrypt chunk-0-0\.bin item 1"):
        decrypt_chunk(fernet, "sample", pack_chunk([fernet.encrypt(b"a"), b"garbage", b"x"]), "chunk-0-0.bin")


def test_sample_level_keeps_empty_items_and_trailing_bytes(fernet: FernetEncryption) -> None:
    # LitData's Arrow-row chunks: empty items, then a footer after the last item
    chunk = pack_chunk([fernet.encrypt(b"a"), b"", fernet.encrypt(b"c")]) + b"FOOTER"
    assert decrypt_chunk(fernet, "sample", chunk, "c.bin") == pack_chunk([b"a", b"", b"c"]) + b"FOOTER"
