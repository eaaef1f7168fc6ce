"""Chunk offset tables kept in memory, so a remote item read (``ds[i]``, ``ds["id"]``) is one range read.

An uncompressed chunk starts with its item count and ``N + 1`` offsets (``format/_chunk.py``). Without
them a single item costs two range reads: 8 bytes of offsets, then the item. :class:`OffsetTables`
fetches a chunk's whole table the first time an item of that chunk is read in this process (one range
read of ``4 * (N + 2)`` bytes), keeps it (least recently used first out, at most ``max_bytes`` in all),
and from then on every item of that chunk is exactly one ranged GET of its own bytes::

    first item of chunk c:   GET chunk-c [0, 4(N+2))   GET chunk-c [begin_i, end_i)
    every later item of c:                             GET chunk-c [begin_j, end_j)

A table is bound to the :class:`~litstream.read.source._source.DatasetSource` (so to one ``index.json``) that
owns it, and to the version (ETag) of the chunk file it was read from, where the store reports one
(S3, GCS, Azure, memory, local through obstore): every item read asks for that version only
(``If-Match``). A chunk rewritten under the same name while a reader runs (LitData's in-place
``dataset_update``; litstream's writes new names) fails that condition; the reader then reads the new
file's table and the item from the new file, never mixing two versions. Without ETags (HTTP stores)
nothing is checked, as with the two reads. A chunk whose table exceeds ``max_table_bytes`` falls back to
the two small reads.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import anyio

from ..._core._errors import FormatError, StorageError
from ...format._chunk import header_length, item_span_offset, parse_chunk_offsets

if TYPE_CHECKING:
    import numpy as np

    from ...format._index import ChunkInfo
    from ...storage._store import Store

__all__ = ["OffsetTables"]


class OffsetTables:
    """Per-process cache of chunk offset tables (see the module docstring).

    Args:
        max_bytes: Memory for all tables together, in bytes (default 32 MiB: 8 M items' offsets as int64).
        max_table_bytes: The largest header fetched whole, in bytes (default 1 MiB, a chunk of 262,142
            items); larger chunks read the item's 8 offset bytes each time instead.
    """

    def __init__(self, max_bytes: int = 32 * 2**20, max_table_bytes: int = 2**20) -> None:
        self.max_bytes = max_bytes
        self.max_table_bytes = max_table_bytes
        self._tables: OrderedDict[str, tuple[np.ndarray, str | None]] = OrderedDict()  # offsets, ETag
        self._bytes = 0
        self._loading: dict[str, anyio.Event] = {}

    def __len__(self) -> int:
        return len(self._tables)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached tables."""
        return self._bytes

    async def read_item(self, store: Store, info: ChunkInfo, item: int) -> bytes:
        """The bytes of item ``item`` (chunk-local) of the chunk ``info``: one ranged GET once its table is held.

        Raises:
            FormatError: the chunk's header is damaged or disagrees with the index, or the file ends
                inside the item.
            StorageError: a read failed, or the chunk changed again while it was being re-read.
        """
        if header_length(info.chunk_size) > self.max_table_bytes:
            begin, end = await self._pair(store, info, item)
            return self._whole(info, item, await store.get_range(info.filename, begin, end - begin), end - begin)
        for _ in range(2):
            table, version = await self._table(store, info)
            begin, end = int(table[item]), int(table[item + 1])
            if begin == end:  # an empty item (an Arrow chunk's): nothing to ask for
                return b""
            answer = await _versioned_read(store, info.filename, begin, end - begin, version)
            if answer is not None:
                return self._whole(info, item, answer[0], end - begin)
            self._forget(info.filename)  # rewritten since its table was read: read the new table
        raise StorageError(
            f"{store.url}/{info.filename} changed twice while item {item} was read; retry, or open the dataset again"
        )

    @staticmethod
    def _whole(info: ChunkInfo, item: int, data: bytes, length: int) -> bytes:
        if len(data) != length:
            raise FormatError(f"{info.filename} ends inside item {item}; the file is incomplete — re-run optimize")
        return data

    def _forget(self, name: str) -> None:
        entry = self._tables.pop(name, None)
        if entry is not None:
            self._bytes -= entry[0].nbytes

    async def _table(self, store: Store, info: ChunkInfo) -> tuple[np.ndarray, str | None]:
        name = info.filename
        while True:
            entry = self._tables.get(name)
            if entry is not None:
                self._tables.move_to_end(name)
                return entry
            pending = self._loading.get(name)
            if pending is None:
                break
            await pending.wait()  # another task is fetching this table; use its answer (or try ourselves)
        done = self._loading[name] = anyio.Event()
        try:
            answer = await _versioned_read(store, name, 0, header_length(info.chunk_size), None)
            assert answer is not None  # an unconditional read always answers
            header, version = answer
            table = parse_chunk_offsets(
                header, num_items=info.chunk_size, chunk_bytes=info.chunk_bytes, source=f"{store.url}/{name}"
            )
            self._keep(name, (table, version))
            return table, version
        finally:
            del self._loading[name]
            done.set()

    def _keep(self, name: str, entry: tuple[np.ndarray, str | None]) -> None:
        self._forget(name)
        self._tables[name] = entry
        self._bytes += entry[0].nbytes
        while len(self._tables) > 1 and self._bytes > self.max_bytes:
            _, (old, _) = self._tables.popitem(last=False)
            self._bytes -= old.nbytes

    @staticmethod
    async def _pair(store: Store, info: ChunkInfo, item: int) -> tuple[int, int]:
        span = await store.get_range(info.filename, item_span_offset(item), 8)
        if len(span) != 8:
            raise FormatError(
                f"{info.filename} is shorter than its header ({header_length(info.chunk_size)} bytes); re-run optimize"
            )
        begin, end = int.from_bytes(span[:4], "little"), int.from_bytes(span[4:], "little")
        if not header_length(info.chunk_size) <= begin <= end <= info.chunk_bytes:
            raise FormatError(
                f"item {item} of {info.filename} spans bytes [{begin}, {end}), outside the chunk's "
                f"{info.chunk_bytes} bytes; the chunk is damaged — re-run optimize"
            )
        return begin, end


async def _versioned_read(
    store: Store, name: str, start: int, length: int, version: str | None
) -> tuple[bytes, str | None] | None:
    """``store.get_range_versioned`` where the store has it; else ``get_range`` and no version."""
    method = getattr(store, "get_range_versioned", None)
    if method is None:
        return await store.get_range(name, start, length), None
    answer: tuple[bytes, str | None] | None = await method(name, start, length, version)
    return answer
