"""Encrypted datasets, with LitData's classes, byte layout and key files.

Two levels, recorded in ``index.json`` as ``config.encryption = {"algorithm": "fernet"|"rsa",
"level": "sample"|"chunk"}`` (the key itself is never in the index)::

    level "sample"   the chunk layout is unchanged (``format/_chunk.py``); every item is the
                     ciphertext of its serialized bytes, so the offsets table stays readable
    level "chunk"    the whole chunk (header and items) is one ciphertext

With ``compression`` the encrypted bytes are then compressed as one zstd frame, and ``chunk_bytes``
is the encrypted length before compression. Both orders and lengths are LitData 0.2.76's.

* :class:`FernetEncryption`: a Fernet key (AES-128-CBC + HMAC-SHA256) derived from ``password`` by
  PBKDF2-HMAC-SHA256 (480 000 iterations) with a random 16-byte salt. Its key file (``save``) is
  ``{"algorithm": "fernet", "level": ..., "salt": <urlsafe base64>}``.
* :class:`RSAEncryption`: a fresh 2048-bit RSA key pair, OAEP padding with SHA-256, so one
  ciphertext holds at most 190 bytes (LitData's limit too: use it for tiny samples only). Its key file
  is ``{"private_key": <PEM, TraditionalOpenSSL, encrypted with password>, "public_key": <PEM>,
  "password": ..., "level": ...}`` — LitData stores the password in that file, so keep it secret.

Everything here is pure except ``save``/``load``/``save_keys``/``load_keys``, LitData's key-file
conveniences, which read or write the one local file the caller names. Uses the ``cryptography``
package (``pip install "litstream[encryption]"``).
"""

from __future__ import annotations

import base64
import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, EncryptionError
from .._core._optional import optional_module

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ALGORITHMS",
    "LEVELS",
    "Encryption",
    "EncryptionLevel",
    "FernetEncryption",
    "RSAEncryption",
]

LEVELS: tuple[str, ...] = ("sample", "chunk")
ALGORITHMS: tuple[str, ...] = ("fernet", "rsa")
_KDF_ITERATIONS = 480_000
_RSA_MAX_PLAINTEXT = 190  # 2048-bit modulus (256 bytes) - 2 * SHA-256 digest (32) - 2


class EncryptionLevel:
    """LitData's level names: ``EncryptionLevel.SAMPLE == "sample"``, ``EncryptionLevel.CHUNK == "chunk"``."""

    SAMPLE = "sample"
    CHUNK = "chunk"


def _crypto() -> None:
    optional_module(
        "cryptography.hazmat.primitives",
        'encryption needs the cryptography package: pip install "litstream[encryption]"',
    )


def _check_level(level: object) -> str:
    if level not in LEVELS:
        raise ConfigurationError(f"level must be 'sample' or 'chunk', got {level!r}")
    return str(level)


def _check_password(password: object) -> str:
    if not isinstance(password, str):
        raise ConfigurationError(f"password must be a str, got {type(password).__name__}")
    return password


def _write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def _read_key_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        state = json.loads(Path(path).read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EncryptionError(f"key file {os.fspath(path)!r} is not JSON ({exc}); pass the file save() wrote") from exc
    if not isinstance(state, dict):
        raise EncryptionError(f"key file {os.fspath(path)!r} holds {type(state).__name__}, not a JSON object")
    return state


class Encryption(ABC):
    """Base of the encryption classes (LitData's ``litdata.utilities.encryption.Encryption``).

    Attributes:
        level: ``"sample"`` (each item encrypted) or ``"chunk"`` (each chunk file encrypted).
    """

    level: str

    @property
    @abstractmethod
    def algorithm(self) -> str:
        """The name recorded in ``index.json``: ``"fernet"`` or ``"rsa"``."""

    @abstractmethod
    def encrypt(self, data: bytes) -> bytes:
        """The ciphertext of ``data``."""

    @abstractmethod
    def decrypt(self, data: bytes) -> bytes:
        """The plaintext of ``data``.

        Raises:
            EncryptionError: the data was not encrypted with this key (wrong password or key file).
        """

    def state_dict(self) -> dict[str, Any]:
        """``{"algorithm": ..., "level": ...}``, the value of ``index.json``'s ``config.encryption``."""
        return {"algorithm": self.algorithm, "level": self.level}

    @abstractmethod
    def save(self, file_path: str | os.PathLike[str]) -> None:
        """Write the key file needed to read the dataset again (layout in the module docstring)."""


class FernetEncryption(Encryption):
    """Fernet encryption with a key derived from a password (LitData's ``FernetEncryption``).

    A new object draws a new random salt, so the same password gives a different key: keep the
    object's key file (``save``) next to the password and read with ``FernetEncryption.load``.

    Args:
        password: The password the key is derived from.
        level: ``"sample"`` (default, as LitData) or ``"chunk"``.

    Raises:
        ConfigurationError: a bad ``level`` or ``password``, or ``cryptography`` is not installed.
    """

    def __init__(self, password: str, level: str = "sample") -> None:
        _crypto()
        self.password = _check_password(password)
        self.level = _check_level(level)
        self.salt = os.urandom(16)
        self.key = self._derive_key(self.password, self.salt)

    @property
    def algorithm(self) -> str:
        return "fernet"

    @staticmethod
    def _derive_key(password: str, salt: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

        kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=_KDF_ITERATIONS)
        return base64.urlsafe_b64encode(kdf.derive(password.encode()))

    def encrypt(self, data: bytes) -> bytes:
        from cryptography.fernet import Fernet

        return Fernet(self.key).encrypt(bytes(data))

    def decrypt(self, data: bytes) -> bytes:
        from cryptography.fernet import Fernet, InvalidToken

        try:
            return Fernet(self.key).decrypt(bytes(data))
        except InvalidToken:
            raise EncryptionError(
                "Fernet decryption failed: the data was encrypted with another key (wrong password or key file)"
            ) from None

    def save(self, file_path: str | os.PathLike[str]) -> None:
        state = {**self.state_dict(), "salt": base64.urlsafe_b64encode(self.salt).decode("utf-8")}
        _write_atomically(file_path, json.dumps(state).encode("utf-8"))

    @classmethod
    def load(cls, file_path: str | os.PathLike[str], password: str) -> FernetEncryption:
        """The object whose ``save`` wrote ``file_path`` (LitData's key files too), keyed by ``password``.

        Raises:
            EncryptionError: the file is not a Fernet key file. FileNotFoundError: no such file.
        """
        state = _read_key_file(file_path)
        try:
            salt = base64.urlsafe_b64decode(state["salt"])
            level = state["level"]
        except (KeyError, TypeError, ValueError) as exc:
            raise EncryptionError(f"key file {os.fspath(file_path)!r} is not a Fernet key file ({exc!r})") from None
        instance = cls.__new__(cls)
        instance.password = _check_password(password)
        instance.level = _check_level(level)
        instance.salt = salt
        instance.key = cls._derive_key(instance.password, salt)
        return instance

    def __repr__(self) -> str:
        return f"FernetEncryption(level={self.level!r})"


class RSAEncryption(Encryption):
    """RSA-OAEP (SHA-256) encryption with a fresh 2048-bit key pair (LitData's ``RSAEncryption``).

    One ciphertext holds at most 190 bytes of plaintext, so this suits only tiny items (``"sample"``)
    or tiny chunks (``"chunk"``); prefer :class:`FernetEncryption`.

    Args:
        password: Encrypts the private key in the key file (``save``).
        level: ``"sample"`` (default, as LitData) or ``"chunk"``.

    Raises:
        ConfigurationError: a bad ``level`` or ``password``, or ``cryptography`` is not installed.
    """

    # The docstring's Args/Raises and the checks repeat FernetEncryption's (already one _check_* each): each public
    # class documents its own constructor, as LitData's do.
    def __init__(self, password: str, level: str = "sample") -> None:
        _crypto()
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.password = _check_password(password)
        self.level = _check_level(level)
        self.private_key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public_key: Any = self.private_key.public_key()

    @property
    def algorithm(self) -> str:
        return "rsa"

    @staticmethod
    def _padding() -> Any:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        return padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None)

    def encrypt(self, data: bytes) -> bytes:
        if self.public_key is None:
            raise EncryptionError("this RSAEncryption has no public key; load_keys() first")
        if len(data) > _RSA_MAX_PLAINTEXT:
            raise EncryptionError(
                f"RSA-OAEP with a 2048-bit key encrypts at most {_RSA_MAX_PLAINTEXT} bytes, got {len(data)} "
                "(one item for level='sample', one chunk for level='chunk'); use FernetEncryption"
            )
        return bytes(self.public_key.encrypt(bytes(data), self._padding()))

    def decrypt(self, data: bytes) -> bytes:
        if self.private_key is None:
            raise EncryptionError("this RSAEncryption has no private key; load_keys() first")
        try:
            return bytes(self.private_key.decrypt(bytes(data), self._padding()))
        except ValueError:
            raise EncryptionError(
                "RSA decryption failed: the data was encrypted with another key pair (wrong key file)"
            ) from None

    def _pem_state(self, encrypt_private: bool) -> dict[str, Any]:
        from cryptography.hazmat.primitives import serialization

        protection: Any = (
            serialization.BestAvailableEncryption(self.password.encode())
            if encrypt_private and self.password
            else serialization.NoEncryption()
        )
        private = public = None
        if self.private_key is not None:
            private = self.private_key.private_bytes(
                encoding=serialization.Encoding.PEM,
                format=serialization.PrivateFormat.TraditionalOpenSSL,
                encryption_algorithm=protection,
            ).decode("utf-8")
        if self.public_key is not None:
            public = self.public_key.public_bytes(
                encoding=serialization.Encoding.PEM, format=serialization.PublicFormat.SubjectPublicKeyInfo
            ).decode("utf-8")
        return {"private_key": private, "public_key": public, "password": self.password, "level": self.level}

    def _set_pem_state(self, state: Mapping[str, Any], password: str | None, where: str) -> None:
        from cryptography.hazmat.primitives import serialization

        try:
            private, public = state["private_key"], state["public_key"]
            self.level = _check_level(state["level"])
            self.private_key = (
                None
                if private is None
                else serialization.load_pem_private_key(
                    private.encode("utf-8"), password=password.encode() if password else None
                )
            )
            self.public_key = None if public is None else serialization.load_pem_public_key(public.encode("utf-8"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EncryptionError(
                f"{where}: cannot load the RSA keys ({exc}); check the password and that the file is an "
                "RSAEncryption key file"
            ) from None

    def __getstate__(self) -> dict[str, Any]:
        # Pickles (to optimize workers, DataLoader workers) carry unencrypted PEM, like the object itself.
        return self._pem_state(encrypt_private=False)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.password = state.get("password") or ""
        self._set_pem_state(state, None, "pickled RSAEncryption")

    def save(self, file_path: str | os.PathLike[str]) -> None:
        _write_atomically(file_path, json.dumps(self._pem_state(encrypt_private=True)).encode("utf-8"))

    @classmethod
    def load(cls, file_path: str | os.PathLike[str], password: str) -> RSAEncryption:
        """The object whose ``save`` wrote ``file_path`` (LitData's key files too).

        Raises:
            EncryptionError: a wrong ``password`` or not an RSA key file. FileNotFoundError: no such file.
        """
        _crypto()
        state = _read_key_file(file_path)
        instance = cls.__new__(cls)
        instance.password = _check_password(password)
        instance._set_pem_state(state, password, f"key file {os.fspath(file_path)!r}")
        return instance

    def save_keys(self, private_key_path: str | os.PathLike[str], public_key_path: str | os.PathLike[str]) -> None:
        """Write the private key (PEM, encrypted with the password) and the public key (PEM) to two files."""
        state = self._pem_state(encrypt_private=True)
        if state["private_key"] is None or state["public_key"] is None:
            raise EncryptionError("this RSAEncryption lacks a key to save")
        _write_atomically(private_key_path, state["private_key"].encode("utf-8"))
        _write_atomically(public_key_path, state["public_key"].encode("utf-8"))

    def load_keys(
        self, private_key_path: str | os.PathLike[str], public_key_path: str | os.PathLike[str], password: str
    ) -> None:
        """Replace the key pair with the one ``save_keys`` wrote.

        Raises:
            EncryptionError: a wrong ``password`` or files that are not PEM keys.
        """
        state = {
            "private_key": Path(private_key_path).read_text("utf-8"),
            "public_key": Path(public_key_path).read_text("utf-8"),
            "level": self.level,
        }
        self._set_pem_state(state, password, f"key files {os.fspath(private_key_path)!r}")

    def __repr__(self) -> str:
        return f"RSAEncryption(level={self.level!r})"
