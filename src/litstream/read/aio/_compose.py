"""Async streams of Combined / Parallel datasets: one :class:`SampleStream` per member, mixed or zipped.

Like :class:`~litstream.read.aio._sample_stream.SampleStream`, each object is both an async iterator
(``async for``: members fetch on demand inside ``__anext__``, nothing outlives a call) and an async
context manager (``async with``: every member prefetches in its own task group; leaving the block
cancels and joins them all). The plan (which member items this reader serves, and the mixing
order) is computed on first use in a worker thread, since it may read the members' indexes.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio.to_thread

from ..._core._errors import PlanError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import TracebackType

    from ._sample_stream import SampleStream

__all__ = ["CombinedSampleStream", "ComposedSampleStream", "ParallelSampleStream", "Prepared"]


class Prepared(NamedTuple):
    """What a composite stream's ``prepare()`` returns (in a worker thread, on first use).

    Attributes:
        members: One stream per member, holding this reader's share still to serve.
        plan: Combined: the member of every sample of the level, in order. Parallel: ``(steps,
            finish)``, the steps of the level and the function making the item of a tuple.
        start: Samples of the level already served (a strict resume), where serving starts.
        checkpoint: The state after ``n`` samples of the level.
    """

    members: list[SampleStream]
    plan: Any
    start: int
    checkpoint: Callable[[int], dict[str, Any]]


class ComposedSampleStream:
    """Base of :class:`CombinedSampleStream` and :class:`ParallelSampleStream` (see the module docstring)."""

    def __init__(self, prepare: Callable[[], Prepared], state: Mapping[str, Any] | None = None) -> None:
        self._prepare = prepare
        self._given_state = None if state is None else dict(state)
        self._members: list[SampleStream] | None = None
        self._plan: Any = None
        self._position = 0
        self._checkpoint: Callable[[int], dict[str, Any]] | None = None
        self._stack: contextlib.AsyncExitStack | None = None

    async def _ensure(self) -> list[SampleStream]:
        if self._members is None:
            prepared = await anyio.to_thread.run_sync(self._prepare)
            self._plan, self._position, self._checkpoint = prepared.plan, prepared.start, prepared.checkpoint
            self._members = prepared.members
            return prepared.members
        return self._members

    def state_dict(self) -> dict[str, Any] | None:
        """The position of this stream as a checkpoint: pass it as ``astream(..., state=...)`` to resume.

        The layout of the wrapper's ``state_dict`` (``read/plan/_checkpoint.py``: one state per member
        plus the ``"composite"`` entry), counting the samples this stream returned. Before iteration
        has started, the ``state`` the stream was given, or ``None`` (nothing served yet). After the
        last sample, resuming from it starts the next epoch.
        """
        if self._checkpoint is None:
            return self._given_state
        return self._checkpoint(self._position)

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

    ``prepare()``'s plan is the member id of every sample of the level, in order.
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

    ``prepare()``'s plan is ``(count, finish)``: the number of steps of the level and a function
    that turns the tuple of samples and the step number into the item (the wrapper's transform);
    it runs on the event loop's thread.
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
