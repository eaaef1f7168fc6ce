"""How far a ``StreamingRawDataset`` fetches ahead of what it serves, in a DataLoader worker, an iteration
and an ``astream``.

* A batch (``__getitems__``) of a :class:`~litstream.read._raw_sampler.RawBatchSampler`: the sampler's next
  :data:`AHEAD_BATCHES` batches of this worker are known and fetched, in any order.
* A batch of consecutive indices ``[first, first + size)``: this worker's next batches are assumed to
  follow torch's sequential sampler (``first + k * num_workers * size``); the first of them is widened to
  ``max_prefetch`` items (LitData's look-ahead). Items already held or in flight are not asked for again.
* An iteration: :data:`WINDOW` items at a time, with ``max(max_prefetch, AHEAD_ITEMS)`` items ahead.

``max_prefetch=0`` turns every look-ahead off. Requests are served in the order they were started, so the
items wanted now are always started first.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .._core import _bridge
from ..read._raw_sampler import upcoming_batches
from ..read.raw._stream import ahead_stop

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from ..read.raw._stream import RawReader

__all__ = ["AHEAD_BATCHES", "AHEAD_ITEMS", "WINDOW", "ahead_windows", "get_batch", "iter_windows"]

AHEAD_BATCHES = 2  # sequential batches of one worker fetched ahead: two keep requests flowing between calls
AHEAD_ITEMS = 128  # items an iteration fetches ahead at least (the fetch engine's first limit on requests)
WINDOW = 32  # items an iteration asks for at once


def _num_workers() -> int:
    """DataLoader workers of this process's loader (1 outside a worker); torch is not imported for it."""
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    return max(1, int(info.num_workers)) if info is not None else 1


def ahead_windows(max_prefetch: int, window: int) -> int:
    """Windows of ``window`` items an iteration fetches ahead: ``max(max_prefetch, 128)`` items (none when
    ``max_prefetch=0``)."""
    return 0 if max_prefetch == 0 else -(-max(max_prefetch, AHEAD_ITEMS) // window)


def get_batch(
    reader: RawReader, indices: Sequence[int], wanted: list[int], *, max_prefetch: int, cache_size: int, total: int
) -> list[Any]:
    """The values of items ``wanted`` (``indices`` checked, in ``[0, total)``), fetched concurrently, with this
    worker's next batches started meanwhile (see the module docstring; ``cache_size``: the most prefetched
    items held)."""
    if max_prefetch > 0 and wanted:
        upcoming = upcoming_batches(indices, _num_workers(), AHEAD_BATCHES)
        if upcoming is not None:  # a RawBatchSampler's batch: this worker's next batches are known
            reader.reserve((AHEAD_BATCHES + 2) * len(wanted))
            _bridge.start_soon(reader.prefetch, wanted, False)  # first: requests are served in the order started
            for batch in upcoming:
                _bridge.start_soon(reader.prefetch, batch)
            return _bridge.call(reader.get_items, wanted)
    values = _bridge.call(reader.get_items, wanted)
    if max_prefetch > 0 and wanted and wanted == list(range(wanted[0], wanted[0] + len(wanted))):
        _look_ahead(reader, wanted[0], len(wanted), max_prefetch, cache_size, total)
    return values


def _look_ahead(reader: RawReader, first: int, size: int, max_prefetch: int, cache_size: int, total: int) -> None:
    """After the batch ``[first, first + size)``: prefetch this worker's next ``AHEAD_BATCHES`` batches, the
    first widened to ``max_prefetch`` items."""
    step = _num_workers() * size
    reader.reserve(max(cache_size, (AHEAD_BATCHES + 1) * size))
    for k in range(1, AHEAD_BATCHES + 1):
        start = first + k * step
        stop = min(total, start + (max(max_prefetch, size) if k == 1 else size))
        if start < stop:
            _bridge.start_soon(reader.prefetch, range(start, stop))


def iter_windows(reader: RawReader, total: int, max_prefetch: int) -> Iterator[list[Any]]:
    """The values of items ``0..total-1`` in index order, :data:`WINDOW` at a time, the next
    ``max(max_prefetch, 128)`` items (at most 256 MiB of them beyond the next window) fetched meanwhile."""
    windows = [range(start, min(total, start + WINDOW)) for start in range(0, total, WINDOW)]
    ahead = ahead_windows(max_prefetch, WINDOW)
    reader.reserve((ahead + 1) * WINDOW)
    started = 0
    for k, window in enumerate(windows):
        stop = ahead_stop(k, started, ahead, windows, reader)
        for j in range(started, stop):  # window k first: requests are served in the order started
            _bridge.start_soon(reader.prefetch, windows[j], j > k)
        started = stop
        yield _bridge.call(reader.get_items, window)
