"""The read plan: which items every (rank, worker) serves in an epoch, and in which order.

Pure and deterministic: no I/O, no event loop, only numpy's legacy ``RandomState`` (whose streams are
what makes the order identical to LitData 0.2.71). Everything here is a function of its arguments.

Pipeline for one epoch (spec ``read.md`` §3.1-§3.4)::

    chunk_order(...)     -> chunk ids in visiting order (index order, or a seeded permutation)
    assign_items(...)    -> per global worker g = rank * K + worker: a list of ChunkSlice
    item_order(slice)    -> the chunk-local item ids of one slice, in serving order

A worker serves its slices one after the other, each in :func:`item_order`. :func:`worker_plan` runs
the first two steps for one worker, :func:`items_per_rank` gives what ``len(dataset)`` reports on a
rank, and :func:`replay_skip` + :func:`resume_position` implement strict replay (§4.4).

Scope: a single node (any number of ranks on it) with ``NoShuffle`` or ``FullShuffle``. Multi-node
``FullShuffle`` from epoch 2 on (per-node chunk sets) and ``WindowShuffle`` are not implemented.

Conventions: item ids are **chunk-local** (0 is the first item of the chunk); ranges are half-open
``[start, end)``; epochs are **1-based**; ``num_workers == 0`` (no DataLoader workers) counts as one
worker, so ``K = max(num_workers, 1)``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsIndex

import numpy as np

from litstream._errors import PlanError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ChunkSlice",
    "assign_items",
    "chunk_order",
    "item_order",
    "items_per_rank",
    "replay_skip",
    "resume_position",
    "worker_plan",
]

_MAX_SEED = 2**32  # numpy RandomState accepts seed words in [0, 2**32)


@dataclass(frozen=True)
class ChunkSlice:
    """A contiguous run of items of one chunk, given to one worker.

    Attributes:
        chunk_index: Position of the chunk in the dataset's chunk list (after subsampling).
        start: First item, chunk-local, inclusive.
        end: Chunk-local, exclusive; ``end - start`` items (always at least 1 in a plan).

    ``len(piece)`` is its item count (so an empty slice is falsy). Fields are not validated here.
    """

    chunk_index: int
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


def _as_int(name: str, value: object, *, minimum: int, fix: str) -> int:
    """Return ``value`` as an ``int`` ``>= minimum`` or raise :class:`PlanError` naming ``name``."""
    if isinstance(value, bool):
        raise PlanError(f"{name} must be an int, got the bool {value!r}; {fix}")
    if not isinstance(value, SupportsIndex):
        raise PlanError(f"{name} must be an int, got {type(value).__name__} {value!r}; {fix}")
    number = operator.index(value)
    if number < minimum:
        raise PlanError(f"{name} must be >= {minimum}, got {number}; {fix}")
    return int(number)


def _check_rng(seed: int, epoch: int) -> tuple[int, int]:
    seed = _as_int("seed", seed, minimum=0, fix="pass a seed in [0, 2**32)")
    if seed >= _MAX_SEED:
        raise PlanError(f"seed must be < 2**32, got {seed}; pass a seed in [0, 2**32)")
    epoch = _as_int("epoch", epoch, minimum=1, fix="epochs are 1-based: the first epoch is 1")
    if epoch >= _MAX_SEED:
        raise PlanError(f"epoch must be < 2**32, got {epoch}")
    return seed, epoch


def _check_regions(regions: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    checked: list[tuple[int, int]] = []
    for c, region in enumerate(regions):
        try:
            start, end = region
        except (TypeError, ValueError):
            raise PlanError(f"regions[{c}] must be a (start, end) pair, got {region!r}") from None
        start = _as_int(f"regions[{c}] start", start, minimum=0, fix="regions are chunk-local item ranges")
        end = _as_int(f"regions[{c}] end", end, minimum=start, fix="regions are [start, end)")
        checked.append((start, end))
    return checked


def _num_workers(num_workers: int) -> int:
    value = _as_int("num_workers", num_workers, minimum=0, fix="pass the DataLoader's num_workers")
    return max(value, 1)


def chunk_order(num_chunks: int, *, shuffle: bool, seed: int, epoch: int) -> list[int]:
    """Return the order in which chunks are handed out in ``epoch``.

    Args:
        num_chunks: Number of chunks in the dataset (0 gives ``[]``).
        shuffle: ``False``: index order ``0..num_chunks-1``. ``True``: the permutation drawn by
            ``RandomState([seed, epoch])``, LitData's single-node ``FullShuffle``.
        seed: Shuffle seed in ``[0, 2**32)``; checked even when ``shuffle`` is ``False``.
        epoch: 1-based epoch number.

    Returns:
        A permutation of ``range(num_chunks)``.

    Raises:
        PlanError: ``num_chunks`` negative, ``seed`` outside ``[0, 2**32)`` or ``epoch < 1``.
    """
    n = _as_int("num_chunks", num_chunks, minimum=0, fix="pass the number of chunks in the dataset")
    seed, epoch = _check_rng(seed, epoch)
    if not shuffle:
        return list(range(n))
    return [int(c) for c in np.random.RandomState([seed, epoch]).permutation(n)]


def _budgets(total: int, *, world_size: int, workers: int, batch_size: int, drop_last: bool) -> list[int]:
    """Items each global worker must receive (spec §3.1): whole batches, leftovers to one worker."""
    per_rank = (total // batch_size) // world_size  # batches per rank
    base, rem = divmod(per_rank, workers)
    row = [(base + (1 if k < rem else 0)) * batch_size for k in range(workers)]
    budgets = row * world_size
    left = total - per_rank * world_size * batch_size
    if not drop_last and left > 0:
        # Every leftover item (the N % B tail and batches that did not divide across ranks) goes to
        # worker ``rem % K`` of the last rank.
        budgets[(world_size - 1) * workers + rem % workers] += left
    return budgets


def assign_items(
    chunk_order: Sequence[int],
    regions: Sequence[tuple[int, int]],
    *,
    world_size: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
) -> list[list[ChunkSlice]]:
    """Split the items of the chunks in ``chunk_order`` across every worker of every rank.

    Budgets (spec §3.1): with ``N`` = items in the visited regions, each rank gets
    ``(N // batch_size) // world_size`` whole batches, spread over its ``K`` workers so that the
    first ``rem`` workers get one batch more. With ``drop_last=False`` every remaining item goes to
    worker ``rem % K`` of the last rank; with ``drop_last=True`` they are not served.

    Walk: chunks are visited in ``chunk_order`` and their region handed to the first worker (global
    order) whose budget is not yet spent; when the region is larger than that budget the worker
    takes a prefix and the next worker continues in the same chunk. Empty regions are skipped and
    items beyond all budgets dropped.

    Args:
        chunk_order: Chunk ids to visit, e.g. from :func:`chunk_order`; each in
            ``[0, len(regions))``.
        regions: ``regions[c] = (start, end)``, the chunk-local item range of chunk ``c`` that may be
            served (normally ``(0, chunk_size)``).
        world_size: Number of ranks, ``>= 1``.
        num_workers: DataLoader workers per rank; 0 counts as 1.
        batch_size: Items per batch, ``>= 1``.
        drop_last: Drop what does not fill a whole batch on every rank.

    Returns:
        ``world_size * K`` lists, one per global worker ``g = rank * K + worker``, each the slices
        that worker serves, in order. Slices are never empty.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    world = _as_int("world_size", world_size, minimum=1, fix="pass the number of ranks (1 without DDP)")
    workers = _num_workers(num_workers)
    batch = _as_int("batch_size", batch_size, minimum=1, fix="pass the DataLoader's batch_size")
    checked = _check_regions(regions)
    order = [
        _as_int(f"chunk_order[{i}]", c, minimum=0, fix="chunk ids index regions") for i, c in enumerate(chunk_order)
    ]
    for i, c in enumerate(order):
        if c >= len(checked):
            raise PlanError(f"chunk_order[{i}] is {c} but there are only {len(checked)} regions")

    total = sum(checked[c][1] - checked[c][0] for c in order)
    remaining = _budgets(total, world_size=world, workers=workers, batch_size=batch, drop_last=drop_last)
    plans: list[list[ChunkSlice]] = [[] for _ in remaining]
    g = 0
    for c in order:
        start, end = checked[c]
        while start < end:
            while g < len(remaining) and remaining[g] == 0:
                g += 1
            if g == len(remaining):
                return plans  # every budget is spent: the rest is dropped
            take = min(end - start, remaining[g])
            plans[g].append(ChunkSlice(c, start, start + take))
            remaining[g] -= take
            start += take
    return plans


def item_order(piece: ChunkSlice, *, num_chunks: int, shuffle: bool, seed: int, epoch: int) -> list[int]:
    """Return the chunk-local ids of ``piece``'s items in the order they are served.

    ``shuffle=False`` serves ``start..end-1`` ascending. ``shuffle=True`` serves
    ``RandomState([seed, num_chunks, epoch, chunk_index]).permutation(arange(start, end))``, so two
    workers sharing a chunk permute their own slices independently (LitData 0.2.71, spec §3.4).

    LitData permutes the same range shifted into its global interval space (offset = items in all
    earlier chunks). A permutation of an array only moves positions, and the positions it draws
    depend on the length alone, so ``perm(arange(o + s, o + e)) == o + perm(arange(s, e))``: the
    chunk-local result here maps item for item onto LitData's.

    Args:
        piece: The slice to order.
        num_chunks: Number of chunks in the whole dataset (not in this worker's plan).
        shuffle: Whether the dataset is shuffled.
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch number.

    Raises:
        PlanError: A bad ``seed``/``epoch``/``num_chunks``, or a slice with ``end < start``.
    """
    seed, epoch = _check_rng(seed, epoch)
    n = _as_int("num_chunks", num_chunks, minimum=piece.chunk_index + 1, fix="pass the dataset's chunk count")
    if piece.start < 0 or piece.end < piece.start:
        raise PlanError(f"slice {piece!r} must satisfy 0 <= start <= end")
    items = np.arange(piece.start, piece.end)
    if not shuffle:
        return [int(i) for i in items]
    rng = np.random.RandomState([seed, n, epoch, piece.chunk_index])
    return [int(i) for i in rng.permutation(items)]


def _check_rank(rank: int, world: int) -> int:
    rank = _as_int("rank", rank, minimum=0, fix="pass the global rank of this process")
    if rank >= world:
        raise PlanError(f"rank must be < world_size={world}, got {rank}; ranks are 0..world_size-1")
    return rank


def worker_plan(
    regions: Sequence[tuple[int, int]],
    *,
    rank: int,
    world_size: int,
    worker: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
    shuffle: bool,
    seed: int,
    epoch: int,
) -> list[ChunkSlice]:
    """Return the slices one worker serves in ``epoch`` (:func:`chunk_order` + :func:`assign_items`).

    Args:
        regions: Per-chunk chunk-local item ranges, as in :func:`assign_items`; its length is the
            dataset's chunk count.
        rank: Global rank in ``[0, world_size)``.
        world_size: Number of ranks (single node).
        worker: DataLoader worker id in ``[0, K)``; 0 when ``num_workers`` is 0.
        num_workers: DataLoader workers per rank; 0 counts as 1.
        batch_size: Items per batch, ``>= 1``.
        drop_last: See :func:`assign_items`.
        shuffle: ``FullShuffle`` when ``True``, else ``NoShuffle``.
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch number.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    world = _as_int("world_size", world_size, minimum=1, fix="pass the number of ranks (1 without DDP)")
    rank = _check_rank(rank, world)
    workers = _num_workers(num_workers)
    worker = _as_int("worker", worker, minimum=0, fix="pass the DataLoader worker id")
    if worker >= workers:
        raise PlanError(f"worker must be < max(num_workers, 1)={workers}, got {worker}")
    order = chunk_order(len(regions), shuffle=shuffle, seed=seed, epoch=epoch)
    plans = assign_items(
        order, regions, world_size=world, num_workers=workers, batch_size=batch_size, drop_last=drop_last
    )
    return plans[rank * workers + worker]


def items_per_rank(
    regions: Sequence[tuple[int, int]],
    *,
    rank: int,
    world_size: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
) -> int:
    """Return how many items ``rank`` serves in one epoch: what ``len(dataset)`` reports there.

    The walk in :func:`assign_items` always fills each budget exactly (the budgets never exceed the
    item count), so the count depends on the budgets only, not on the chunk order, seed or epoch:
    ``B * ((N // B) // W)``, plus every leftover item on the last rank when ``drop_last=False``.

    Args:
        regions: Per-chunk chunk-local item ranges, as in :func:`assign_items`.
        rank: Global rank in ``[0, world_size)``.
        world_size: Number of ranks (single node).
        num_workers: DataLoader workers per rank; 0 counts as 1.
        batch_size: Items per batch, ``>= 1``.
        drop_last: See :func:`assign_items`.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    world = _as_int("world_size", world_size, minimum=1, fix="pass the number of ranks (1 without DDP)")
    rank = _check_rank(rank, world)
    workers = _num_workers(num_workers)
    batch = _as_int("batch_size", batch_size, minimum=1, fix="pass the DataLoader's batch_size")
    total = sum(end - start for start, end in _check_regions(regions))
    budgets = _budgets(total, world_size=world, workers=workers, batch_size=batch, drop_last=drop_last)
    return sum(budgets[rank * workers : (rank + 1) * workers])


def replay_skip(num_samples_yielded: int, *, batch_size: int, num_workers: int) -> list[int]:
    """Return, per worker of one rank, how many items it had served when a checkpoint was taken.

    Strict replay (spec §4.4) assumes the DataLoader took batches from workers round-robin starting
    at worker 0: each worker gets ``(n // (K * B)) * B``; the rest is handed out ``B`` at a time from
    worker 0 on, the final partial amount going to the next worker in turn. Example:
    ``replay_skip(27, batch_size=8, num_workers=2) == [16, 11]``.

    Args:
        num_samples_yielded: Items the rank's loader counted (a multiple of ``batch_size`` when
            taken from LitData's loader, but any count ``>= 0`` is accepted).
        batch_size: Batch size of the checkpointed run, ``>= 1``.
        num_workers: Workers of the checkpointed run; 0 counts as 1.

    Returns:
        ``K`` counts summing to ``num_samples_yielded``. A count may exceed what that worker holds
        (the round-robin assumption breaks near an epoch's end); :func:`resume_position` clamps it.

    Raises:
        PlanError: A negative count, or a bad ``batch_size``/``num_workers``.
    """
    n = _as_int("num_samples_yielded", num_samples_yielded, minimum=0, fix="pass the checkpoint's count")
    batch = _as_int("batch_size", batch_size, minimum=1, fix="pass the checkpoint's batch_size")
    workers = _num_workers(num_workers)
    rounds, rest = divmod(n, workers * batch)
    counts = [rounds * batch] * workers
    full, partial = divmod(rest, batch)  # full < workers because rest < workers * batch
    for w in range(full):
        counts[w] += batch
    counts[full] += partial
    return counts


def resume_position(plan: Sequence[ChunkSlice], consumed: int) -> tuple[int, int]:
    """Locate where a worker resumes after serving ``consumed`` items of ``plan`` this epoch.

    Args:
        plan: The worker's slices, e.g. from :func:`worker_plan`.
        consumed: Items already served, e.g. an entry of :func:`replay_skip`.

    Returns:
        ``(index, offset)``: resume at ``plan[index]``, dropping the first ``offset`` items of its
        :func:`item_order` (``0 <= offset < len(plan[index])``). ``(len(plan), 0)`` when the worker
        has nothing left, including when ``consumed`` exceeds the plan's total.

    Raises:
        PlanError: ``consumed`` is negative.
    """
    left = _as_int("consumed", consumed, minimum=0, fix="pass the number of items already served")
    for index, piece in enumerate(plan):
        size = piece.end - piece.start
        if left < size:
            return index, left
        left -= size
    return len(plan), 0
