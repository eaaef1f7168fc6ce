"""Chunk-level zstd compression with LitData's names: ``"zstd"`` (level 4) or ``"zstd:1"``…``"zstd:22"``.

The whole chunk is one zstd frame. ``index.json`` keeps the uncompressed length in ``chunk_bytes``.
Uses the ``zstandard`` package (install ``litstream[zstd]``).
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigurationError, FormatError

__all__ = ["SUPPORTED_COMPRESSIONS", "compress", "decompress", "validate_compression"]

_DEFAULT_LEVEL = 4
SUPPORTED_COMPRESSIONS: tuple[str, ...] = ("zstd", *(f"zstd:{level}" for level in range(1, 23)))


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "compression='zstd' needs the zstandard package: pip install 'litstream[zstd]'"
        ) from exc
    return zstandard


def validate_compression(compression: str | None) -> int | None:
    """Return the zstd level for ``compression`` (``None`` for no compression).

    Raises:
        ConfigurationError: an unknown name; the message lists the supported ones.
    """
    if compression is None:
        return None
    if compression not in SUPPORTED_COMPRESSIONS:
        raise ConfigurationError(
            f"compression={compression!r} is not supported; use None, 'zstd' (level {_DEFAULT_LEVEL}) or "
            "'zstd:N' with N in 1..22"
        )
    _zstandard()
    return _DEFAULT_LEVEL if compression == "zstd" else int(compression.split(":")[1])


def compress(data: bytes, compression: str) -> bytes:
    """Compress chunk bytes into one zstd frame (with the content size recorded)."""
    level = validate_compression(compression)
    return bytes(_zstandard().ZstdCompressor(level=level).compress(data))


def decompress(data: bytes | memoryview, compression: str) -> bytes:
    """Decompress a chunk written by LitData or litstream.

    Raises:
        FormatError: the bytes are not a valid zstd frame.
    """
    validate_compression(compression)
    zstandard = _zstandard()
    try:
        return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(bytes(data)))
    except zstandard.ZstdError as exc:
        raise FormatError(f"chunk is not a valid {compression} frame: {exc}") from exc
