"""Sequence inputs fed to worker processes in bounded batches, instead of each worker's whole list.

The main process keeps the user's sequence and, per worker, its positions (a ``range`` for the ordered
split); it builds no per-input list. One thread per worker process (:class:`BatchFeeder`, started after
the workers are forked) takes the next :data:`FEED_BATCH` inputs of that worker, cloudpickles them and
puts them, with their positions, on the worker's queue, which holds at most :data:`BATCHES_AHEAD`
batches. The worker (:class:`FedInputs`) unpickles one batch at a time. So a worker holds at most
``(BATCHES_AHEAD + 1) x FEED_BATCH`` of its inputs, whatever their number, and its job, pickled, is the
same size for ten inputs or ten million. An input that cannot be pickled fails the run, naming it.

The split, each worker's order and therefore the chunk files are exactly those of a job that carries
its inputs (the way executor tasks and a single in-process worker still get them).
"""

from __future__ import annotations

import queue as queue_module
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cloudpickle

from ..._core._errors import WorkerError
from ._feed import _POLL_S, END, QueueInputs, SequenceInputs, Taken

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ._feed import InputSource
    from ._jobs import Job

__all__ = [
    "BATCHES_AHEAD",
    "FEED_BATCH",
    "BatchFeeder",
    "FedBatches",
    "FedInputs",
    "batches",
    "job_inputs",
    "put_until_stopped",
]

FEED_BATCH = 256
"""Inputs per batch sent to a worker process."""
BATCHES_AHEAD = 4
"""Batches a worker's queue holds before its feeder waits."""


@dataclass(frozen=True)
class FedBatches:
    """Where a worker process reads its sequence inputs: its queue, and how many inputs will come through it."""

    queue: Any
    count: int


def put_until_stopped(target: Any, entry: Any, stop: threading.Event) -> bool:
    """Put ``entry`` on the bounded queue ``target``, waiting while it is full; False once ``stop`` is set."""
    while not stop.is_set():
        try:
            target.put(entry, timeout=_POLL_S)
            return True
        except queue_module.Full:
            continue
    return False


def batches(
    items: Sequence[Any], positions: Sequence[int], start: int = 0, size: int = FEED_BATCH
) -> Iterator[tuple[Sequence[int], list[Any]]]:
    """``(positions, inputs)`` of ``items[start:]`` in slices of at most ``size`` inputs, in order."""
    for low in range(start, len(items), size):
        high = min(low + size, len(items))
        yield positions[low:high], [items[k] for k in range(low, high)]


def _pack(positions: Sequence[int], items: list[Any]) -> bytes:
    """``items`` cloudpickled for a worker process.

    Raises:
        WorkerError: an input cannot be pickled; names it and its position.
    """
    try:
        return bytes(cloudpickle.dumps(items))
    except Exception as exc:
        for position, item in zip(positions, items, strict=True):
            try:
                cloudpickle.dumps(item)
            except Exception as error:
                raise WorkerError(
                    f"the input at index {position} ({item!r:.200}) cannot be sent to a worker process: "
                    f"{type(error).__name__}: {error}; give picklable inputs, or num_workers=1 (then inputs are "
                    "not pickled)"
                ) from error
        raise WorkerError(
            f"the inputs at index {positions[0]}..{positions[-1]} cannot be sent to a worker process: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


class BatchFeeder:
    """Sends one worker's inputs ``items[start:]`` to its queue, in a thread of the main process.

    Args:
        items: The worker's inputs in processing order (a view on the user's sequence).
        positions: Their positions in the user's ``inputs`` (for error messages in the worker).
        start: The first input still to process (after a checkpoint).
        target: The worker's bounded queue.
        stop: Set by the runner when the run ends; the thread then returns.
        events: The runner's event queue; ``("source_error",)`` is put on it when feeding fails
            (:attr:`error` then holds why).
    """

    def __init__(
        self,
        items: Sequence[Any],
        positions: Sequence[int],
        start: int,
        target: Any,
        stop: threading.Event,
        events: Any,
    ) -> None:
        self.error: BaseException | None = None
        self._items = items
        self._positions = positions
        self._start = start
        self._target = target
        self._stop = stop
        self._events = events
        self.thread = threading.Thread(target=self._run, name="litstream-input-feed", daemon=True)

    def _run(self) -> None:
        try:
            for positions, items in batches(self._items, self._positions, self._start):
                if not put_until_stopped(self._target, (positions, _pack(positions, items)), self._stop):
                    return
        except BaseException as exc:
            self.error = exc
            self._events.put(("source_error",))  # wakes the runner


class FedInputs:
    """A worker process's inputs read from its :class:`FedBatches`, one batch in memory at a time.

    Args:
        fed: The queue and the number of inputs (the last one is ``map``'s ``is_last``).
        halt: Set by the consumer to stop a blocked read; ``take`` then returns :data:`~._feed.END`.
    """

    def __init__(self, fed: FedBatches, halt: threading.Event) -> None:
        self._queue = fed.queue
        self._left = fed.count
        self._halt = halt
        self._positions: Sequence[int] = ()
        self._items: list[Any] = []
        self._next = 0

    def take(self) -> Taken | None:
        """The next input, or :data:`~._feed.END` after the last one (or once ``halt`` is set).

        Raises:
            WorkerError: a batch cannot be unpickled here; names its positions.
        """
        if self._left <= 0:
            return END
        while self._next >= len(self._items):
            try:
                positions, data = self._queue.get(timeout=_POLL_S)
            except queue_module.Empty:
                if self._halt.is_set():
                    return END
                continue
            try:
                self._items = cloudpickle.loads(data)
            except Exception as exc:
                raise WorkerError(
                    f"the inputs at index {positions[0]}..{positions[-1]} cannot be unpickled in the worker: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            self._positions, self._next = positions, 0
        offset = self._next
        self._next += 1
        self._left -= 1
        return self._items[offset], f"index {self._positions[offset]}", self._left == 0


def job_inputs(job: Job, source: Any, halt: threading.Event) -> InputSource:
    """Where a worker's job takes its inputs from.

    The batches its parent feeds it (``source`` is a :class:`FedBatches`), else the queue ``source`` when the
    job holds no ``items``, else its own share of a sequence (``items`` at ``positions``) from ``first_input`` on.
    """
    if isinstance(source, FedBatches):
        return FedInputs(source, halt)
    if job.items is None:
        return QueueInputs(source, job.queue_timeout, halt)
    return SequenceInputs(job.items, job.positions, job.first_input)
