"""What encryption means for a dataset: the ``config.encryption`` check, and encrypted chunks.

Layouts and classes are in ``format/_encryption.py``; this module applies an encryption object
(litstream's or LitData's: anything with ``algorithm``, ``level``, ``encrypt``/``decrypt`` and
``state_dict``) to chunk bytes. Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, EncryptionError, FormatError
from ._chunk import ChunkView, pack_chunk
from ._encryption import ALGORITHMS, LEVELS, EncryptionLevel

if TYPE_CHECKING:
    import mmap
    from collections.abc import Mapping

__all__ = [
    "check_encryption",
    "check_reader_encryption",
    "check_writer_encryption",
    "decrypt_chunk",
    "decrypt_item",
    "encrypt_chunk",
]

_VALID = {(a, level) for a in ALGORITHMS for level in LEVELS}


def check_reader_encryption(encryption: object) -> None:
    """Reject a reader's ``encryption=`` that is neither ``None`` nor an encryption object.

    Raises:
        ConfigurationError: it lacks ``algorithm``, ``level`` or ``decrypt`` (e.g. a password string).
    """
    if encryption is not None and not all(hasattr(encryption, a) for a in ("algorithm", "level", "decrypt")):
        raise ConfigurationError(
            f"encryption={encryption!r} is not an encryption object; pass FernetEncryption.load(key_file, "
            "password) or RSAEncryption.load(key_file, password)"
        )


def check_encryption(recorded: Mapping[str, Any] | None, encryption: object, where: str) -> str | None:
    """Check that ``encryption`` can read a dataset whose ``config.encryption`` is ``recorded``.

    Args:
        recorded: ``config.encryption`` from ``index.json`` (untrusted).
        encryption: The reader's ``encryption=`` argument: ``None`` or an object with ``algorithm``,
            ``level`` and ``decrypt`` (litstream's classes, or LitData's).
        where: The dataset's URL, for messages.

    Returns:
        The level to decrypt at (``"sample"`` / ``"chunk"``), or ``None`` for a plain dataset.

    Raises:
        EncryptionError: the dataset is encrypted and ``encryption`` is missing or does not match.
        ConfigurationError: ``encryption`` was given for a dataset that is not encrypted, or is not
            an encryption object.
        FormatError: ``recorded`` is malformed.
    """
    check_reader_encryption(encryption)
    if recorded is None:
        if encryption is not None:
            raise ConfigurationError(
                f"encryption={encryption!r} was given but the dataset at {where} is not encrypted "
                "(index.json config.encryption is null); drop the argument"
            )
        return None
    if not isinstance(recorded, dict) or (recorded.get("algorithm"), recorded.get("level")) not in _VALID:
        raise FormatError(
            f"index.json of {where} records encryption={recorded!r}; expected "
            "{'algorithm': 'fernet'|'rsa', 'level': 'sample'|'chunk'}"
        )
    algorithm, level = recorded["algorithm"], recorded["level"]
    cls = "FernetEncryption" if algorithm == "fernet" else "RSAEncryption"
    if encryption is None:
        raise EncryptionError(
            f"the dataset at {where} is encrypted ({algorithm}, level {level!r}); pass "
            f"encryption={cls}.load(key_file, password), with the key file saved when it was written"
        )
    theirs = (getattr(encryption, "algorithm", None), getattr(encryption, "level", None))
    if theirs != (algorithm, level):
        raise EncryptionError(
            f"the dataset at {where} is encrypted with {algorithm} at level {level!r}, but encryption= is "
            f"{theirs[0]} at level {theirs[1]!r}; pass the {cls} (level={level!r}) it was written with"
        )
    return str(level)


def check_writer_encryption(encryption: object, item_loader: object = None) -> Any:
    """Validate a writer's ``encryption=`` argument and return it.

    Raises:
        ConfigurationError: not an encryption object (``encrypt``, ``state_dict`` and a ``level`` of
            ``"sample"`` / ``"chunk"``), or combined with ``TokensLoader`` (its readers take byte
            ranges of a chunk, which encryption hides; LitData does not read that combination either).
    """
    if encryption is None:
        return None
    if not all(hasattr(encryption, a) for a in ("encrypt", "state_dict", "level", "algorithm")):
        raise ConfigurationError(
            f"encryption={encryption!r} is not an encryption object; pass FernetEncryption(password) or "
            "RSAEncryption(password)"
        )
    level = getattr(encryption, "level", None)
    if level not in LEVELS:
        raise ConfigurationError(f"encryption.level must be 'sample' or 'chunk', got {level!r}")
    if item_loader is not None and type(item_loader).__name__ == "TokensLoader":
        raise ConfigurationError("encryption= cannot be combined with item_loader=TokensLoader(); drop one of them")
    return encryption


def _decrypt(encryption: Any, data: bytes | memoryview | mmap.mmap, where: str) -> bytes:
    try:
        return bytes(encryption.decrypt(bytes(data)))
    except Exception as exc:  # our EncryptionError, or LitData's objects' InvalidToken / ValueError
        raise EncryptionError(
            f"cannot decrypt {where}: wrong key (check the password and the key file), or the file is damaged"
        ) from exc


def decrypt_item(encryption: Any, data: bytes | memoryview, where: str) -> bytes:
    """The plaintext of one item of a ``"sample"``-level dataset; ``where`` names it in errors.

    Raises:
        EncryptionError: the item does not decrypt with this key.
    """
    return _decrypt(encryption, data, where)


def decrypt_chunk(encryption: Any, level: str, data: bytes | memoryview | mmap.mmap, where: str) -> bytes:
    """The plain chunk bytes (layout of ``format/_chunk.py``) of an encrypted chunk file's content.

    At level ``"sample"`` every item is decrypted and the chunk is packed again, so the result is a
    plain chunk whatever the level; ``where`` names the chunk in errors. Bytes after the last item
    are kept as they are, and empty items stay empty (no ciphertext is empty): LitData 0.2.76 writes
    scalar-only dict samples as empty items plus an Arrow footer, and leaves that footer unencrypted
    at this level.

    Raises:
        EncryptionError: the chunk (or an item) does not decrypt with this key.
        FormatError: a ``"sample"``-level chunk whose header is damaged.
    """
    if level == EncryptionLevel.CHUNK:
        return _decrypt(encryption, data, where)
    view = ChunkView(data)
    items = [view.item(i) for i in range(view.num_items)]
    plain = [_decrypt(encryption, item, f"{where} item {i}") if len(item) else b"" for i, item in enumerate(items)]
    return pack_chunk(plain) + bytes(view.data[int(view.offsets[-1]) :])


def encrypt_chunk(encryption: Any, data: bytes) -> bytes:
    """The bytes a ``"chunk"``-level writer stores for plain chunk ``data`` (before any compression).

    Raises:
        EncryptionError: the key cannot encrypt it (RSA: more than 190 bytes).
    """
    return bytes(encryption.encrypt(data))
