"""Async streams of Combined / Parallel datasets: one :class:`SampleStream` per member, mixed or zipped.

Like :class:`~litstream.read._astream.SampleStream`, each object is both an async iterator
(``async for``: members fetch on demand inside ``__anext__``, nothing outlives a call) and an async
context manager (``async with``: every member prefetches in its own task group; leaving the block
cancels and joins them all). The plan (which member items this reader serves, and the mixing
order) is computed on first use in a worker thread, since it may read the members' indexes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._errors import PlanError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import TracebackType

    from ._astream import SampleStream

__all__ = ["CombinedSampleStream", "ComposedSampleStream", "ParallelSampleStream"]


class ComposedSampleStream:
    """Base of :class:`CombinedSampleStream` and :class:`ParallelSampleStream` (see the module docstring)."""

    def __init__(self, prepare: Callable[[], tuple[list[SampleStream], Any]]) -> None:
        self._prepare = prepare
        self._members: list[SampleStream] | None = None
        self._plan: Any = None
        self._position = 0
        self._stack: contextlib.AsyncExitStack | None = None

    async def _ensure(self) -> list[SampleStream]:
        if self._members is None:
            prepared, self._plan = await anyio.to_thread.run_sync(self._prepare)
            self._members = prepared
            return prepared
        return self._members

    async def __aenter__(self) -> ComposedSampleStream:
        if self._stack is not None:
            raise RuntimeError("this stream was already entered; call astream() again")
        members = await self._ensure()
        stack = contextlib.AsyncExitStack()
        self._stack = stack
        try:
            for member in members:
                await stack.enter_async_context(member)
        except BaseException:
            await stack.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._stack is not None
        return await self._stack.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> ComposedSampleStream:
        return self

    async def __anext__(self) -> Any:
        raise NotImplementedError

    @staticmethod
    async def _take(member: SampleStream, which: int) -> Any:
        try:
            return await member.__anext__()
        except StopAsyncIteration:
            raise PlanError(f"dataset {which} ran out before its planned share") from None


class CombinedSampleStream(ComposedSampleStream):
    """Samples of a ``CombinedStreamingDataset`` in the order one reader serves them.

    ``prepare()`` returns the member streams and the member id of every sample, in order.
    """

    async def __anext__(self) -> Any:
        members = await self._ensure()
        order: Sequence[int] = self._plan
        if self._position >= len(order):
            raise StopAsyncIteration
        which = order[self._position]
        self._position += 1
        return await self._take(members[which], which)


class ParallelSampleStream(ComposedSampleStream):
    """Tuples of a ``ParallelStreamingDataset`` (one sample of every member per step).

    ``prepare()`` returns the member streams and ``(count, finish)``: the number of steps and a
    function that turns the tuple of samples and the step number into the item (the wrapper's
    transform); it runs on the event loop's thread.
    """

    async def __anext__(self) -> Any:
        members = await self._ensure()
        count, finish = self._plan
        if self._position >= count:
            raise StopAsyncIteration
        samples = tuple([await self._take(member, i) for i, member in enumerate(members)])
        step = self._position
        self._position += 1
        return finish(samples, step)
