"""Per-chunk checksums, recorded in ``index.json``: on by default (``xxh3``), chosen with ``checksum=``.

Each ``chunks[]`` entry of a checksummed dataset carries one extra key, which LitData ignores (its reader
looks only at ``filename``, ``chunk_size``, ``chunk_bytes`` and ``dim``)::

    {"chunk_bytes": 4096, "chunk_size": 10, "dim": null, "filename": "chunk-0-0.bin",
     "litstream_checksum": "xxh3:9f86d081884c7d65"}

The digest is of the chunk file exactly as stored (after compression), so a reader checks it before it
decodes anything. Algorithms:

- ``"xxh3"`` (the default): XXH3, 64 bits, from the ``xxhash`` package; about 20 GB/s on one core.
- ``"sha256"``, ``"blake2b"``: hashlib, 32-byte digests; about 1.7 and 1 GB/s on one core.

None of them authenticates a dataset (whoever can change a chunk can change ``index.json``): they catch
accidental corruption, on a disk, in a cache or in transit. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import xxhash

from .._core._errors import ChecksumError, ConfigurationError, FormatError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._index import ChunkInfo

__all__ = [
    "CHECKSUM_ALGORITHMS",
    "CHECKSUM_KEY",
    "DEFAULT_CHECKSUM",
    "check_checksum_argument",
    "chunk_digest",
    "expected_digest",
    "verify_chunk",
]

CHECKSUM_KEY = "litstream_checksum"
"""The ``chunks[]`` key holding ``"<algorithm>:<hex digest>"``."""

CHECKSUM_ALGORITHMS = ("xxh3", "sha256", "blake2b")
DEFAULT_CHECKSUM = "xxh3"
"""What writers record when ``checksum`` is not given (``checksum=None`` records nothing)."""
_HEX_LENGTH = {"xxh3": 16, "sha256": 64, "blake2b": 64}
_VALUE = re.compile(r"^([a-z0-9]+):([0-9a-f]+)$")


def _hasher(algorithm: str) -> Any:
    if algorithm == "xxh3":
        return xxhash.xxh3_64()  # releases the GIL while it hashes a large buffer
    if algorithm == "blake2b":
        return hashlib.blake2b(digest_size=32)
    return hashlib.new(algorithm)


def check_checksum_argument(checksum: object) -> str | None:
    """``checksum`` if it is ``None`` or a supported algorithm name.

    Raises:
        ConfigurationError: another value (the message lists the algorithms).
    """
    if checksum is None:
        return None
    if isinstance(checksum, str) and checksum in CHECKSUM_ALGORITHMS:
        return checksum
    raise ConfigurationError(
        f"checksum={checksum!r} is not supported; use one of {', '.join(repr(a) for a in CHECKSUM_ALGORITHMS)} "
        f"(default {DEFAULT_CHECKSUM!r}) or None (record no checksums)"
    )


def chunk_digest(parts: Iterable[bytes | bytearray | memoryview], algorithm: str) -> str:
    """``"<algorithm>:<hex>"`` of the concatenation of ``parts`` (the chunk file's bytes, in order)."""
    hasher = _hasher(algorithm)
    for part in parts:
        hasher.update(part)
    return f"{algorithm}:{hasher.hexdigest()}"


def expected_digest(info: ChunkInfo) -> str | None:
    """The checksum ``index.json`` records for a chunk, or ``None`` when it records none.

    Raises:
        FormatError: the recorded value is not ``"<algorithm>:<hex>"`` with a supported algorithm and a digest
            of the right length (an index from a stranger is checked, not trusted).
    """
    value = info.extra.get(CHECKSUM_KEY)
    if value is None:
        return None
    match = _VALUE.match(value) if isinstance(value, str) else None
    if match is None or _HEX_LENGTH.get(match.group(1)) != len(match.group(2)):
        raise FormatError(
            f"index.json records {CHECKSUM_KEY}={value!r:.100} for {info.filename}; expected "
            f"'<algorithm>:<hex digest>' with an algorithm among {', '.join(CHECKSUM_ALGORITHMS)}"
        )
    return match.group(0)


_FIX = "the chunk file is damaged: restore it, or re-create the dataset with optimize"


def verify_chunk(
    data: bytes | bytearray | memoryview | Any,
    info: ChunkInfo,
    *,
    where: str,
    fix: str = _FIX,
    parts: Iterable[bytes | bytearray | memoryview] | None = None,
) -> None:
    """Check a chunk file's bytes (as stored) against its recorded checksum; no-op when none is recorded.

    Args:
        data: The whole file (bytes-like or an ``mmap``).
        info: The chunk's ``index.json`` entry.
        where: The file's location, for the message.
        fix: What to do, for the message (default: restore the file or re-create the dataset).
        parts: ``data`` as consecutive pieces, hashed in order instead of ``data`` (a reader hashing a
            mapped file window by window); ``None``: ``data`` itself.

    Raises:
        ChecksumError: the digest differs (names the chunk, both digests and the fix).
        FormatError: the recorded value is malformed.
    """
    expected = expected_digest(info)
    if expected is None:
        return
    algorithm = expected.split(":", 1)[0]
    actual = chunk_digest([data] if parts is None else parts, algorithm)
    if actual != expected:
        raise ChecksumError(
            f"chunk {info.filename} ({where}) is corrupt: its {algorithm} is {actual.split(':', 1)[1]} but "
            f"index.json records {expected.split(':', 1)[1]}; {fix}"
        )
