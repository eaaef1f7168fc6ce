"""``StreamingDataset.shuffler``: LitData 0.2.76's shuffle object, as a view of litstream's read plan.

LitData keeps a ``Shuffle`` (``NoShuffle``, ``FullShuffle`` or, for its POSIX fast path, ``WindowShuffle``) in
``dataset.shuffler``: ``None`` until the first ``len()`` or iteration, reset to ``None`` by ``set_shuffle`` /
``set_drop_last``. Code reads from it ``seed``, ``drop_last``, ``get_len(env, num_workers, batch_size,
epoch)``, ``get_chunks_and_intervals_per_workers(...)`` (every global worker's chunks and
``[chunk_start, roi_start, roi_end, chunk_end]`` intervals in global item positions) and
``shuffler(array, num_chunks, epoch, chunk_index)`` (the in-chunk order of ``array``). The classes here
answer those calls from :mod:`~litstream.read.plan._plan`, so they give the items and order litstream serves
(LitData's for ``shuffle=False``/``True``); ``shuffle="window"`` (litstream's cross-chunk window, which
LitData lacks) is a :class:`WindowShuffle` whose ``window`` is the chunks per window. Pure: no I/O.

A ``distributed_env`` is any object with ``world_size`` and ``global_rank`` (LitData's ``_DistributedEnv``
or litstream's ``DistributedEnv``, whose ``rank`` is read when ``global_rank`` is missing), and
optionally ``num_nodes``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from .plan._assign import ChunkSlice, item_order
from .plan._plan import epoch_assignment

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["FullShuffle", "NoShuffle", "Shuffle", "WindowShuffle", "make_shuffler"]


def _env(distributed_env: Any) -> tuple[int, int, int]:
    """``(global_rank, world_size, num_nodes)`` of a LitData or litstream distributed environment."""
    rank = getattr(distributed_env, "global_rank", None)
    if rank is None:
        rank = distributed_env.rank
    return int(rank), int(distributed_env.world_size), int(getattr(distributed_env, "num_nodes", 1) or 1)


class Shuffle:
    """How a dataset's items are spread over ranks and workers and ordered (LitData's ``Shuffle``).

    Attributes:
        seed: The shuffle seed.
        drop_last: Whether each rank's share is cut to whole batches of equal count (resolved for the
            world size the dataset saw).
        item_window: The in-chunk shuffle block size (``item_shuffle_window``; 0 for ``NoShuffle``).
    """

    shuffled = False

    def __init__(
        self,
        regions: Sequence[tuple[int, int]],
        chunk_sizes: Sequence[int],
        *,
        seed: int,
        drop_last: bool,
        item_window: int = 0,
        chunk_bytes: Sequence[int] | None = None,
        max_cache_size: int | None = None,
    ) -> None:
        self.seed = seed
        self.drop_last = drop_last
        self.item_window = item_window
        self._regions = tuple(regions)
        self._offsets = tuple(itertools.accumulate(chunk_sizes, initial=0))
        self._chunk_bytes = None if chunk_bytes is None else tuple(chunk_bytes)
        self._max_cache_size = max_cache_size

    def _plans(self, distributed_env: Any, num_workers: int, batch_size: int, epoch: int) -> list[list[ChunkSlice]]:
        _, world, nodes = _env(distributed_env)
        return epoch_assignment(
            self._regions,
            world_size=world,
            num_workers=max(num_workers, 1),
            batch_size=max(batch_size, 1),
            drop_last=self.drop_last,
            shuffle=self.shuffled,
            seed=self.seed,
            epoch=epoch,
            num_nodes=nodes,
            chunk_bytes=self._chunk_bytes,
            max_cache_size=self._max_cache_size,
        )

    def get_chunks_and_intervals_per_workers(
        self, distributed_env: Any, num_workers: int, batch_size: int, current_epoch: int
    ) -> tuple[list[list[int]], list[list[list[int]]]]:
        """Every global worker's chunks and intervals in ``current_epoch`` (LitData's layout).

        Returns:
            ``(workers_chunks, workers_intervals)``, one entry per global worker (``rank * num_workers +
            worker``): chunk indexes, and for each an interval ``[chunk_start, start, end, chunk_end]`` in
            global item positions (``[start, end)`` are the items served).
        """
        chunks: list[list[int]] = []
        intervals: list[list[list[int]]] = []
        for plan in self._plans(distributed_env, num_workers, batch_size, current_epoch):
            chunks.append([s.chunk_index for s in plan])
            intervals.append([self._interval(s) for s in plan])
        return chunks, intervals

    def _interval(self, piece: ChunkSlice) -> list[int]:
        base, end = self._offsets[piece.chunk_index], self._offsets[piece.chunk_index + 1]
        return [base, base + piece.start, base + piece.end, end]

    def get_len(self, distributed_env: Any, num_workers: int, batch_size: int, current_epoch: int) -> int:
        """Items the rank of ``distributed_env`` serves in ``current_epoch`` over all its workers."""
        rank, _, _ = _env(distributed_env)
        workers = max(num_workers, 1)
        plans = self._plans(distributed_env, num_workers, batch_size, current_epoch)
        return sum(len(s) for plan in plans[rank * workers : (rank + 1) * workers] for s in plan)

    def __call__(self, array: Iterable[int], num_chunks: int, current_epoch: int, chunk_index: int) -> list[int]:
        """``array`` (the items of one interval) in the order they are served (unchanged without a shuffle)."""
        values = [int(v) for v in array]
        if not self.shuffled:
            return values
        positions = item_order(
            ChunkSlice(chunk_index, 0, len(values)),
            num_chunks=num_chunks,
            shuffle=True,
            seed=self.seed,
            epoch=current_epoch,
            item_window=self.item_window,
        )
        return [values[p] for p in positions]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, drop_last={self.drop_last})"


class NoShuffle(Shuffle):
    """Chunks in index order, items ascending (LitData's ``NoShuffle``)."""


class FullShuffle(Shuffle):
    """Chunks permuted per epoch, items in blocks of ``item_window`` (LitData 0.2.76's ``FullShuffle``)."""

    shuffled = True


class WindowShuffle(FullShuffle):
    """litstream's ``shuffle="window"``: ``FullShuffle``'s assignment, served ``window`` chunks at a time.

    Attributes:
        window: Chunks per window (``shuffle_window``).
    """

    def __init__(self, *args: Any, window: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.window = window


def make_shuffler(
    shuffle: object,
    regions: Sequence[tuple[int, int]],
    chunk_sizes: Sequence[int],
    *,
    seed: int,
    drop_last: bool,
    item_window: int,
    shuffle_window: int,
    chunk_bytes: Sequence[int] | None = None,
    max_cache_size: int | None = None,
) -> Shuffle:
    """The shuffle object of a dataset read with ``shuffle`` (``False``, ``True``/``"full"`` or ``"window"``)."""
    common: dict[str, Any] = {
        "seed": seed,
        "drop_last": drop_last,
        "chunk_bytes": chunk_bytes,
        "max_cache_size": max_cache_size,
    }
    if shuffle is False:
        return NoShuffle(regions, chunk_sizes, **common)
    if shuffle == "window":
        return WindowShuffle(regions, chunk_sizes, item_window=item_window, window=shuffle_window, **common)
    return FullShuffle(regions, chunk_sizes, item_window=item_window, **common)
