"""Chunk offset tables kept in memory, so a remote item read (``ds[i]``, ``ds["id"]``) is one range read.

An uncompressed chunk starts with its item count and ``N + 1`` offsets (``format/_chunk.py``). Without
them a single item costs two range reads: 8 bytes of offsets, then the item. :class:`OffsetTables`
fetches a chunk's whole table the first time an item of that chunk is read in this process (one range
read of ``4 * (N + 2)`` bytes), keeps it (least recently used first out, at most ``max_bytes`` in all),
and from then on every item of that chunk is exactly one ranged GET of its own bytes::

    first item of chunk c:   GET chunk-c [0, 4(N+2))   GET chunk-c [begin_i, end_i)
    every later item of c:                             GET chunk-c [begin_j, end_j)

A table is bound to the :class:`~litstream.read._source.DatasetSource` (so to one ``index.json``) that
owns it; a chunk rewritten under the same name while a reader runs (LitData's in-place
``dataset_update``; litstream's writes new names) is seen by that reader only after it reopens the
dataset. A chunk whose table exceeds ``max_table_bytes`` falls back to the two small reads.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import anyio

from .._errors import FormatError
from ..format._chunk import header_length, item_span_offset, parse_chunk_offsets

if TYPE_CHECKING:
    import numpy as np

    from ..format._index import ChunkInfo
    from ..storage._store import Store

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
        self._tables: OrderedDict[str, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._loading: dict[str, anyio.Event] = {}

    def __len__(self) -> int:
        return len(self._tables)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached tables."""
        return self._bytes

    async def span(self, store: Store, info: ChunkInfo, item: int) -> tuple[int, int]:
        """``(begin, end)``: the bytes of item ``item`` (chunk-local) of the chunk ``info``, exclusive end.

        Raises:
            FormatError: the chunk's header is damaged or disagrees with the index.
            StorageError: the header read failed.
        """
        if header_length(info.chunk_size) > self.max_table_bytes:
            return await self._pair(store, info, item)
        table = await self._table(store, info)
        return int(table[item]), int(table[item + 1])

    async def _table(self, store: Store, info: ChunkInfo) -> np.ndarray:
        name = info.filename
        while True:
            table = self._tables.get(name)
            if table is not None:
                self._tables.move_to_end(name)
                return table
            pending = self._loading.get(name)
            if pending is None:
                break
            await pending.wait()  # another task is fetching this table; use its answer (or try ourselves)
        done = self._loading[name] = anyio.Event()
        try:
            header = await store.get_range(name, 0, header_length(info.chunk_size))
            table = parse_chunk_offsets(
                header, num_items=info.chunk_size, chunk_bytes=info.chunk_bytes, source=f"{store.url}/{name}"
            )
            self._keep(name, table)
            return table
        finally:
            del self._loading[name]
            done.set()

    def _keep(self, name: str, table: np.ndarray) -> None:
        self._tables[name] = table
        self._bytes += table.nbytes
        while len(self._tables) > 1 and self._bytes > self.max_bytes:
            _, old = self._tables.popitem(last=False)
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
