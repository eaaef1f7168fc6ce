"""Chunk files compressed inside ``.bin`` (LitData 0.2.76's ``compression_level`` ``"batch"`` and ``"sample"``).

``"batch"`` (framed) layout, all integers little-endian; offsets are relative to the concatenated item
bytes, frame offsets absolute in the file::

    offset 0    magic b"LDFZ01\\0\\0" (8 bytes) | version u16 = 1 | flags u16 = 0
    offset 12   num_items N u32 | frame_rows K u32 | n_frames F u32 (= ceil(N / K))
    offset 24   offsets u32[N + 1]               offsets[0] = 0, offsets[i + 1] = offsets[i] + len(item i)
                frames[F], 24 bytes each:        first_item u32 | n_items u32 | compressed_off u64
                                                 | compressed_len u32 | uncompressed_len u32
                zstd frames                      frame f holds items [f*K, min(N, (f+1)*K)) back to back

``"sample"`` layout: the classic chunk (:mod:`._chunk`) whose every item is one zstd frame of the item.

:func:`to_classic` turns either back into the classic chunk bytes the rest of litstream reads, checking
every field against ``index.json`` and bounding each frame by the size recorded for it;
:func:`pack` writes them from the items of one chunk.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from .._core._errors import FormatError
from ._chunk import header_length, pack_chunk
from ._compression import MAX_FRAME_BYTES, compress, inflate

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._compression import Compression

__all__ = ["FRAMED_MAGIC", "pack", "to_classic"]

FRAMED_MAGIC = b"LDFZ01\0\0"
_VERSION = 1
_PREFIX = struct.Struct("<8sHHIII")
_FRAME = struct.Struct("<IIQII")
_U32_MAX = 2**32 - 1


def pack(items: Sequence[bytes], compression: Compression) -> bytes:
    """The file bytes of a chunk holding ``items`` at ``compression.level`` ``"batch"`` or ``"sample"``.

    Raises:
        FormatError: the chunk exceeds the 4 GiB format limit.
    """
    if compression.level == "sample":
        return pack_chunk([compress(item, compression.name) for item in items])
    rows = compression.batch_size or 1
    n = len(items)
    sizes = np.fromiter((len(x) for x in items), dtype=np.uint64, count=n)
    offsets = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(sizes, out=offsets[1:])
    if n and int(offsets[-1]) > _U32_MAX:
        raise FormatError(f"a chunk of {int(offsets[-1])} item bytes exceeds the 4 GiB format limit; lower chunk_bytes")
    n_frames = -(-n // rows)
    frames = [compress(b"".join(items[f * rows : (f + 1) * rows]), compression.name) for f in range(n_frames)]
    cursor = _PREFIX.size + 4 * (n + 1) + _FRAME.size * n_frames
    table = bytearray()
    for f, frame in enumerate(frames):
        first = f * rows
        count = min(n, first + rows) - first
        raw_len = int(offsets[first + count] - offsets[first])
        table += _FRAME.pack(first, count, cursor, len(frame), raw_len)
        cursor += len(frame)
    prefix = _PREFIX.pack(FRAMED_MAGIC, _VERSION, 0, n, rows, n_frames)
    return b"".join((prefix, offsets.astype("<u4").tobytes(), bytes(table), *frames))


def to_classic(
    data: bytes | memoryview, compression: Compression, *, chunk_size: int, chunk_bytes: int, what: str
) -> bytes:
    """Inflate a ``"batch"`` or ``"sample"`` chunk file into classic chunk bytes.

    Args:
        data: The whole file.
        compression: The dataset's compression (level ``"batch"`` or ``"sample"``).
        chunk_size: Items the index records for this chunk.
        chunk_bytes: The file length the index records.
        what: The file name, for messages.

    Raises:
        FormatError: the file is shorter than recorded, its directory disagrees with the index or
            with itself, or a frame is corrupt or expands past the size recorded for it.
    """
    view = memoryview(data)
    if len(view) < chunk_bytes:
        raise FormatError(
            f"{what} holds {len(view)} bytes but index.json records chunk_bytes={chunk_bytes}; the file is "
            "incomplete — re-run optimize"
        )
    view = view[:chunk_bytes]
    if compression.level == "sample":
        return _sample_to_classic(view, chunk_size, what)
    if bytes(view[:8]) != FRAMED_MAGIC:
        if _is_classic(view, chunk_size):
            # LitData 0.2.76 records compression_level="batch" but leaves chunks of some samples (nested
            # types, not dicts) uncompressed; such a chunk is a consistent classic chunk.
            return bytes(view)
        raise FormatError(f"{what} is indexed as compression_level='batch' but lacks the LDFZ01 magic")
    return _framed_to_classic(view, chunk_size, what)


def _is_classic(view: memoryview, chunk_size: int) -> bool:
    return _header_fits(view, chunk_size) and _last_offset(view, chunk_size) == len(view)


def _framed_to_classic(view: memoryview, chunk_size: int, what: str) -> bytes:
    if len(view) < _PREFIX.size:
        raise FormatError(f"{what} ends inside its framed zstd header")
    _, version, flags, n, rows, n_frames = _PREFIX.unpack_from(view)
    if version != _VERSION or flags != 0:
        raise FormatError(
            f"{what} is a framed zstd chunk of version {version} with flags {flags}; litstream reads version 1 "
            "with flags 0 (LitData 0.2.76) — a newer LitData wrote it"
        )
    if n != chunk_size:
        raise FormatError(f"{what} holds {n} items but index.json records {chunk_size}")
    if rows < 1 or n_frames != -(-n // rows):
        raise FormatError(f"{what}: {n_frames} frames of {rows} rows cannot hold {n} items")
    table_at = _PREFIX.size + 4 * (n + 1)
    data_at = table_at + _FRAME.size * n_frames
    if len(view) < data_at:
        raise FormatError(f"{what} ends inside its framed zstd directory")
    offsets = np.frombuffer(view, dtype="<u4", count=n + 1, offset=_PREFIX.size).astype(np.int64)
    if int(offsets[0]) != 0 or not bool(np.all(np.diff(offsets) >= 0)):
        raise FormatError(f"{what}: the item offsets of the framed zstd directory are not increasing from 0")
    total = int(offsets[-1])
    if header_length(n) + total > _U32_MAX:
        raise FormatError(f"{what}: its items total {total} bytes, beyond the 4 GiB format limit")
    parts = [struct.pack("<I", n), (offsets + header_length(n)).astype("<u4").tobytes()]
    for f in range(n_frames):
        first, count, at, size, raw_len = _FRAME.unpack_from(view, table_at + f * _FRAME.size)
        want = min(n, f * rows + rows) - f * rows
        if first != f * rows or count != want:
            raise FormatError(
                f"{what}: frame {f} covers items [{first}, {first + count}), expected [{f * rows}, {f * rows + want})"
            )
        span = int(offsets[first + count] - offsets[first])
        if raw_len != span:
            raise FormatError(f"{what}: frame {f} records {raw_len} bytes but its items span {span}")
        if at < data_at or at + size > len(view):
            raise FormatError(f"{what}: frame {f} lies at bytes [{at}, {at + size}), outside the file's frame area")
        parts.append(inflate(view[at : at + size], limit=raw_len, expected=raw_len, what=f"{what} frame {f}"))
    return b"".join(parts)


def _sample_to_classic(view: memoryview, chunk_size: int, what: str) -> bytes:
    if not _header_fits(view, chunk_size):
        raise FormatError(f"{what}: its header does not describe {chunk_size} items within {len(view)} bytes")
    offsets = np.frombuffer(view, dtype="<u4", count=chunk_size + 1, offset=4).tolist()
    items: list[bytes] = []
    total = header_length(chunk_size)
    for i in range(chunk_size):
        item = inflate(
            view[offsets[i] : offsets[i + 1]], limit=min(MAX_FRAME_BYTES, _U32_MAX - total), what=f"{what} item {i}"
        )
        total += len(item)
        items.append(item)
    return pack_chunk(items)


def _header_fits(view: memoryview, n: int) -> bool:
    head = header_length(n)
    if len(view) < head or int.from_bytes(view[:4], "little") != n:
        return False
    offsets = np.frombuffer(view, dtype="<u4", count=n + 1, offset=4).astype(np.int64)
    return int(offsets[0]) == head and bool(np.all(np.diff(offsets) >= 0)) and int(offsets[-1]) <= len(view)


def _last_offset(view: memoryview, n: int) -> int:
    return int.from_bytes(view[4 * (n + 1) : 4 * (n + 2)], "little")


def chunk_from_file(
    data: bytes | memoryview, compression: Compression, *, filename: str, chunk_size: int, chunk_bytes: int
) -> bytes:
    """The classic chunk bytes of a compressed chunk file, whatever its ``compression.level``.

    Args:
        data: The whole file.
        compression: The dataset's compression.
        filename: The file name, for messages.
        chunk_size: Items the index records for this chunk.
        chunk_bytes: What the index records: the length before compression for ``"chunk"`` (the output
            must be exactly this long), the file length for ``"batch"`` and ``"sample"``.

    Raises:
        FormatError: see :func:`to_classic` and :func:`~litstream.format._compression.inflate`.
    """
    if compression.whole_file:
        return inflate(data, limit=_U32_MAX, expected=chunk_bytes, what=f"{filename} ({compression.name})")
    return to_classic(data, compression, chunk_size=chunk_size, chunk_bytes=chunk_bytes, what=filename)
