"""``MemoryFetcher``: objects fetched whole into memory in ranged GETs, never written to disk.

The cacheless twin of :class:`~litstream.storage._transfer.Downloader` (a reader's ``cache_chunks=False``,
``read/_spec.py``): the same request gate (at most ``max_concurrency`` requests and ``max_bytes_in_flight``
bytes in flight, requests served in ticket order so the chunk needed first arrives first), the same ranged
GETs (``_spans``: a short first GET when a reader decodes while the object arrives), but each piece is copied
into one buffer of the object's size as it arrives instead of into a cache file.

The buffer is an anonymous mapping, reused for a later object once nothing refers to it (:class:`_Buffers`),
a new one with its pages mapped piece by piece in the pieces' worker threads (one ``MADV_POPULATE_WRITE``
call each, not a page fault per page, never on the event loop). It is handed out as a :class:`memoryview`
so that nothing treats it as a file mapping whose pages could be dropped and read again
(``read/engine/_pages.py``, ``read/cache/_verify.py``): dropped anonymous pages read as zeros.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
from typing import TYPE_CHECKING

import anyio.to_thread

from .._core._errors import StorageError
from ._ordered_fetch import OrderedFetcher, PieceSink

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._base import Store
    from ._ordered_fetch import Once
    from ._progress import Progress

__all__ = ["MemoryFetcher"]

_MADV_POPULATE_WRITE = 23  # Linux >= 5.14; not exported by the mmap module of Python 3.11
_KEEP = 6  # buffers a fetcher keeps for reuse: about what one reader holds at once (prefetch, hand-over, decoding)


def _anonymous(size: int) -> mmap.mmap:
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    try:
        return mmap.mmap(-1, size, flags=flags) if flags else mmap.mmap(-1, size)
    except OSError as exc:
        raise StorageError(f"cannot allocate {size} bytes of memory for a chunk: {exc}") from exc


def _unused(mapped: mmap.mmap) -> bool:
    """Whether no buffer of ``mapped`` is alive any more (a decoded sample, a view, a chunk being read): it
    cannot be resized then, which is the one public probe of its exports (a no-op ``mremap`` otherwise)."""
    try:
        mapped.resize(len(mapped))
    except (BufferError, OSError, ValueError, SystemError):  # in use, or a platform that cannot resize maps
        return False
    return True


def _populate(mapped: mmap.mmap, start: int, length: int) -> None:
    """Map the pages of bytes ``[start, start + length)`` of a new anonymous mapping now, in one call (no page
    fault per page as they are written); a no-op where the kernel cannot."""
    begin = start - start % mmap.PAGESIZE
    with contextlib.suppress(OSError, ValueError):
        mapped.madvise(_MADV_POPULATE_WRITE, begin, start + length - begin)


class _Buffers:
    """Chunk buffers: anonymous mappings, each reused once nothing refers to it any more.

    A new mapping's pages are fresh memory that the kernel zeroes and maps page by page (on this project's
    VMs ~0.7 µs per 4 KiB page: ~0.1 CPU-s per 256 MB); a reused one costs nothing. At most ``_KEEP`` are
    kept, so a reader's buffers stay bounded by what it holds at once.
    """

    def __init__(self) -> None:
        self._kept: list[mmap.mmap] = []

    def take(self, size: int) -> tuple[mmap.mmap, bool]:
        """``(mapping of at least size bytes, whether it is new)``."""
        for mapped in self._kept:
            if len(mapped) >= size and len(mapped) <= 2 * size and _unused(mapped):
                return mapped, False
        mapped = _anonymous(size)
        if len(self._kept) < _KEEP:
            self._kept.append(mapped)
        else:  # replace one not in use (the smallest), if any
            free = [k for k, kept in enumerate(self._kept) if _unused(kept)]
            if free:
                self._kept[min(free, key=lambda k: len(self._kept[k]))] = mapped
        return mapped, True


class _BufferSink(PieceSink):
    """An object's buffer (``fresh``: the new mapping under it, whose pages each piece maps first; ``None``: a
    reused one): a store with ``get_into_buffer`` streams each piece into it, other answers are copied in."""

    def __init__(self, buffer: memoryview, fresh: mmap.mmap | None) -> None:
        self._buffer, self._fresh = buffer, fresh

    async def prepare(self, start: int, length: int) -> None:
        if self._fresh is not None and length:
            await anyio.to_thread.run_sync(_populate, self._fresh, start, length)

    async def stream(self, store: Store, name: str, start: int, length: int | None) -> int | None:
        into = getattr(store, "get_into_buffer", None)
        if into is None:
            return None
        end = start + length if length is not None else len(self._buffer)
        received: int = await into(name, self._buffer[start:end], start, length)
        return received

    async def write(self, data: bytes | memoryview, start: int) -> None:
        self._buffer[start : start + len(data)] = data


class MemoryFetcher(OrderedFetcher):
    """Fetches objects of ``store`` whole into memory (see the module docstring).

    It may serve successive event loops (one portal per epoch), one at a time.

    Args:
        store: Where the objects are.
        max_concurrency: Requests in flight at once. Default 8.
        max_bytes_in_flight: Bytes requested but not yet copied into their buffer, at most. Default 256 MiB.
        piece_size: Objects larger than this are fetched in ranged GETs of this many bytes. Default 8 MiB.
        first_piece: The first ranged GET of an object read while it arrives (a ``progress`` given to
            :meth:`fetch`) is this short (at most ``piece_size``), so its first items come quickly. Default 1 MiB.

    Raises:
        ConfigurationError: a limit that is not an int >= 1.
    """

    @functools.cached_property
    def _buffers(self) -> _Buffers:
        return _Buffers()

    async def fetch(
        self,
        name: str,
        *,
        size: int | None = None,
        priority: int | None = None,
        queued: Callable[[], object] | None = None,
        progress: Progress | None = None,
    ) -> memoryview:
        """Object ``name``, whole, in a new buffer of its size.

        Args:
            name: The object's key in the store.
            size: Its length in bytes when known (from ``index.json``); ``None``: one whole GET (with a
                ``progress``: a HEAD request first).
            priority: A :meth:`ticket` (``None``: a new one, after every fetch asked for so far).
            queued: Called once, as soon as every request of this fetch is queued (or this call failed).
            progress: Given the buffer, then told which bytes are in it as they land, so a reader can decode
                while the object arrives; told of a failure too.

        Raises:
            ObjectNotFoundError: the object does not exist.
            StorageError: the transfer failed, or the object is shorter than ``size`` (or longer, for objects
                of at most ``piece_size`` bytes, which are fetched whole).
        """
        ticket = self.ticket() if priority is None else priority
        buffer = await self._reported(lambda once: self._fetch(name, size, ticket, once, progress), queued, progress)
        if progress is not None:
            progress.complete_buffer()
        return buffer

    async def _fetch(self, name: str, size: int | None, ticket: int, queued: Once, progress: Progress | None
                     ) -> memoryview:  # fmt: skip
        gate = self._loop_gate()
        if size is None and progress is None:  # its length unknown (a compressed chunk): one whole GET, no HEAD
            request = gate.enqueue((ticket, 0), self._piece_size)
            queued()
            try:
                await gate.wait(request)
                return memoryview(await self._store.get(name))
            finally:
                gate.drop(request)
        if size is None:
            size = await self._head_size(gate, name, ticket)
        mapped, fresh = self._buffers.take(size) if size else (None, False)
        buffer = memoryview(mapped)[:size] if mapped is not None else memoryview(bytearray())
        if progress is not None:
            progress.opened_buffer(buffer)
        await self._fetch_pieces(gate, name, size, ticket, _BufferSink(buffer, mapped if fresh else None), queued,
                                 progress)  # fmt: skip
        return buffer
