"""Raw streaming: items of never-optimized files, fetched by :class:`RawFetcher`, with look-ahead.

An item is one file (its bytes, or its local path with ``item_type="path"``) or a group of files (a list
of those), as ``StreamingRawDataset.setup``
arranged them. :class:`RawReader` serves batches of items by index, keeps a bounded look-ahead of
prefetched items, and makes :class:`RawStream`, the async form (``async for`` / ``async with``).
Transforms are not applied here: the sync facade applies them on its own thread, the async form in a
worker thread.
"""

from __future__ import annotations

import random
import sys
from collections import OrderedDict, deque
from functools import partial
from typing import TYPE_CHECKING, Any, Union

import anyio
import anyio.lowlevel
import anyio.to_thread

from ..._core._errors import raise_collapsed
from ...index._raw import FileMetadata, key_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

    from ._fetch import RawFetcher
    from ._files import RawFiles

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["AHEAD_BYTES", "RawItem", "RawReader", "RawStream", "ahead_stop", "epoch_order"]

AHEAD_BYTES = 256 * 1024 * 1024
"""Bytes of items the look-ahead of an iteration fetches beyond the current window (at least one window)."""

RawItem = Union[FileMetadata, "list[FileMetadata]"]
_Value = Union[bytes, str, "list[Any]"]


class RawReader:
    """Fetches items by index for one dataset in one process.

    Args:
        fetcher: The fetch engine (holds the store).
        root: The dataset's location, as :attr:`FileMetadata.path` values start.
        items: The dataset's items (files, or lists of files).
        prefetch_cache_size: The most prefetched items held at once.
        files: Serve files through this disk folder (``cache_files=True``, ``item_type="path"``); ``None``
            fetches every file into memory.
    """

    def __init__(
        self,
        fetcher: RawFetcher,
        root: str,
        items: Sequence[RawItem],
        prefetch_cache_size: int,
        files: RawFiles | None = None,
    ) -> None:
        self.fetcher = fetcher
        self.files = files
        self.items = items
        self._root = root
        self._cache_size = prefetch_cache_size
        self._ready: OrderedDict[int, _Value] = OrderedDict()
        self._pending: dict[int, anyio.Event] = {}
        self._token: object = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_ready=OrderedDict(), _pending={}, _token=None)
        return state

    def _files(self, index: int) -> list[FileMetadata]:
        item = self.items[index]
        return list(item) if isinstance(item, list) else [item]

    def size_of(self, index: int) -> int:
        """Bytes of item ``index`` (the sum for a group)."""
        return sum(f.size for f in self._files(index))

    def _same_loop(self) -> None:
        token = anyio.lowlevel.current_token()
        if token != self._token:  # a new portal: the old loop's events are dead
            self._token, self._pending = token, {}

    async def _fetch_items(self, indices: Sequence[int]) -> list[_Value]:
        flat: list[tuple[int, FileMetadata]] = [(i, f) for i in indices for f in self._files(i)]
        keys = [key_of(f.path, self._root) for _, f in flat]
        try:
            sizes = [f.size for _, f in flat]
            if self.files is None:
                blobs: Sequence[bytes | str] = await self.fetcher.fetch_many(keys, sizes)
            else:
                blobs = await self.files.values(self.fetcher, keys, sizes)
        except BaseExceptionGroup as group:
            raise_collapsed(group)
        out: list[_Value] = []
        pos = 0
        for i in indices:
            item = self.items[i]
            if isinstance(item, list):
                out.append(list(blobs[pos : pos + len(item)]))
                pos += len(item)
            else:
                out.append(blobs[pos])
                pos += 1
        return out

    async def get_items(self, indices: Sequence[int]) -> list[_Value]:
        """The raw values of ``indices`` (bytes, or a list of bytes for a group), in that order.

        Items prefetched by :meth:`prefetch` are taken from the look-ahead (and leave it); the rest are
        fetched together, concurrently.
        """
        self._same_loop()
        found: dict[int, _Value] = {}
        for i in indices:
            event = self._pending.get(i)
            if event is not None:
                await event.wait()
            value = self._ready.pop(i, None)
            if value is not None:
                found[i] = value
        missing = list(dict.fromkeys(i for i in indices if i not in found))
        if missing:
            found.update(zip(missing, await self._fetch_items(missing), strict=False))
        return [found[i] for i in indices]

    def reserve(self, items: int) -> None:
        """Let the look-ahead hold at least ``items`` prefetched items (it never shrinks)."""
        self._cache_size = max(self._cache_size, items)

    async def prefetch(self, indices: Sequence[int], ahead: bool = True) -> None:
        """Fetch ``indices`` into the look-ahead (best effort: a failure leaves them to be fetched on demand).

        ``ahead=False``: items about to be asked for (not counted as look-ahead in the statistics).
        """
        claimed = self.claim(indices)
        if claimed is not None:
            await self.fill(*claimed, ahead=ahead)

    def claim(self, indices: Sequence[int]) -> tuple[list[int], anyio.Event] | None:
        """Mark the items of ``indices`` not held or in flight as in flight, now (on the event loop's thread),
        so that nothing else fetches them; pass the result to :meth:`fill` (``None``: nothing to fetch)."""
        self._same_loop()
        todo = [i for i in indices if i not in self._ready and i not in self._pending][: max(0, self._cache_size)]
        if not todo:
            return None
        event = anyio.Event()
        for i in todo:
            self._pending[i] = event
        return todo, event

    async def fill(self, todo: list[int], event: anyio.Event, *, ahead: bool = True) -> None:
        """Fetch the items :meth:`claim` marked into the look-ahead; a failure leaves them to be fetched on
        demand."""
        try:
            values = await self._fetch_items(todo)
        except Exception:
            pass
        else:
            self.fetcher.ahead += len(todo) if ahead else 0
            for i, value in zip(todo, values, strict=False):
                self._ready[i] = value
            while len(self._ready) > self._cache_size:
                self._ready.popitem(last=False)
        finally:
            for i in todo:
                self._pending.pop(i, None)
            event.set()


class RawStream:
    """The async form of ``StreamingRawDataset``: an async iterator and an async context manager.

    * ``async for item in ds.astream()``: items are fetched in windows inside ``__anext__``; nothing
      outlives the call.
    * ``async with ds.astream() as items: async for item in items:``: a background task fetches the next
      window while the current one is consumed; leaving the block cancels and joins it.

    Items come in ``indices`` order, transformed (in a worker thread) when a transform is set.
    """

    def __init__(
        self,
        reader: RawReader,
        indices: Sequence[int],
        window: int,
        transform: Callable[[Any], Any] | None,
        ahead: int = 0,
    ) -> None:
        self._reader = reader
        self._todo: deque[int] = deque(indices)
        self._window = max(1, window)
        self._transform = transform
        self._ahead = max(0, ahead)
        self._items: deque[Any] = deque()
        self._tg: TaskGroup | None = None
        self._receive: MemoryObjectReceiveStream[list[Any]] | None = None
        self._entered = False

    def _next_window(self) -> list[int]:
        return [self._todo.popleft() for _ in range(min(self._window, len(self._todo)))]

    async def _load(self, indices: list[int]) -> list[Any]:
        values = await self._reader.get_items(indices)
        if self._transform is None:
            return values
        transform = self._transform
        return await anyio.to_thread.run_sync(lambda: [transform(v) for v in values])

    async def _produce(self, send: MemoryObjectSendStream[list[Any]]) -> None:
        assert self._tg is not None
        windows = [self._next_window() for _ in range(-(-len(self._todo) // self._window))]
        self._reader.reserve((self._ahead + 1) * self._window)
        started = 0
        async with send:
            for k, window in enumerate(windows):
                # the next windows are fetched while this one is fetched and consumed (bounded in bytes)
                stop = ahead_stop(k, started, self._ahead, windows, self._reader)
                for j in range(started, stop):  # window k first: requests are served in the order started
                    claimed = self._reader.claim(windows[j])  # now: window k's own load waits for it
                    if claimed is not None:
                        self._tg.start_soon(partial(self._reader.fill, *claimed, ahead=j > k))
                started = stop
                await send.send(await self._load(window))

    async def __aenter__(self) -> RawStream:
        if self._entered:
            raise RuntimeError("this astream() object was already entered; call ds.astream() again")
        self._entered = True
        send, receive = anyio.create_memory_object_stream[list[Any]](1)
        self._receive = receive
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._produce, send)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._tg is not None
        assert self._receive is not None
        self._tg.cancel_scope.cancel()
        try:
            return await self._tg.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            raise_collapsed(group)
        finally:
            self._receive.close()

    def __aiter__(self) -> RawStream:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self._receive is not None:
                try:
                    self._items.extend(await self._receive.receive())
                except anyio.EndOfStream:
                    raise StopAsyncIteration from None
            elif self._todo:
                self._items.extend(await self._load(self._next_window()))
            else:
                raise StopAsyncIteration
        return self._items.popleft()


def ahead_stop(k: int, started: int, ahead: int, windows: Sequence[Sequence[int]], reader: RawReader) -> int:
    """While window ``k`` is read: the windows below the returned index should have their look-ahead started.

    At most ``ahead`` windows beyond ``k``, holding no more than :data:`AHEAD_BYTES` beyond the first of
    them; windows below ``started`` are already under way.
    """
    stop = max(started, k + 1)
    limit = min(len(windows), k + 1 + ahead)
    held = sum(reader.size_of(i) for w in windows[k + 1 : stop] for i in w)
    while stop < limit:
        size = sum(reader.size_of(i) for i in windows[stop])
        if stop > k + 1 and held + size > AHEAD_BYTES:
            break
        held += size
        stop += 1
    return stop


def epoch_order(length: int, shuffle: bool, seed: int, epoch: int) -> list[int]:
    """``range(length)``, or a permutation of it drawn from ``(seed, epoch)`` when ``shuffle``."""
    order = list(range(length))
    if shuffle:
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order
