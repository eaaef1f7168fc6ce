"""A batch sampler for ``StreamingRawDataset`` whose order the dataset can see ahead of the loader.

torch's ``DataLoader`` hands a map-style dataset one batch of indices at a time, so a worker cannot know
its next batch when the order is shuffled. :class:`RawBatchSampler` (``ds.batch_sampler(...)``) draws
the epoch's order from ``(seed, epoch)`` and yields :class:`RawBatch` lists that also carry their place
in that order (the batch number and the order's parameters, a few ints). A worker (or the main process
with ``num_workers=0``) draws the same order once and finds its own next batches: torch deals batches
to its workers in turn, so batch ``n`` goes to worker ``n % num_workers``. torch is not imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .raw._stream import epoch_order

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["OrderKey", "RawBatch", "RawBatchSampler", "upcoming_batches"]


class OrderKey(NamedTuple):
    """What fixes a :class:`RawBatchSampler`'s epoch: its batches are slices of ``epoch_order``."""

    length: int
    batch_size: int
    shuffle: bool
    seed: int
    epoch: int
    drop_last: bool

    def batches(self) -> int:
        """Batches in the epoch."""
        return self.length // self.batch_size if self.drop_last else -(-self.length // self.batch_size)


class RawBatch(list[int]):
    """A batch of indices (a ``list``) that knows it is batch ``number`` of the order ``key``."""

    def __init__(self, indices: Sequence[int], number: int, key: OrderKey) -> None:
        super().__init__(indices)
        self.number = number
        self.key = key

    def __reduce__(self) -> tuple[Any, ...]:
        return RawBatch, (list(self), self.number, self.key)


_ORDER: tuple[OrderKey, list[int]] | None = None  # the last order drawn in this process


def _order(key: OrderKey) -> list[int]:
    global _ORDER
    if _ORDER is None or _ORDER[0] != key:
        _ORDER = key, epoch_order(key.length, key.shuffle, key.seed, key.epoch)
    return _ORDER[1]


def upcoming_batches(batch: object, num_workers: int, count: int) -> list[list[int]] | None:
    """The next ``count`` batches of the worker that got ``batch`` (``None`` unless it is a :class:`RawBatch`
    that matches its order).

    Args:
        batch: The indices a ``DataLoader`` passed to ``__getitems__``.
        num_workers: The loader's worker processes (1 without workers); batch ``n`` goes to worker
            ``n % num_workers``.
        count: How many of this worker's next batches.
    """
    if not isinstance(batch, RawBatch) or not isinstance(batch.key, OrderKey):
        return None
    key, size = batch.key, batch.key.batch_size
    order = _order(key)
    if list(batch) != order[batch.number * size : (batch.number + 1) * size]:
        return None  # not the batch its key names (a stale or foreign key): no look-ahead
    out = []
    for k in range(1, count + 1):
        number = batch.number + k * num_workers
        if number >= key.batches():
            break
        out.append(order[number * size : (number + 1) * size])
    return out


class RawBatchSampler:
    """Batches of a ``StreamingRawDataset``'s indices in an order drawn from ``(seed, epoch)``, for
    ``DataLoader(ds, batch_sampler=...)``; the dataset fetches each worker's next batches ahead.

    Every index appears exactly once per epoch (the last batch is shorter unless ``drop_last``). Call
    :meth:`set_epoch` before each epoch for a new order (as with torch's ``DistributedSampler``).

    Args:
        length: The dataset's length.
        batch_size: Indices per batch (>= 1).
        shuffle: Draw a new order per ``(seed, epoch)``; ``False``: ``0, 1, 2, ...``.
        seed: The shuffle seed.
        drop_last: Leave out the last, shorter batch.
    """

    def __init__(self, length: int, batch_size: int, *, shuffle: bool = False, seed: int = 42, drop_last: bool = False):
        self.length = length
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 1

    def set_epoch(self, epoch: int) -> None:
        """Use the order of ``epoch`` from the next iteration on."""
        self.epoch = epoch

    def _key(self) -> OrderKey:
        return OrderKey(self.length, self.batch_size, self.shuffle, self.seed, self.epoch, self.drop_last)

    def __len__(self) -> int:
        return self._key().batches()

    def __iter__(self) -> Iterator[RawBatch]:
        key = self._key()
        order = _order(key)
        for number in range(key.batches()):
            yield RawBatch(order[number * key.batch_size : (number + 1) * key.batch_size], number, key)
