"""Packing a chunk's items into the bytes stored, and the dataset ``config`` they are described by.

Pure CPU work shared by :class:`~litstream.write._writer.ChunkWriter`, the ``AsyncUploader`` and
``dataset_update``: the chunk-budget check, a pytree chunk packed (then encrypted and compressed in
LitData's order), a framed ``"batch"``/``"sample"`` compressed chunk, and ``index.json``'s ``config``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError
from .._core._units import parse_bytes
from ..format._chunk import pack_chunk
from ..format._compression import Compression, compress
from ..format._encrypted import encrypt_chunk
from ..format._framed import pack as pack_in_file
from ..format._index import DatasetConfig

if TYPE_CHECKING:
    from ..format._loaders import PyTreeLoader, SampleEncoder, TokensLoader
    from ..format._tokens import TokenEncoder

__all__ = ["check_chunking", "dataset_config", "pack_and_compress", "pack_in_file_compressed"]


def check_chunking(chunk_size: int | None, chunk_bytes: int | str | None) -> tuple[int | None, int | None]:
    """Validate the chunk budget arguments; exactly one must be given.

    Returns:
        ``(chunk_size, chunk_bytes)`` with ``chunk_bytes`` converted to bytes.

    Raises:
        ConfigurationError: both or neither given, or a value that is not a positive size.
    """
    if chunk_size is None and chunk_bytes is None:
        raise ConfigurationError(
            "give one of chunk_size (items per chunk, e.g. 1000) or chunk_bytes (e.g. '64MB'); both are None"
        )
    if chunk_size is not None and chunk_bytes is not None:
        raise ConfigurationError(
            f"give only one of chunk_size={chunk_size!r} and chunk_bytes={chunk_bytes!r}, not both"
        )
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ConfigurationError(f"chunk_size must be a positive int (items per chunk), got {chunk_size!r}")
    return chunk_size, None if chunk_bytes is None else parse_bytes(chunk_bytes)


def pack_and_compress(items: list[bytes], compression: str | None, encryption: Any = None) -> tuple[bytes, int]:
    """Chunk bytes ready to store, and their length before compression (``index.json``'s ``chunk_bytes``).

    Pure CPU work, meant for a worker thread. ``items`` is emptied once packed, so the item bytes can be
    freed while the chunk is compressed and uploaded. With a ``"chunk"``-level ``encryption`` the
    packed chunk is encrypted before compression (LitData's order; ``chunk_bytes`` counts the ciphertext).

    Raises:
        FormatError: the chunk would exceed the 4 GiB format limit (``EncryptionError``: RSA cannot
            encrypt it).
    """
    data = pack_chunk(items)
    items.clear()
    if encryption is not None and encryption.level == "chunk":
        data = encrypt_chunk(encryption, data)
    size = len(data)
    if compression is None:
        return data, size
    return compress(data, compression), size


def pack_in_file_compressed(items: list[bytes], compression: Compression) -> tuple[bytes, int]:
    """A ``"batch"`` or ``"sample"`` chunk file and its length (``chunk_bytes``, as LitData 0.2.76 records it)."""
    data = pack_in_file(items, compression)
    items.clear()
    return data, len(data)


def dataset_config(
    encoder: SampleEncoder | TokenEncoder,
    *,
    chunk_size: int | None,
    chunk_bytes: int | None,
    compression: str | Compression | None,
    item_loader: PyTreeLoader | TokensLoader,
    encryption: Any = None,
) -> DatasetConfig:
    """The ``config`` of ``index.json`` for samples encoded by ``encoder`` (its format fixed by a first sample).

    Holds every key LitData 0.2.76 writes: ``compression_level``, ``compression_batch_size``,
    ``ipc_compression`` (always ``None``: litstream writes no Arrow chunks here) and ``types``.
    """
    spec = Compression(compression) if isinstance(compression, str) else compression
    keys = spec.config_keys() if spec is not None else {"compression": None}
    return DatasetConfig(
        data_format=encoder.data_format,
        data_spec=encoder.data_spec,
        chunk_size=chunk_size,
        chunk_bytes=chunk_bytes,
        compression=keys.pop("compression"),
        encryption=None if encryption is None else encryption.state_dict(),
        item_loader=type(item_loader).__name__,
        extra={
            "compression_batch_size": None,
            "compression_level": None,
            **keys,
            "ipc_compression": None,
            "types": getattr(encoder, "types", None),
        },
    )
