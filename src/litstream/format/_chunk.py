"""Chunk files: byte layout, file names, and the rule that decides where a chunk ends.

Layout of an (uncompressed) chunk holding N items, all integers uint32 little-endian::

    offset 0      N
    offset 4      offsets[0..N]   absolute positions; offsets[0] = 4 + 4 * (N + 1) (header length),
                                  offsets[i + 1] = offsets[i] + len(item i)
    offsets[0]    item 0 | item 1 | ... | item N-1

Item ``i`` is ``data[offsets[i]:offsets[i + 1]]``. Offsets are absolute, so a chunk holds at most
4 GiB. With compression the whole file is one zstd frame of these bytes, and the file name gains
the ``.{compression}`` infix (``chunk-0-3.zstd.bin``), exactly as LitData names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import FormatError

if TYPE_CHECKING:
    import mmap
    from collections.abc import Sequence

__all__ = [
    "ChunkBuilder",
    "ChunkView",
    "chunk_filename",
    "chunk_header",
    "header_length",
    "item_span_offset",
    "local_chunk_filename",
    "pack_chunk",
    "parse_chunk_offsets",
]

_U32_MAX = 2**32 - 1


def chunk_filename(rank: int, number: int, compression: str | None = None) -> str:
    """LitData's chunk file name: ``chunk-{rank}-{number}[.{compression}].bin``."""
    infix = f".{compression}" if compression else ""
    return f"chunk-{rank}-{number}{infix}.bin"


def local_chunk_filename(filename: str, compression: str | None) -> str:
    """The name of the decompressed copy: ``filename`` without the ``.{compression}`` infix."""
    return filename.replace(f".{compression}", "") if compression else filename


def header_length(num_items: int) -> int:
    """Bytes before the first item: ``4 + 4 * (num_items + 1)``."""
    return 4 * (num_items + 2)


def item_span_offset(item: int) -> int:
    """Byte position of the pair ``(offsets[item], offsets[item + 1])`` inside a chunk (8 bytes long)."""
    return 4 * (1 + item)


def parse_chunk_offsets(header: bytes | memoryview, *, num_items: int, chunk_bytes: int, source: str) -> np.ndarray:
    """The ``N + 1`` item offsets of a chunk from its first ``header_length(num_items)`` bytes, checked.

    Args:
        header: The chunk's first bytes (at least ``header_length(num_items)``; more are ignored).
        num_items: Items the index records for the chunk (``chunk_size``).
        chunk_bytes: The chunk's length in bytes, as the index records it; no offset may pass it.
        source: The chunk's name, for messages.

    Returns:
        A read-only int64 array: item ``i`` spans bytes ``[offsets[i], offsets[i + 1])``.

    Raises:
        FormatError: the header is short, announces another item count, does not start right after
            itself, goes backwards, or points past ``chunk_bytes``.
    """
    length = header_length(num_items)
    if len(header) < length:
        raise FormatError(f"{source} is shorter than its header ({len(header)} of {length} bytes); re-run optimize")
    announced = int.from_bytes(bytes(header[:4]), "little")
    if announced != num_items:
        raise FormatError(f"{source} holds {announced} items but index.json records {num_items}")
    offsets = np.frombuffer(header, dtype="<u4", count=num_items + 1, offset=4).astype(np.int64)
    if int(offsets[0]) != length or bool((np.diff(offsets) < 0).any()) or int(offsets[-1]) > chunk_bytes:
        raise FormatError(
            f"{source}: the item offsets are not an increasing table from byte {length} to at most the "
            f"chunk's {chunk_bytes} bytes; the chunk is damaged — re-run optimize"
        )
    offsets.flags.writeable = False
    return offsets


def chunk_header(items: Sequence[bytes]) -> bytes:
    """The bytes before the first item of a chunk holding ``items``: ``N`` and the ``N + 1`` offsets.

    ``chunk_header(items) + b"".join(items) == pack_chunk(items)``; a writer can send the header and
    the items to a file one after the other without building the whole chunk in memory.

    Raises:
        FormatError: the chunk would exceed 4 GiB, which the uint32 offsets cannot address.
    """
    n = len(items)
    sizes = np.fromiter((len(x) for x in items), dtype=np.uint64, count=n)
    offsets = np.empty(n + 1, dtype=np.uint64)
    offsets[0] = header_length(n)
    np.cumsum(sizes, out=offsets[1:])
    offsets[1:] += offsets[0]
    if int(offsets[-1]) > _U32_MAX:
        raise FormatError(f"a chunk of {int(offsets[-1])} bytes exceeds the 4 GiB format limit; lower chunk_bytes")
    return np.uint32(n).tobytes() + offsets.astype("<u4").tobytes()


def pack_chunk(items: Sequence[bytes]) -> bytes:
    """Assemble ``items`` into chunk bytes (layout in the module docstring).

    Raises:
        FormatError: the chunk would exceed 4 GiB, which the uint32 offsets cannot address.
    """
    return b"".join((chunk_header(items), *items))


@dataclass(frozen=True)
class ChunkView:
    """Read access to the items of one decompressed chunk held in memory.

    Args:
        data: The chunk bytes (``bytes``, ``bytearray``, ``memoryview`` or an ``mmap``).
    """

    data: bytes | bytearray | memoryview | mmap.mmap

    def __post_init__(self) -> None:
        if len(self.data) < 4:
            raise FormatError(f"a chunk must hold at least 4 bytes, got {len(self.data)}")
        n = self.num_items
        if len(self.data) < header_length(n):
            raise FormatError(f"chunk header announces {n} items but the chunk is only {len(self.data)} bytes")

    @cached_property
    def num_items(self) -> int:
        return int.from_bytes(self.data[:4], "little")

    @property
    def offsets(self) -> np.ndarray:
        """The ``N + 1`` absolute item offsets as a read-only uint32 array."""
        return np.frombuffer(self.data, dtype="<u4", count=self.num_items + 1, offset=4)

    @cached_property
    def _spans(self) -> list[int]:
        # The offsets table as Python ints, read once per chunk (item lookups are then list indexing).
        spans: list[int] = self.offsets.tolist()
        return spans

    @cached_property
    def _memory(self) -> memoryview:
        return memoryview(self.data)

    @cached_property
    def _offsets64(self) -> np.ndarray:
        return self.offsets.astype(np.int64)

    def spans(self, items: Sequence[int] | np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``(begins, ends)``: the byte spans of ``items`` (chunk-local ids) as int64 arrays.

        Raises:
            FormatError: an id is outside ``[0, num_items)`` or an item lies outside the chunk (the
                error :meth:`item` raises for the first such id).
        """
        ids = np.asarray(items, dtype=np.int64)
        offsets = self._offsets64
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= len(offsets) - 1):
            self.item(int(ids[(ids < 0) | (ids >= len(offsets) - 1)][0]))
        begins = offsets[ids]
        ends = offsets[ids + 1]
        bad = (ends > len(self.data)) | (begins > ends)
        if bool(bad.any()):
            self.item(int(ids[bad][0]))
        return begins, ends

    def item(self, i: int) -> memoryview:
        """Item ``i`` (0-based, chunk-local) as a zero-copy view.

        Raises:
            FormatError: ``i`` is outside ``[0, num_items)`` or the chunk is truncated.
        """
        spans = self._spans
        if not 0 <= i < len(spans) - 1:
            raise FormatError(f"item {i} is outside this chunk of {len(spans) - 1} items")
        begin, end = spans[i], spans[i + 1]
        if end > len(self.data) or begin > end:
            raise FormatError(f"item {i} spans bytes [{begin}, {end}) but the chunk holds {len(self.data)} bytes")
        return self._memory[begin:end]


class ChunkBuilder:
    """Decides where chunks end, with LitData's exact rule (spec/format-and-write.md §3.3).

    Items are added in order. A chunk is closed just before the item that makes the running
    payload size exceed ``chunk_bytes`` (header not counted) or the running count exceed
    ``chunk_size``; that item starts the next chunk. An item that alone exceeds the budget forms a
    one-item chunk. The count of a TokensLoader item is its token count (``dim``).

    Args:
        chunk_size: Item (or token) budget per chunk, or ``None``.
        chunk_bytes: Payload byte budget per chunk, or ``None``. Exactly one must be given.
    """

    def __init__(self, *, chunk_size: int | None, chunk_bytes: int | None) -> None:
        if (chunk_size is None) == (chunk_bytes is None):
            raise FormatError("give exactly one of chunk_size and chunk_bytes")
        self._chunk_size = chunk_size
        self._chunk_bytes = chunk_bytes
        self._items: list[bytes] = []
        self._dims: list[int | None] = []
        self._bytes = 0
        self._count = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def nbytes(self) -> int:
        """Payload bytes buffered for the open chunk (header not counted)."""
        return self._bytes

    def closes_before(self, size: int, dim: int | None = None) -> bool:
        """True if adding an item of ``size`` bytes (and ``dim`` tokens) would first close the open chunk."""
        count = dim if dim is not None else 1
        return bool(self._items) and (
            (self._chunk_bytes is not None and self._bytes + size > self._chunk_bytes)
            or (self._chunk_size is not None and self._count + count > self._chunk_size)
        )

    def add(
        self, item: bytes, dim: int | None = None, size: int | None = None
    ) -> tuple[list[bytes], list[int | None]] | None:
        """Buffer ``item``; return the items (and dims) of a chunk this closed, else ``None``.

        ``size`` is what the item counts toward ``chunk_bytes`` (default ``len(item)``)."""
        size, count = len(item) if size is None else size, dim if dim is not None else 1
        closed = self.flush() if self.closes_before(size, dim) else None
        self._items.append(item)
        self._dims.append(dim)
        self._bytes += size
        self._count += count
        return closed

    def flush(self) -> tuple[list[bytes], list[int | None]] | None:
        """Return everything buffered as one chunk (``None`` when empty) and start afresh."""
        if not self._items:
            return None
        out = (self._items, self._dims)
        self._items, self._dims, self._bytes, self._count = [], [], 0, 0
        return out
