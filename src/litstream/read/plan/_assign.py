"""Building blocks of the read plan: chunk order, per-worker budgets, the chunk walk, in-chunk order.

Pure and deterministic: no I/O, no event loop, only numpy's legacy ``RandomState`` (whose streams are
what makes the order identical to LitData 0.2.71-0.2.76). ``read.plan._plan`` composes these into per-epoch plans
for a topology (ranks, workers, nodes); the argument checks shared by the plan modules live here too.

Conventions: item ids are **chunk-local** (0 is the first item of the chunk); ranges are half-open
``[start, end)``; epochs are **1-based**; ``num_workers == 0`` (no DataLoader workers) counts as one
worker, so ``K = max(num_workers, 1)``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, SupportsIndex

import numpy as np

from litstream._core._errors import PlanError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ChunkSlice",
    "as_int",
    "assign_items",
    "budgets",
    "check_rank",
    "check_regions",
    "check_rng",
    "check_workers",
    "chunk_order",
    "item_order",
    "resolve_item_shuffle_window",
]

#: LitData 0.2.76's default ``item_shuffle_window``: items of a chunk slice are shuffled in blocks of 256.
DEFAULT_ITEM_SHUFFLE_WINDOW = 256
_FULL_WINDOW_NAMES = frozenset({"0", "off", "full", "all"})

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


def as_int(name: str, value: object, *, minimum: int, fix: str) -> int:
    """Return ``value`` as an ``int`` ``>= minimum`` or raise :class:`PlanError` naming ``name``."""
    if type(value) is int and value >= minimum:  # the common case, without the slow protocol check
        return value
    if isinstance(value, bool):
        raise PlanError(f"{name} must be an int, got the bool {value!r}; {fix}")
    if not isinstance(value, SupportsIndex):
        raise PlanError(f"{name} must be an int, got {type(value).__name__} {value!r}; {fix}")
    number = operator.index(value)
    if number < minimum:
        raise PlanError(f"{name} must be >= {minimum}, got {number}; {fix}")
    return int(number)


def check_rng(seed: int, epoch: int) -> tuple[int, int]:
    """Return ``(seed, epoch)`` checked: a seed in ``[0, 2**32)``, a 1-based epoch below ``2**32``."""
    seed = as_int("seed", seed, minimum=0, fix="pass a seed in [0, 2**32)")
    if seed >= _MAX_SEED:
        raise PlanError(f"seed must be < 2**32, got {seed}; pass a seed in [0, 2**32)")
    epoch = as_int("epoch", epoch, minimum=1, fix="epochs are 1-based: the first epoch is 1")
    if epoch >= _MAX_SEED:
        raise PlanError(f"epoch must be < 2**32, got {epoch}")
    return seed, epoch


def check_regions(regions: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return ``regions`` as a list of checked ``(start, end)`` pairs, ``0 <= start <= end``."""
    checked: list[tuple[int, int]] = []
    for c, region in enumerate(regions):
        try:
            start, end = region
        except (TypeError, ValueError):
            raise PlanError(f"regions[{c}] must be a (start, end) pair, got {region!r}") from None
        start = as_int(f"regions[{c}] start", start, minimum=0, fix="regions are chunk-local item ranges")
        end = as_int(f"regions[{c}] end", end, minimum=start, fix="regions are [start, end)")
        checked.append((start, end))
    return checked


def check_workers(num_workers: int) -> int:
    """Return ``K = max(num_workers, 1)`` after checking ``num_workers >= 0``."""
    value = as_int("num_workers", num_workers, minimum=0, fix="pass the DataLoader's num_workers")
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
    n = as_int("num_chunks", num_chunks, minimum=0, fix="pass the number of chunks in the dataset")
    seed, epoch = check_rng(seed, epoch)
    if not shuffle:
        return list(range(n))
    return [int(c) for c in np.random.RandomState([seed, epoch]).permutation(n)]


def budgets(total: int, *, world_size: int, workers: int, batch_size: int, drop_last: bool) -> list[int]:
    """Items each global worker ``g = rank * K + worker`` must receive (spec §3.1).

    Whole batches, spread evenly; with ``drop_last=False`` every leftover item goes to one worker of
    the last rank. Arguments are not checked here (callers pass checked values).
    """
    per_rank = (total // batch_size) // world_size  # batches per rank
    base, rem = divmod(per_rank, workers)
    row = [(base + (1 if k < rem else 0)) * batch_size for k in range(workers)]
    out = row * world_size
    left = total - per_rank * world_size * batch_size
    if not drop_last and left > 0:
        # Every leftover item (the N % B tail and batches that did not divide across ranks) goes to
        # worker ``rem % K`` of the last rank.
        out[(world_size - 1) * workers + rem % workers] += left
    return out


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
    world = as_int("world_size", world_size, minimum=1, fix="pass the number of ranks (1 without DDP)")
    workers = check_workers(num_workers)
    batch = as_int("batch_size", batch_size, minimum=1, fix="pass the DataLoader's batch_size")
    checked = check_regions(regions)
    order = [
        as_int(f"chunk_order[{i}]", c, minimum=0, fix="chunk ids index regions") for i, c in enumerate(chunk_order)
    ]
    for i, c in enumerate(order):
        if c >= len(checked):
            raise PlanError(f"chunk_order[{i}] is {c} but there are only {len(checked)} regions")

    total = sum(checked[c][1] - checked[c][0] for c in order)
    remaining = budgets(total, world_size=world, workers=workers, batch_size=batch, drop_last=drop_last)
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


def resolve_item_shuffle_window(value: object) -> int:
    """Return the in-chunk shuffle block size that ``item_shuffle_window=value`` means in LitData 0.2.76.

    ``None``, ``"auto"`` and ``True``: 256 (LitData's default). ``0``, ``False``, ``"full"``, ``"all"``,
    ``"off"``: 0, a full permutation of each slice (as are 1 and any window >= the slice length).
    An int ``>= 0`` (or its decimal string): that many items per block. LitData also reads the
    ``LITDATA_ITEM_SHUFFLE_WINDOW`` environment variable for ``None``; litstream does not.

    Raises:
        PlanError: a negative int or an unknown string (LitData silently clamps or falls back to
            256; litstream refuses instead, so a typo never changes the order unnoticed).
    """
    if value is None or value is True:
        return DEFAULT_ITEM_SHUFFLE_WINDOW
    if value is False:
        return 0
    if isinstance(value, str):
        key = value.strip().lower()
        if key == "auto":
            return DEFAULT_ITEM_SHUFFLE_WINDOW
        if key in _FULL_WINDOW_NAMES:
            return 0
        if not key.isdigit():
            raise PlanError(
                f"item_shuffle_window={value!r} is not understood; pass an int >= 0, 'auto' (256) or 'full' (0)"
            )
        return int(key)
    return as_int("item_shuffle_window", value, minimum=0, fix="pass 256 (LitData's default) or 0 (full)")


def _in_chunk_positions(n: int, window: int, rng: np.random.RandomState) -> np.ndarray:
    """Positions ``0..n-1`` in LitData 0.2.76's ``FullShuffle`` in-chunk order.

    The slice is cut into aligned blocks of ``window`` (the last one may be shorter); each block is
    shuffled in place, first to last, then the block order is drawn, all from the same ``rng``.
    ``window <= 1`` or a single block is one permutation of the whole slice.
    """
    positions = np.arange(n)
    if n < 2:
        return positions
    if window <= 1 or n <= window:
        return rng.permutation(n)
    blocks = [positions[start : start + window] for start in range(0, n, window)]
    for block in blocks:
        rng.shuffle(block)  # a view: shuffles `positions` block by block
    return np.concatenate([blocks[b] for b in rng.permutation(len(blocks))])


def item_order(
    piece: ChunkSlice,
    *,
    num_chunks: int,
    shuffle: bool,
    seed: int,
    epoch: int,
    item_window: int = DEFAULT_ITEM_SHUFFLE_WINDOW,
) -> list[int]:
    """Return the chunk-local ids of ``piece``'s items in the order they are served.

    ``shuffle=False`` serves ``start..end-1`` ascending. ``shuffle=True`` follows LitData 0.2.76's
    ``FullShuffle`` with ``item_shuffle_window=item_window``: from
    ``RandomState([seed, num_chunks, epoch, chunk_index])``, the slice's items are cut into blocks of
    ``item_window`` counted from the slice's first item, each block is shuffled, then the blocks are
    served in a random order (see :func:`_in_chunk_positions`). With ``item_window`` 0 or 1, or a
    slice no longer than it, this is the full permutation of LitData 0.2.71 (spec §3.4). Two workers
    sharing a chunk order their own slices independently.

    LitData orders the same range shifted into its global interval space (offset = items in all
    earlier chunks). Shuffles only move positions, and the positions drawn depend on the length
    alone, so the chunk-local result here maps item for item onto LitData's.

    Args:
        piece: The slice to order.
        num_chunks: Number of chunks in the whole dataset (not in this worker's plan).
        shuffle: Whether the dataset is shuffled.
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch number.
        item_window: In-chunk shuffle block size, ``>= 0``. Default 256 (LitData's).

    Raises:
        PlanError: A bad ``seed``/``epoch``/``num_chunks``/``item_window``, or a slice with ``end < start``.
    """
    seed, epoch = check_rng(seed, epoch)
    n = as_int("num_chunks", num_chunks, minimum=piece.chunk_index + 1, fix="pass the dataset's chunk count")
    if piece.start < 0 or piece.end < piece.start:
        raise PlanError(f"slice {piece!r} must satisfy 0 <= start <= end")
    if not shuffle:
        return list(range(piece.start, piece.end))
    window = as_int("item_window", item_window, minimum=0, fix="pass 256 (LitData's default) or 0 (full)")
    rng = np.random.RandomState([seed, n, epoch, piece.chunk_index])
    order: list[int] = (_in_chunk_positions(len(piece), window, rng) + piece.start).tolist()
    return order  # Python ints, as `[int(i) for i in ...]` would give, 10x faster


def check_rank(rank: int, world: int) -> int:
    """Return ``rank`` checked to lie in ``[0, world)``."""
    rank = as_int("rank", rank, minimum=0, fix="pass the global rank of this process")
    if rank >= world:
        raise PlanError(f"rank must be < world_size={world}, got {rank}; ranks are 0..world_size-1")
    return rank
