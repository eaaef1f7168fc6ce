"""``SampleStream``: the async iterator ``astream`` returns, which opens the dataset, prefetches chunks and
serves their samples on asyncio or trio."""

from __future__ import annotations

import sys
from collections import deque
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from ..._core._errors import raise_collapsed
from ..engine._decode import work_batches
from ..engine._engine import ChunkWork, produce_chunks, works_for
from ..plan._pieces import Piece, ReadPlanArgs, piece_chunks, plan_pieces

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from types import TracebackType

    from anyio.abc import TaskGroup
    from anyio.streams.memory import MemoryObjectReceiveStream

    from .._spec import ReadSpec
    from ..plan._session import StreamPosition
    from ..plan._subset import Selection
    from ..source._source import DatasetSource

__all__ = ["SampleStream"]


class SampleStream:
    """The object :func:`astream` returns: an async iterator and an async context manager.

    * ``async for sample in astream(...)``: chunks are fetched when needed, up to
      ``max_pre_download`` at once inside the call that needs them; no task outlives a
      ``__anext__`` call, so breaking out early leaves nothing running.
    * ``async with astream(...) as samples: async for sample in samples:``: a background task group
      prefetches continuously (bounded by ``max_pre_download`` chunks); leaving the block — normally,
      by ``break``, by an exception or by cancellation — cancels and joins it.
    * Resume: :meth:`state_dict` is the stream's position (the samples it returned); pass it to
      ``astream(..., state=...)`` to serve exactly the rest of that epoch.
    """

    def __init__(
        self,
        spec: ReadSpec,
        plan: ReadPlanArgs,
        *,
        max_pre_download: int,
        select: Callable[[Sequence[int]], Selection | None] | None = None,
        pieces: Sequence[Piece] | None = None,
        position: StreamPosition | None = None,
    ) -> None:
        self._spec = spec  # what to read and how (``read._spec``): opened on first use
        self._position = position  # astream's own reader: its checkpoint (state_dict())
        self._returned = 0  # samples returned by __anext__
        self._select = select
        self._given_pieces = pieces  # a composite's member stream; None: plan them from ``plan``
        self._plan = plan
        self._max_pre_download = max_pre_download
        self._transform = spec.transform
        self._source: DatasetSource | None = None
        self._pieces: deque[Piece] | None = None
        self._ready: deque[ChunkWork] = deque()
        self._samples: deque[Any] = deque()
        self._batches: Iterator[list[Any]] | None = None  # the chunk being decoded
        self._task_group: TaskGroup | None = None
        self._receive: MemoryObjectReceiveStream[ChunkWork] | None = None
        self._entered = False
        self._finished = False

    async def _open(self) -> DatasetSource:
        if self._source is None:
            self._source = await self._spec.open()
            if self._given_pieces is not None:
                self._pieces = deque(self._given_pieces)
            else:
                selection = None if self._select is None else self._select(self._source.chunk_sizes)
                if self._position is not None:  # fresh, strict or elastic resume (read.plan._session)
                    self._pieces = deque(self._position.open(self._source, selection))
                else:
                    self._pieces = deque(plan_pieces(self._source, self._plan, selection))
        return self._source

    async def __aenter__(self) -> SampleStream:
        if self._entered:
            raise RuntimeError("this astream(...) object was already entered; call astream() again")
        self._entered = True
        source = await self._open()
        assert self._pieces is not None
        send, receive = anyio.create_memory_object_stream[ChunkWork](1)
        self._receive = receive
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(
            lambda: produce_chunks(source, list(self._pieces or ()), send, max_pre_download=self._max_pre_download)
        )
        self._pieces.clear()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._task_group is not None
        assert self._receive is not None
        self._task_group.cancel_scope.cancel()
        try:
            return await self._task_group.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            raise_collapsed(group)  # the root cause itself, not wrapped; the others as its notes
        finally:
            self._receive.close()
            self._finished = True

    def __aiter__(self) -> SampleStream:
        return self

    async def __anext__(self) -> Any:
        while not self._samples:
            if self._batches is not None:  # decode the current chunk batch by batch, off the loop
                batch = await anyio.to_thread.run_sync(next, self._batches, None)
                if batch is not None:
                    self._samples.extend(batch)
                    continue
                self._batches = None
            if self._finished:
                raise StopAsyncIteration
            work = await self._next_work()
            if work is None:
                self._finished = True
                raise StopAsyncIteration
            assert self._source is not None
            self._batches = work_batches(self._source, work, self._transform)
        self._returned += 1
        return self._samples.popleft()

    def state_dict(self) -> dict[str, Any] | None:
        """The position of this stream as a checkpoint: pass it as ``astream(..., state=...)`` to resume.

        A dict of plain values (picklable, JSON-compatible) in the layout of
        ``StreamingDataset.state_dict`` (``read/plan/_checkpoint.py``), counting the samples this stream
        returned so far. Before iteration has started (the dataset is not open yet) it is the
        ``state`` the stream was given, or ``None`` (nothing served: start without a state). After
        the last sample, resuming from it starts the next epoch.

        Raises:
            RuntimeError: a stream a Combined / Parallel dataset made for one of its members
                (save the composite stream's state instead).
        """
        if self._position is None:
            raise RuntimeError("this member stream has no state of its own; call state_dict() on the composite stream")
        if self._source is None:
            return None if self._position.state is None else self._position.checkpoint(0)
        return self._position.checkpoint(self._returned)

    async def _next_work(self) -> ChunkWork | None:
        if self._receive is not None:
            try:
                return await self._receive.receive()
            except anyio.EndOfStream:
                return None
        source = await self._open()
        assert self._pieces is not None
        if not self._ready and self._pieces:
            # Take whole pieces up to max_pre_download chunks (at least one piece, however many
            # chunks its window holds) and fetch their chunks together.
            batch = [self._pieces.popleft()]
            needed = len(piece_chunks(batch[0][0]))
            while self._pieces and needed + len(piece_chunks(self._pieces[0][0])) <= self._max_pre_download:
                needed += len(piece_chunks(self._pieces[0][0]))
                batch.append(self._pieces.popleft())
            views: dict[int, Any] = {}
            limiter = anyio.CapacityLimiter(self._max_pre_download)

            async def fetch(chunk_index: int) -> None:
                async with limiter:
                    views[chunk_index] = await source.read_chunk(chunk_index)

            try:
                async with anyio.create_task_group() as tg:
                    for chunk_index in dict.fromkeys(c for piece, _ in batch for c in piece_chunks(piece)):
                        tg.start_soon(fetch, chunk_index)
            except BaseExceptionGroup as group:
                raise_collapsed(group)
            for piece, order in batch:
                self._ready.extend(works_for(piece, [views[c] for c in piece_chunks(piece)], order))
        return self._ready.popleft() if self._ready else None
