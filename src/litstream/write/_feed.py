"""How inputs reach ``fn``: from a sequence or a queue, in a worker thread that runs ahead of the writer.

A worker's event loop encodes samples and drives the uploads; ``fn`` (the user's code, often slow and
blocking) and blocking queue reads run in one worker thread instead, so a slow ``fn`` never stalls the
uploads of the chunks before it. :func:`run_ahead` has the thread compute the next batch of inputs while
the loop writes the current one; a batch ends after ``_BATCH_SECONDS`` of ``fn`` time or
``_BATCH_OUTPUTS`` outputs, so a fast ``fn`` costs one thread hop per batch, not per input.

Queue inputs sent to worker processes travel as :class:`Packed` (cloudpickled by the sender), so an
input that cannot be pickled fails the run where it is sent, naming it, instead of being dropped by
``multiprocessing.Queue``'s feeder thread.
"""

from __future__ import annotations

import queue as queue_module
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import cloudpickle

from .._errors import WorkerError, collapse_exception_group
from ._inputs import ALL_DONE

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

__all__ = ["END", "FedQueue", "Packed", "QueueInputs", "SequenceInputs", "pack", "run_ahead"]

_BATCH_SECONDS = 0.02
_BATCH_OUTPUTS = 256
_POLL_S = 0.2
"""Longest blocking queue read before the reader checks whether it should stop."""

END = None
"""What ``take`` returns when the inputs are finished."""

Taken = tuple[Any, str, bool]
"""An input, where it came from (for error messages) and whether it is the worker's last (``map``'s ``is_last``)."""


@dataclass(frozen=True)
class Packed:
    """A queue input cloudpickled by the process that forwards it to the workers."""

    data: bytes


@dataclass(frozen=True)
class FedQueue:
    """The queue through which this process forwards a queue input to its worker processes.

    It carries :class:`Packed` items and one :data:`~._inputs.ALL_DONE` per worker; it has no timeout on
    the worker side (the forwarder ends it, or the run is stopped).
    """

    queue: Any


class SequenceInputs:
    """A worker's share of a sequence input, from position ``start`` on."""

    def __init__(self, items: Sequence[Any], positions: Sequence[int], start: int = 0) -> None:
        self._items = items
        self._positions = positions
        self._next = start

    def take(self, block: bool) -> Taken | None:
        """The next input, or :data:`END`. Never blocks."""
        offset = self._next
        if offset >= len(self._items):
            return END
        self._next += 1
        return self._items[offset], f"index {self._positions[offset]}", offset == len(self._items) - 1


class QueueInputs:
    """Items of a queue until :data:`~._inputs.ALL_DONE` or ``timeout`` seconds without one.

    Args:
        source: A ``queue.Queue``, a ``multiprocessing.Queue``, or a :class:`FedQueue` (then items are
            unpacked and there is no timeout).
        timeout: Seconds of silence that end the input (``DATA_OPTIMIZER_TIMEOUT``).
        halt: Set by the consumer to stop a blocked read; ``take`` then returns :data:`END` and the
            caller must not treat the input as complete.
    """

    def __init__(self, source: Any, timeout: float | None, halt: threading.Event | None = None) -> None:
        self._packed = isinstance(source, FedQueue)
        self._queue = source.queue if isinstance(source, FedQueue) else source
        self._timeout = None if self._packed else timeout
        self._halt = halt or threading.Event()
        self.received = 0

    def take(self, block: bool) -> Taken | str | None:
        """The next item; ``"empty"`` when none is waiting and ``block`` is False.

        Raises:
            WorkerError: the queue raised, or a forwarded item cannot be unpickled; names the item.
        """
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            wait = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=wait) if block and wait > 0 else self._queue.get_nowait()
                break
            except queue_module.Empty:
                if not block:
                    return "empty"
                if self._halt.is_set() or (deadline is not None and time.monotonic() >= deadline):
                    return END
            except Exception as exc:
                raise WorkerError(
                    f"reading the queue input failed after {self.received} item(s): {type(exc).__name__}: {exc}"
                ) from exc
        if isinstance(item, str) and item == ALL_DONE:
            return END
        where = f"queue item {self.received}"
        self.received += 1
        if isinstance(item, Packed):
            try:
                item = cloudpickle.loads(item.data)
            except Exception as exc:
                raise WorkerError(f"{where} cannot be unpickled in the worker: {type(exc).__name__}: {exc}") from exc
        return item, where, False


def pack(item: Any, where: str) -> Packed:
    """``item`` cloudpickled for a worker process.

    Raises:
        WorkerError: it cannot be pickled; names the item.
    """
    try:
        return Packed(bytes(cloudpickle.dumps(item)))
    except Exception as exc:
        raise WorkerError(
            f"{where} {item!r:.200} cannot be sent to a worker process: {type(exc).__name__}: {exc}; put picklable "
            "values on the queue, or use num_workers=1 (then items are not pickled)"
        ) from exc


def _fill(
    source: SequenceInputs | QueueInputs, call: Callable[[Any, str, bool], tuple[Any, int]], halt: threading.Event
) -> tuple[list[tuple[Any, str, Any]], bool]:
    """Run ``call`` over the next inputs (in a worker thread); returns the batch and whether the inputs ended."""
    out: list[tuple[Any, str, Any]] = []
    weight = 0
    deadline = time.monotonic() + _BATCH_SECONDS
    while not halt.is_set():
        taken = source.take(block=not out)
        if taken == "empty":
            return out, False
        if taken is END:
            return out, True
        assert isinstance(taken, tuple)
        item, where, last = taken
        result, size = call(item, where, last)
        out.append((item, where, result))
        weight += max(size, 1)
        if weight >= _BATCH_OUTPUTS or time.monotonic() >= deadline:
            return out, False
    return out, True


async def run_ahead(
    source: SequenceInputs | QueueInputs,
    call: Callable[[Any, str, bool], tuple[Any, int]],
    handle: Callable[[Any, str, Any], Awaitable[None]],
    halt: threading.Event,
) -> None:
    """``handle(item, where, result)`` on this loop for every ``call(item, where, is_last)`` run in a worker thread.

    ``call`` returns its result and a size (outputs it made) that bounds a batch. The thread computes the
    next batch while ``handle`` works through the current one. Returns once every input was handled.

    Raises:
        The first failure of ``call``, of reading the inputs, or of ``handle``, as itself.
    """
    send, receive = anyio.create_memory_object_stream[list[tuple[Any, str, Any]]](0)

    async def produce() -> None:
        async with send:
            while True:
                batch, finished = await anyio.to_thread.run_sync(_fill, source, call, halt)
                if halt.is_set():
                    return  # the consumer failed and raises
                if batch:
                    await send.send(batch)
                if finished:
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            try:
                async with receive:
                    async for batch in receive:
                        for item, where, result in batch:
                            await handle(item, where, result)
            except BaseException:
                halt.set()  # unblocks a thread waiting on a queue
                raise
    except BaseExceptionGroup as group:
        single = collapse_exception_group(group)
        if single is group:
            raise
        raise single from single.__cause__
