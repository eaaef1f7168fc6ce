"""How inputs reach ``fn``: from a sequence or a queue, in a worker thread that runs ahead of the writer.

A worker's event loop encodes samples and drives the uploads; ``fn`` (the user's code, often slow and
blocking) and blocking queue reads run in one worker thread instead, so a slow ``fn`` never stalls the
uploads of the chunks before it. :func:`run_ahead` lets the thread run up to ``_AHEAD`` inputs ahead of
the loop, handing each result over as soon as it exists; the loop takes all waiting results at once
without a thread hop, so a fast ``fn`` costs no thread hop per input.

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
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread
import cloudpickle

from ..._core._errors import WorkerError, raise_collapsed
from ._inputs import ALL_DONE

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

__all__ = ["END", "FedQueue", "InputSource", "Packed", "QueueInputs", "SequenceInputs", "pack", "run_ahead"]

_AHEAD = 32
"""Results of ``fn`` (one per input) that may wait for the writer; bounds a worker's memory."""
_POLL_S = 0.2
"""Longest blocking queue read before the reader checks whether it should stop."""

END = None
"""What ``take`` returns when the inputs are finished."""

Taken = tuple[Any, str, bool]
"""An input, where it came from (for error messages) and whether it is the worker's last (``map``'s ``is_last``)."""


class InputSource(Protocol):
    """A worker's inputs: :class:`SequenceInputs`, :class:`QueueInputs` or ``_sequence_feed.FedInputs``."""

    def take(self) -> Taken | None: ...


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

    def take(self) -> Taken | None:
        """The next input, or :data:`END`."""
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

    def take(self) -> Taken | None:
        """The next item, or :data:`END` (also when ``halt`` is set).

        Raises:
            WorkerError: the queue raised, or a forwarded item cannot be unpickled; names the item.
        """
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            wait = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            try:
                item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
                break
            except queue_module.Empty:
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


_DONE = object()
"""Put by the producer thread after its last result (also after a failure, which the task group raises)."""


@dataclass(frozen=True)
class _Failed:
    error: Exception


class _Handover:
    """Results passed from the producer thread to the loop: appended one by one, taken all at once.

    At most ``limit`` results wait; the producer blocks beyond that. One lock operation per result and
    one per take keep a fast ``fn`` cheap: the loop takes whatever has accumulated in one go.
    """

    def __init__(self, limit: int, halt: threading.Event) -> None:
        self._cond = threading.Condition()
        self._entries: list[Any] = []
        self._limit = limit
        self._halt = halt

    def put(self, entry: Any) -> bool:
        """Append ``entry``, waiting while ``limit`` results wait; False once the run is stopped."""
        with self._cond:
            while len(self._entries) >= self._limit and not self._halt.is_set():
                self._cond.wait(_POLL_S)
            if self._halt.is_set():
                return False
            self._entries.append(entry)
            self._cond.notify_all()
            return True

    def take_nowait(self) -> list[Any]:
        """Every waiting entry (maybe none); never blocks."""
        with self._cond:
            entries, self._entries = self._entries, []
            if entries:
                self._cond.notify_all()
            return entries

    def take(self) -> list[Any]:
        """Every waiting entry, blocking (in a worker thread) until there is one; ``[]`` once the run is stopped."""
        with self._cond:
            while not self._entries and not self._halt.is_set():
                self._cond.wait(_POLL_S)
            entries, self._entries = self._entries, []
            self._cond.notify_all()
            return entries


def _produce(source: InputSource, call: Callable[[Any, str, bool], Any], out: _Handover) -> None:
    """Run ``call`` over every input (in a worker thread), each result handed over as soon as it exists.

    A failure is handed over in its place too, so the results before it are handled (and, with
    checkpoints, committed) before the run stops, as if ``fn`` ran on the loop.
    """
    try:
        while True:
            taken = source.take()
            if taken is END:
                return
            item, where, last = taken
            if not out.put((item, where, call(item, where, last))):
                return
    except Exception as exc:
        out.put(_Failed(exc))
    finally:
        out.put(_DONE)


async def run_ahead(
    source: InputSource,
    call: Callable[[Any, str, bool], Any],
    handle: Callable[[Any, str, Any], Awaitable[None]],
    halt: threading.Event,
) -> None:
    """``handle(item, where, result)`` on this loop for every ``call(item, where, is_last)`` run in a worker thread.

    The thread runs at most ``_AHEAD`` results ahead of ``handle``; each result is handed over as soon as
    it exists. The loop takes all waiting results at once without a thread hop, and blocks in a thread
    only when none is waiting. Returns once every input was handled.

    Raises:
        The first failure of ``call``, of reading the inputs, or of ``handle``, as itself.
    """
    out = _Handover(_AHEAD, halt)

    async def consume() -> None:
        try:
            while True:
                entries = out.take_nowait() or await anyio.to_thread.run_sync(out.take)
                if not entries:
                    return  # stopped: the producer's failure is raised by the task group
                for entry in entries:
                    if entry is _DONE:
                        return
                    if isinstance(entry, _Failed):
                        raise entry.error
                    item, where, result = entry
                    await handle(item, where, result)
        except BaseException:
            halt.set()  # stops the producer thread (a blocked queue read, a full hand-over)
            raise

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            try:
                await anyio.to_thread.run_sync(_produce, source, call, out)
            except BaseException:
                halt.set()
                raise
    except BaseExceptionGroup as group:
        raise_collapsed(group)
