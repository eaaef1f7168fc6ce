"""``optimize(inputs=StreamingDataLoader(...))`` and ``map(inputs=...)``: every batch of the loader is one input.

LitData accepts a ``StreamingDataLoader`` as ``inputs``: each batch it yields becomes an input of
``fn`` (pass ``batch_size`` to the loader, not to ``optimize``; ``weights`` are refused). LitData
gives every optimize worker its own copy of the loader, sharded as if the workers were DDP ranks
(which also turns on ``drop_last``). Here the loader is iterated **once**, for one epoch, in a
thread of the calling process (with the loader's own ``num_workers``), and its batches are handed to
the optimize workers through the queue-input path (``_feed``): each batch of the epoch reaches
``fn`` exactly once, however many optimize workers there are, and nothing is dropped.

:class:`LoaderQueue` is that queue. Its producer thread starts on the first read, keeps at most
``maxsize`` batches ahead (backpressure), and ends the input with ``ALL_DONE``. If iterating the
loader raises, the next read raises that exception, so the run fails with a ``WorkerError`` that
chains it (never a silent partial dataset). When the run ends early (another error), the queue is
dropped; a finalizer then stops the producer, which closes the loader's iterator (its worker
processes exit).
"""

from __future__ import annotations

import queue as queue_module
import sys
import threading
import weakref
from typing import Any

from .._errors import ConfigurationError
from ._inputs import ALL_DONE
from ._sequence_feed import put_until_stopped

__all__ = ["LoaderQueue", "is_streaming_loader", "loader_inputs"]


def is_streaming_loader(value: object) -> bool:
    """True for a ``litstream.StreamingDataLoader`` (checked without importing torch)."""
    module = sys.modules.get("litstream._dataloader")
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


def loader_inputs(loader: Any, *, weights: object, batch_size: object) -> LoaderQueue:
    """The queue input that replaces ``inputs=loader`` (LitData's argument rules checked first).

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
    return LoaderQueue(loader)
