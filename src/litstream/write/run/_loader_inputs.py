"""``optimize(inputs=StreamingDataLoader(...))`` and ``map(inputs=...)``: every batch of the loader is one input.

LitData accepts a ``StreamingDataLoader`` as ``inputs``: each batch it yields becomes an input of
``fn`` (pass ``batch_size`` to the loader, not to ``optimize``; ``weights`` are refused), and it keeps
the input order (LitData forces its ordered mode: the written dataset reads back in the loader's order,
whatever ``num_workers``). LitData gives every optimize worker its own copy of the loader, sharded as if
the workers were DDP ranks (which also turns on ``drop_last``). Here the loader is iterated **once**, for
one epoch, in a thread of the calling process (with the loader's own ``num_workers``): each batch of the
epoch reaches ``fn`` exactly once, however many optimize workers there are, and nothing is dropped.

:class:`LoaderSequence` makes that epoch a sequence of ``len(loader)`` inputs, so the ordered split of
sequence inputs applies (worker ``w`` gets a contiguous range of batches and the chunks are merged in
worker order: the dataset reads back in the loader's order). Its producer thread starts on the first
read and keeps at most ``ahead`` batches that no worker has asked for yet (backpressure: a worker whose
range comes later waits for the batches before it to be taken). Every batch is handed out once. If
iterating the loader raises, the read that waits for the next batch raises that exception, so the run
fails with a ``WorkerError`` that chains it (never a silent partial dataset); a loader that yields
another number of batches than ``len(loader)`` fails the run the same way. When the run ends early, the
sequence is dropped; a finalizer then stops the producer, which closes the loader's iterator.

:class:`LoaderQueue` is the same epoch as a queue input (batches handed to whichever worker is free;
no order), kept for callers that want it.
"""

from __future__ import annotations

import queue as queue_module
import sys
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, overload

from ..._core._errors import ConfigurationError, LitstreamError, WorkerError
from ._inputs import ALL_DONE
from ._sequence_feed import put_until_stopped

__all__ = ["LoaderQueue", "LoaderSequence", "is_streaming_loader", "loader_inputs"]


def is_streaming_loader(value: object) -> bool:
    """True for a ``litstream.StreamingDataLoader`` (checked without importing torch)."""
    module = sys.modules.get("litstream._torch._dataloader")
    return module is not None and isinstance(value, module.StreamingDataLoader)


def _produce(loader: Any, items: queue_module.Queue[Any], failed: list[BaseException], stop: threading.Event) -> None:
    def put(item: Any) -> bool:
        return put_until_stopped(items, item, stop)

    iterator = None
    try:
        iterator = iter(loader)
        for batch in iterator:
            if not put(batch):
                return
    except BaseException as exc:  # handed to the reader, which raises it in the run
        failed.append(exc)
        return
    finally:
        del iterator  # closes the loader's worker processes when stopped early
    put(ALL_DONE)


class LoaderQueue(queue_module.Queue[Any]):
    """A read-only queue of one epoch of ``loader``'s batches, ended by ``ALL_DONE`` (see the module docstring).

    Args:
        loader: A ``StreamingDataLoader``.
        maxsize: Batches the producer may run ahead of the readers (default 16).
    """

    def __init__(self, loader: Any, maxsize: int = 16) -> None:
        super().__init__()
        self._items: queue_module.Queue[Any] = queue_module.Queue(maxsize)
        self._failed: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=_produce, args=(loader, self._items, self._failed, self._stop), name="litstream-loader-inputs"
        )
        self._thread.daemon = True
        self._started = threading.Lock()
        weakref.finalize(self, self._stop.set)

    def _start(self) -> None:
        with self._started:
            if not self._thread.is_alive() and self._thread.ident is None:
                self._thread.start()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The next batch (or ``ALL_DONE``).

        Raises:
            queue.Empty: none arrived within ``timeout``.
            BaseException: what iterating the loader raised, once every batch before it was read.
        """
        self._start()
        try:
            return self._items.get(block, timeout)
        except queue_module.Empty:
            if self._failed and not self._thread.is_alive():
                raise self._failed[0] from None
            raise

    def get_nowait(self) -> Any:
        """``get(block=False)``."""
        return self.get(block=False)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        """Refused: only the loader fills this queue.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError("a StreamingDataLoader input is read-only: its batches are the inputs")

    def qsize(self) -> int:
        """Batches waiting to be read."""
        return self._items.qsize()

    def empty(self) -> bool:
        """Whether no batch is waiting."""
        return self._items.empty()

    def close(self) -> None:
        """Stop the producer (also done when the queue is garbage-collected)."""
        self._stop.set()


def loader_inputs(loader: Any, *, weights: object, batch_size: object) -> LoaderSequence:
    """The sequence input that replaces ``inputs=loader`` (LitData's argument rules checked first).

    Raises:
        ConfigurationError: ``batch_size`` or ``weights`` given with a loader, as in LitData.
    """
    if batch_size is not None:
        raise ConfigurationError(
            f"batch_size={batch_size!r} cannot be used with inputs=StreamingDataLoader(...): pass batch_size to "
            "the StreamingDataLoader; each of its batches is one input of fn"
        )
    if weights is not None:
        raise ConfigurationError("weights cannot be used with inputs=StreamingDataLoader(...); give a sequence")
    return LoaderSequence(loader)


_POLL_S = 0.1


class _Epoch:
    """The state shared by a :class:`LoaderSequence` and its producer thread (which must not hold the sequence)."""

    def __init__(self, length: int, ahead: int) -> None:
        self.length = length
        self.ahead = ahead
        self.cond = threading.Condition()
        self.buffer: dict[int, Any] = {}
        self.produced = 0
        self.done = False
        self.failed: list[BaseException] = []
        self.wanted: set[int] | None = None  # None: every batch is asked for
        self.stop = threading.Event()


def _produce_in_order(loader: Any, epoch: _Epoch) -> None:
    iterator = None
    try:
        iterator = iter(loader)
        for position, batch in enumerate(iterator):
            if position >= epoch.length:
                raise ConfigurationError(
                    f"the StreamingDataLoader yielded more batches than len(loader)={epoch.length}; its length "
                    "must be exact to split the batches over the optimize workers in order"
                )
            with epoch.cond:
                if epoch.wanted is None or position in epoch.wanted:
                    while len(epoch.buffer) >= epoch.ahead and not epoch.stop.is_set():
                        epoch.cond.wait(_POLL_S)
                    if epoch.stop.is_set():
                        return
                    epoch.buffer[position] = batch
                epoch.produced = position + 1
                epoch.cond.notify_all()
    except BaseException as exc:  # handed to the reader, which raises it in the run
        with epoch.cond:
            epoch.failed.append(exc)
    finally:
        del iterator  # closes the loader's worker processes when stopped early
        with epoch.cond:
            epoch.done = True
            epoch.cond.notify_all()


class LoaderSequence(Sequence[Any]):
    """One epoch of ``loader``'s batches as a sequence of ``len(loader)`` inputs, each read once (module docstring).

    Args:
        loader: A ``StreamingDataLoader``.
        ahead: Batches the producer keeps that no reader has taken yet (default 64).
    """

    def __init__(self, loader: Any, ahead: int = 64) -> None:
        self._epoch = _Epoch(len(loader), ahead)
        self._thread = threading.Thread(
            target=_produce_in_order, args=(loader, self._epoch), name="litstream-loader-inputs", daemon=True
        )
        self._started = threading.Lock()
        weakref.finalize(self, self._epoch.stop.set)

    def __len__(self) -> int:
        return self._epoch.length

    def want(self, positions: Iterable[Sequence[int]]) -> None:
        """Only these batches will be read (this node's share, ``fast_dev_run``); the others are dropped."""
        with self._epoch.cond:
            self._epoch.wanted = {p for part in positions for p in part}

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        """Batch ``index``, waiting for the loader to reach it; each batch can be read once.

        Raises:
            WorkerError: iterating the loader raised (chained).
            ConfigurationError: a slice, a batch read twice, or a loader shorter or longer than ``len(loader)``.
        """
        if isinstance(index, slice) or not 0 <= index < self._epoch.length:
            raise ConfigurationError(f"a StreamingDataLoader input is read batch by batch in order, not [{index!r}]")
        with self._started:
            if self._thread.ident is None:
                self._thread.start()
        epoch = self._epoch
        with epoch.cond:
            while index not in epoch.buffer:
                if epoch.failed:
                    failed = epoch.failed[0]
                    if isinstance(failed, LitstreamError):
                        raise failed
                    raise WorkerError(f"iterating the StreamingDataLoader input failed: {failed!r}") from failed
                if epoch.produced > index or epoch.done:
                    raise ConfigurationError(
                        f"the StreamingDataLoader yielded {epoch.produced} batches but len(loader)={epoch.length}"
                        if epoch.done and epoch.produced <= index
                        else f"batch {index} of the StreamingDataLoader input was already read"
                    )
                epoch.cond.wait(_POLL_S)
            epoch.cond.notify_all()
            return epoch.buffer.pop(index)

    def close(self) -> None:
        """Stop the producer (also done when the sequence is garbage-collected)."""
        self._epoch.stop.set()
