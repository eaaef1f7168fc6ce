"""The writing half of LitData's ``Cache`` (``_torch/_litdata_cache.py``): one rank's open
:class:`~litstream.ChunkWriter` on a private event loop, fed the assigned items in index order."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import anyio

from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    from concurrent.futures import Future

    from anyio.from_thread import BlockingPortal
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ..write._writer import ChunkWriter, EncodedSample

__all__ = ["WriteSession"]


class WriteSession:
    """One rank's open :class:`ChunkWriter` on a private event loop, fed in index order."""

    def __init__(self, cache_dir: str, rank: int, write_args: dict[str, Any]) -> None:
        from .._core._bridge import daemon_portal
        from ..storage._local import LocalFileStore
        from ..write._chunk_pack import check_chunking
        from ..write._writer import ChunkWriter

        self._writer = ChunkWriter(LocalFileStore(cache_dir), rank=rank, **write_args)  # checks the arguments
        self._lock = threading.Lock()
        self._pending: dict[int, EncodedSample] = {}
        self._limits = check_chunking(write_args["chunk_size"], write_args["chunk_bytes"])
        # The run of consecutive pending indices [start, end) that the next chunk begins with, its
        # items (tokens for TokensLoader) and bytes; handed to the writer once it overflows a chunk.
        self._start: int | None = None
        self._end: int | None = None
        self._items = self._bytes = 0
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(daemon_portal())
        self._send, receive = self._portal.call(_make_stream)
        self._future: Future[list[str]] = self._portal.start_task_soon(_own_writer, self._writer, receive)

    def add(self, index: int, sample: Any) -> None:
        with self._lock:
            if index in self._pending:
                raise ConfigurationError(f"cache[{index}] was assigned twice; each index is written once")
            self._pending[index] = self._writer.encode(sample)
            if self._start is None or index < self._start:  # a new run (LitData's min_index), counted afresh
                self._start, self._end, self._items, self._bytes = min(self._pending), None, 0, 0
            elif index != self._end:
                return
            self._end = self._start if self._end is None else self._end
            while self._end in self._pending:  # extend the run of consecutive indices
                item = self._pending[self._end]
                self._items += item.dim or 1
                self._bytes += len(item.item) if item.size is None else item.size
                self._end += 1
            size, limit = self._limits
            if (size is not None and self._items > size) or (limit is not None and self._bytes > limit):
                for i in range(self._start, self._end):  # the run fills a chunk: hand it over in order
                    self._feed(self._pending.pop(i))
                self._start = None

    def _feed(self, encoded: EncodedSample) -> None:
        try:
            self._portal.call(self._send.send, encoded)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._future.result()  # raises the writer's error
            raise

    def finish(self) -> list[str]:
        """Feed the items still waiting (in index order), close the writer; its written file names."""
        try:
            with self._lock:
                for index in sorted(self._pending):
                    self._feed(self._pending.pop(index))
            self._portal.call(self._send.aclose)
            return self._future.result()
        finally:
            self._stack.close()


async def _make_stream() -> tuple[MemoryObjectSendStream[EncodedSample], MemoryObjectReceiveStream[EncodedSample]]:
    return anyio.create_memory_object_stream["EncodedSample"](0)


async def _own_writer(writer: ChunkWriter, receive: MemoryObjectReceiveStream[EncodedSample]) -> list[str]:
    async with writer, receive:
        async for encoded in receive:
            await writer.add_encoded(encoded)
    return list(writer.written_files)
