"""The read plan: which items every (node, rank, worker) serves in an epoch, and in which order.

Pure and deterministic: no I/O, no event loop. Built from the blocks in ``read.plan._assign`` (spec
``read.md`` §3.1-§3.4), it reproduces LitData 0.2.71's ``NoShuffle`` and ``FullShuffle`` exactly,
on one node and on several (§3.3)::

    epoch_assignment(...) -> per global worker g = rank * K + worker: a list of ChunkSlice
    item_order(slice)     -> the chunk-local item ids of one slice, in serving order

A worker serves its slices one after the other, each in :func:`item_order` (or, with the opt-in
cross-chunk shuffle, in the order of ``read.plan._window``). :func:`worker_plan` picks one worker's
slices, :func:`items_per_rank` gives what ``len(dataset)`` reports on a rank, and
:func:`replay_skip` + :func:`resume_position` implement strict replay (§4.4).

Multi-node ``FullShuffle`` (§3.3): epoch 1 is the global assignment of ``RandomState([seed, 1])``'s
chunk permutation. From epoch 2 on, when every node's chunk set (the distinct chunks its workers
got in epoch 1) fits in ``max_cache_size``, each node re-permutes its own set with
``RandomState([seed, epoch, node])`` and splits it among its own ranks; otherwise the global
assignment of epoch ``epoch`` is used. A chunk split across two nodes in epoch 1 is in both sets,
so from epoch 2 both nodes serve all of it (LitData's behaviour, kept on purpose).

``WindowShuffle`` (POSIX-fast) is not implemented.

Conventions: item ids are **chunk-local**; ranges are half-open ``[start, end)``; epochs are
**1-based**; ``num_workers == 0`` counts as one worker, so ``K = max(num_workers, 1)``; nodes hold
``W // num_nodes`` consecutive ranks each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from litstream._core._errors import PlanError

from ._assign import (
    ChunkSlice,
    as_int,
    assign_items,
    budgets,
    check_rank,
    check_regions,
    check_rng,
    check_workers,
    chunk_order,
    item_order,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "ChunkSlice",
    "assign_items",
    "chunk_order",
    "epoch_assignment",
    "item_order",
    "items_per_rank",
    "node_chunk_sets",
    "node_shard_fits",
    "replay_skip",
    "resume_position",
    "worker_plan",
]


def _check_world(world_size: int, num_nodes: int) -> tuple[int, int]:
    world = as_int("world_size", world_size, minimum=1, fix="pass the number of ranks (1 without DDP)")
    nodes = as_int("num_nodes", num_nodes, minimum=1, fix="pass the number of machines (1 for a single node)")
    if world % nodes:
        raise PlanError(
            f"world_size={world} is not a multiple of num_nodes={nodes}; every node must run the same "
            "number of ranks: pass num_nodes=1 or a divisor of world_size"
        )
    return world, nodes


def _check_chunk_bytes(chunk_bytes: Sequence[int] | None, num_chunks: int) -> list[int]:
    if chunk_bytes is None:
        return [0] * num_chunks
    sizes = [
        as_int(f"chunk_bytes[{c}]", b, minimum=0, fix="pass index.json's chunk_bytes")
        for c, b in enumerate(chunk_bytes)
    ]
    if len(sizes) != num_chunks:
        raise PlanError(f"chunk_bytes has {len(sizes)} entries but there are {num_chunks} regions; pass one per chunk")
    return sizes


def node_chunk_sets(
    plans: Sequence[Sequence[ChunkSlice]], *, world_size: int, num_workers: int, num_nodes: int
) -> list[list[int]]:
    """Return, per node, the distinct chunk ids its workers got in ``plans`` (first-seen order).

    Args:
        plans: One list of slices per global worker, as :func:`assign_items` returns.
        world_size: Number of ranks, a multiple of ``num_nodes``.
        num_workers: DataLoader workers per rank; 0 counts as 1.
        num_nodes: Number of nodes; node ``n`` holds ranks ``[n * W // nodes, (n + 1) * W // nodes)``.

    Raises:
        PlanError: A bad argument, or ``len(plans) != world_size * K``.
    """
    world, nodes = _check_world(world_size, num_nodes)
    workers = check_workers(num_workers)
    if len(plans) != world * workers:
        raise PlanError(f"plans has {len(plans)} workers but world_size * K = {world * workers}")
    per_node = world // nodes * workers
    return [
        list(dict.fromkeys(piece.chunk_index for plan in plans[n * per_node : (n + 1) * per_node] for piece in plan))
        for n in range(nodes)
    ]


def node_shard_fits(node_sets: Sequence[Sequence[int]], chunk_bytes: Sequence[int], max_cache_size: int | None) -> bool:
    """Whether the largest node chunk set fits in ``max_cache_size`` bytes.

    ``None`` or ``0`` means no limit (always fits), as LitData treats an unset budget in its shuffler.
    """
    if not max_cache_size:
        return True
    return max((sum(chunk_bytes[c] for c in ids) for ids in node_sets), default=0) <= max_cache_size


def epoch_assignment(
    regions: Sequence[tuple[int, int]],
    *,
    world_size: int,
    num_workers: int,
    batch_size: int,
    drop_last: bool,
    shuffle: bool,
    seed: int,
    epoch: int,
    num_nodes: int = 1,
    chunk_bytes: Sequence[int] | None = None,
    max_cache_size: int | None = None,
) -> list[list[ChunkSlice]]:
    """Return every global worker's slices in ``epoch`` (LitData's ``NoShuffle`` / ``FullShuffle``).

    Args:
        regions: ``regions[c] = (start, end)``, the chunk-local items of chunk ``c`` that may be
            served; its length is the dataset's chunk count.
        world_size: Number of ranks over all nodes, a multiple of ``num_nodes``.
        num_workers: DataLoader workers per rank; 0 counts as 1.
        batch_size: Items per batch, ``>= 1``.
        drop_last: See :func:`assign_items`.
        shuffle: ``FullShuffle`` when ``True``, else ``NoShuffle`` (which ignores nodes).
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch number.
        num_nodes: Machines the ranks run on (default 1). Only ``FullShuffle`` from epoch 2 on
            depends on it.
        chunk_bytes: Size in bytes of each chunk file (``index.json``'s ``chunk_bytes``); ``None``
            counts every chunk as 0 bytes, so every node set fits.
        max_cache_size: The chunk cache budget in bytes of one node; ``None`` or ``0``: no limit.

    Returns:
        ``world_size * K`` lists, one per global worker ``g = rank * K + worker``.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    world, nodes = _check_world(world_size, num_nodes)
    workers = check_workers(num_workers)
    seed, epoch = check_rng(seed, epoch)
    checked = check_regions(regions)
    sizes = _check_chunk_bytes(chunk_bytes, len(checked))

    def assign(order: Sequence[int], ranks: int) -> list[list[ChunkSlice]]:
        return assign_items(
            order, checked, world_size=ranks, num_workers=workers, batch_size=batch_size, drop_last=drop_last
        )

    def global_assign(shift: int) -> list[list[ChunkSlice]]:
        return assign(chunk_order(len(checked), shuffle=shuffle, seed=seed, epoch=shift), world)

    if not shuffle or nodes == 1:
        return global_assign(epoch)
    first = global_assign(1)
    if epoch == 1:
        return first
    node_sets = node_chunk_sets(first, world_size=world, num_workers=workers, num_nodes=nodes)
    if not node_shard_fits(node_sets, sizes, max_cache_size):
        return global_assign(epoch)
    plans: list[list[ChunkSlice]] = []
    for node, ids in enumerate(node_sets):
        order = [int(c) for c in np.random.RandomState([seed, epoch, node]).permutation(ids)] if ids else []
        plans += assign(order, world // nodes)
    return plans


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
    num_nodes: int = 1,
    chunk_bytes: Sequence[int] | None = None,
    max_cache_size: int | None = None,
) -> list[ChunkSlice]:
    """Return the slices one worker serves in ``epoch`` (one entry of :func:`epoch_assignment`).

    Args:
        regions: Per-chunk chunk-local item ranges, as in :func:`epoch_assignment`.
        rank: Global rank in ``[0, world_size)``.
        world_size: Number of ranks over all nodes.
        worker: DataLoader worker id in ``[0, K)``; 0 when ``num_workers`` is 0.
        num_workers: DataLoader workers per rank; 0 counts as 1.
        batch_size: Items per batch, ``>= 1``.
        drop_last: See :func:`assign_items`.
        shuffle: ``FullShuffle`` when ``True``, else ``NoShuffle``.
        seed: Shuffle seed in ``[0, 2**32)``.
        epoch: 1-based epoch number.
        num_nodes: See :func:`epoch_assignment` (default 1).
        chunk_bytes: See :func:`epoch_assignment`.
        max_cache_size: See :func:`epoch_assignment`.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    world, nodes = _check_world(world_size, num_nodes)
    rank = check_rank(rank, world)
    workers = check_workers(num_workers)
    worker = as_int("worker", worker, minimum=0, fix="pass the DataLoader worker id")
    if worker >= workers:
        raise PlanError(f"worker must be < max(num_workers, 1)={workers}, got {worker}")
    plans = epoch_assignment(
        regions,
        world_size=world,
        num_workers=workers,
        batch_size=batch_size,
        drop_last=drop_last,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        num_nodes=nodes,
        chunk_bytes=chunk_bytes,
        max_cache_size=max_cache_size,
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
    num_nodes: int = 1,
    shuffle: bool = False,
    seed: int = 42,
    epoch: int = 1,
    chunk_bytes: Sequence[int] | None = None,
    max_cache_size: int | None = None,
) -> int:
    """Return how many items ``rank`` serves in one epoch: what ``len(dataset)`` reports there.

    The walk in :func:`assign_items` always fills each budget exactly (the budgets never exceed the
    item count), so on one node the count depends on the budgets only, not on the chunk order, seed
    or epoch: ``B * ((N // B) // W)``, plus every leftover item on the last rank when
    ``drop_last=False``. With several nodes, ``FullShuffle`` from epoch 2 on may split each node's
    own chunk set among its ranks (see :func:`epoch_assignment`), and the count follows that set.

    Args:
        regions: Per-chunk chunk-local item ranges, as in :func:`epoch_assignment`.
        rank: Global rank in ``[0, world_size)``.
        world_size: Number of ranks over all nodes.
        num_workers: DataLoader workers per rank; 0 counts as 1.
        batch_size: Items per batch, ``>= 1``.
        drop_last: See :func:`assign_items`.
        num_nodes, shuffle, seed, epoch, chunk_bytes, max_cache_size: See :func:`epoch_assignment`;
            they matter only when ``num_nodes > 1`` and ``shuffle`` is ``True``.

    Raises:
        PlanError: A bad argument; the message names it.
    """
    world, nodes = _check_world(world_size, num_nodes)
    rank = check_rank(rank, world)
    workers = check_workers(num_workers)
    batch = as_int("batch_size", batch_size, minimum=1, fix="pass the DataLoader's batch_size")
    if shuffle and nodes > 1:
        plans = epoch_assignment(
            regions,
            world_size=world,
            num_workers=workers,
            batch_size=batch,
            drop_last=drop_last,
            shuffle=shuffle,
            seed=seed,
            epoch=epoch,
            num_nodes=nodes,
            chunk_bytes=chunk_bytes,
            max_cache_size=max_cache_size,
        )
        return sum(len(piece) for plan in plans[rank * workers : (rank + 1) * workers] for piece in plan)
    total = sum(end - start for start, end in check_regions(regions))
    counts = budgets(total, world_size=world, workers=workers, batch_size=batch, drop_last=drop_last)
    return sum(counts[rank * workers : (rank + 1) * workers])


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
    n = as_int("num_samples_yielded", num_samples_yielded, minimum=0, fix="pass the checkpoint's count")
    batch = as_int("batch_size", batch_size, minimum=1, fix="pass the checkpoint's batch_size")
    workers = check_workers(num_workers)
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
    left = as_int("consumed", consumed, minimum=0, fix="pass the number of items already served")
    for index, piece in enumerate(plan):
        size = piece.end - piece.start
        if left < size:
            return index, left
        left -= size
    return len(plan), 0
