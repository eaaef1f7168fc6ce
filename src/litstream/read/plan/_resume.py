"""Resume inside an epoch, on the same topology or another one (pure: no I/O, no event loop).

A topology is ``(world_size W, workers per rank K, batch_size B)``; ``K`` counts ``num_workers=0`` as
one worker. Global worker ``g = rank * K + worker``.

**Streams and levels.** An epoch starts at *level 0*: the read plan of ``read.plan._plan`` gives each
global worker a *stream*, its items in serving order, held as :class:`Segment` s (a range of
positions in one slice's :func:`~litstream.read.plan._plan.item_order`) so nothing is ever expanded to
one entry per item. A checkpoint records, per global worker, how many items of its stream were
consumed. Resuming on the **same** topology stays on that level: each worker drops its consumed
prefix (strict replay). Resuming on **another** topology closes the level and opens the next: the
*remainder* (each old worker's unconsumed suffix, concatenated in global-worker order) is cut into
contiguous runs, one per new global worker, sized by :func:`stripe_budgets`. Levels chain: a run
resumed elastically twice in one epoch is at level 2. Every level partitions what the previous one
left, so across any chain of resumes every item of the epoch is served exactly once. The next epoch
starts at level 0 with the then-current topology.

**Which items were consumed.** The loader counts exactly, per worker of its own rank, the samples it
delivered (the collate function tags each batch with the worker that built it). A checkpoint is
saved by one rank (rank 0 in DDP); the counts of the other ranks are derived under the DDP lock-step
assumption: every rank delivered the same number of batches ``b`` at this level, and torch delivered
them in its default order (``in_order=True``): round-robin over the workers from worker 0, skipping
workers that have run out (:func:`round_robin`). The saver's own counts are always exact; derived
counts are exact when both assumptions hold. To make a resumed session continue torch's round-robin
where it stopped (torch restarts at worker 0), torch worker ``j`` of a resumed session serves logical
worker ``(start + j) % K`` where ``start`` is the worker whose turn was next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..._core._errors import ConfigurationError
from ._checkpoint import DatasetCheckpoint, require
from ._lazy_order import LazyOrder, chained
from ._pieces import Piece, window_piece
from ._plan import ChunkSlice, epoch_assignment
from ._resume_types import EpochSpec, Level, Segment, Stream, Topology, Window
from ._window import DEFAULT_SHUFFLE_WINDOW, windows

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "EpochSpec",
    "Level",
    "ResumePlan",
    "Segment",
    "Topology",
    "Window",
    "level_streams",
    "resolve_resume",
    "round_robin",
    "stripe_budgets",
]


def _split(segments: Sequence[Segment], sizes: Sequence[int]) -> list[Stream]:
    """Cut the concatenation of ``segments`` into consecutive runs of ``sizes`` items (one pass)."""
    out: list[Stream] = []
    it = iter(segments)
    current: Segment | None = None
    for size in sizes:
        run: Stream = []
        while size > 0:
            if current is None or len(current) == 0:
                current = next(it)  # sizes never exceed the total, so this cannot run dry
                continue
            take = min(size, len(current))
            run.append(Segment(current.unit, current.start, current.start + take))
            current = Segment(current.unit, current.start + take, current.end)
            size -= take
        out.append(run)
    return out


def _suffix(stream: Sequence[Segment], skip: int) -> Stream:
    """``stream`` without its first ``skip`` items."""
    total = sum(len(s) for s in stream)
    return _split(stream, [skip, total - skip])[1] if skip else list(stream)


def stripe_budgets(total: int, topology: Topology) -> list[int]:
    """Items each new global worker gets when ``total`` remaining items are restriped (elastic resume).

    All ``total`` items are served (no ``drop_last`` here: an elastic resume loses nothing). They form
    ``ceil(total / B)`` batches, the last one short when ``B`` does not divide ``total``. Ranks get
    batch counts differing by at most one (the first ranks get the extra ones); inside a rank the
    workers do too. The short batch is the last one its rank delivers: it belongs to the last rank
    with an extra batch (or the last rank) and, in that rank, to the worker whose turn is last.

    Returns:
        ``W * K`` item counts summing to ``total``, indexed by global worker ``rank * K + worker``.
    """
    world, workers, batch = topology.world_size, topology.num_workers, topology.batch_size
    batches = -(-total // batch)
    short = batches * batch - total  # items missing from the last batch
    per_rank, extra = divmod(batches, world)
    short_rank = extra - 1 if extra else world - 1
    budgets: list[int] = []
    for rank in range(world):
        n = per_rank + (1 if rank < extra else 0)
        base, rem = divmod(n, workers)
        row = [(base + (1 if k < rem else 0)) * batch for k in range(workers)]
        if rank == short_rank and short:
            row[rem - 1 if rem else workers - 1] -= short
        budgets += row
    return budgets


def round_robin(lengths: Sequence[int], batch_size: int, batches: int) -> tuple[list[int], int]:
    """Items each worker has delivered after ``batches`` batches in torch's in-order delivery.

    Torch hands out batches of an ``IterableDataset`` round-robin over the workers starting at worker
    0, skipping a worker for good once it has run out. Every batch of a worker holds ``batch_size``
    items except its last, which may be short.

    Args:
        lengths: Items in each worker's stream.
        batch_size: Items per batch, ``>= 1``.
        batches: Batches delivered; values above the total are clamped.

    Returns:
        ``(counts, next_worker)``: items delivered per worker, and the worker whose turn comes next
        (0 when ``batches`` is 0; possibly a worker that has run out, which torch would skip).
    """
    workers = len(lengths)
    held = [-(-n // batch_size) for n in lengths]
    taken = [0] * workers
    left = min(batches, sum(held))
    last = -1
    while left > 0:
        active = [w for w in range(workers) if taken[w] < held[w]]
        rounds = min(held[w] - taken[w] for w in active)
        if left >= rounds * len(active):
            for w in active:
                taken[w] += rounds
            left -= rounds * len(active)
            last = active[-1]
        else:
            full, rem = divmod(left, len(active))
            for i, w in enumerate(active):
                taken[w] += full + (1 if i < rem else 0)
            last = active[rem - 1] if rem else active[-1]
            left = 0
    counts = [min(t * batch_size, n) for t, n in zip(taken, lengths, strict=True)]
    return counts, (last + 1) % workers if workers else 0


def _base_streams(spec: EpochSpec, topology: Topology) -> list[Stream]:
    plans = epoch_assignment(
        spec.regions if spec.regions is not None else [(0, size) for size in spec.chunk_sizes],
        world_size=topology.world_size,
        num_workers=topology.num_workers,
        batch_size=topology.batch_size,
        drop_last=spec.drop_last,
        shuffle=spec.mode != "none",
        seed=spec.seed,
        epoch=spec.epoch,
    )
    if spec.mode != "window":
        return [[Segment(piece, 0, len(piece)) for piece in plan] for plan in plans]
    return [
        [
            Segment(unit, 0, len(unit))
            for unit in (Window(w, g, i) for i, w in enumerate(windows(plan, spec.shuffle_window)))
        ]
        for g, plan in enumerate(plans)
    ]


def level_streams(spec: EpochSpec, levels: Sequence[Level], topology: Topology) -> list[Stream]:
    """Every global worker's stream at the level after ``levels``, which runs on ``topology``.

    Args:
        spec: The epoch.
        levels: Closed levels, oldest first (empty: level 0 runs on ``topology``).
        topology: The topology of the level to compute.

    Returns:
        ``topology.world_size * topology.num_workers`` streams.

    Raises:
        ConfigurationError: a closed level consumed more of a stream than it holds.
    """
    tops = [level.topology for level in levels] + [topology]
    streams = _base_streams(spec, tops[0])
    for level, following in zip(levels, tops[1:], strict=True):
        for g, (stream, done) in enumerate(zip(streams, level.consumed, strict=True)):
            if done > sum(len(s) for s in stream):
                raise ConfigurationError(
                    f"checkpoint level {level.as_dict()} says global worker {g} consumed {done} samples but it "
                    f"serves only {sum(len(s) for s in stream)} in epoch {spec.epoch}; the checkpoint belongs to "
                    "another dataset or run"
                )
        rest = [seg for stream, done in zip(streams, level.consumed, strict=True) for seg in _suffix(stream, done)]
        total = sum(len(s) for s in rest)
        streams = _split(rest, stripe_budgets(total, following))
    return streams


@dataclass(frozen=True)
class ResumePlan:
    """Where one rank resumes: the outcome of :func:`resolve_resume`.

    Attributes:
        spec: The epoch being resumed.
        levels: Closed levels, oldest first.
        topology: The topology of the level being served (the resuming run's).
        rank: The rank this plan is for.
        consumed: Items already consumed per logical worker of ``rank`` at this level.
        start: The logical worker that torch worker 0 serves (torch worker ``j`` serves
            ``(start + j) % K``).
        finished: The saved rank had finished the epoch: start the next epoch instead.
    """

    spec: EpochSpec
    levels: tuple[Level, ...]
    topology: Topology
    rank: int
    consumed: tuple[int, ...]
    start: int
    finished: bool

    def pieces(self, worker: int) -> list[Piece]:
        """The pieces (as ``read.plan._pieces.plan_pieces`` returns them) logical ``worker`` still serves.

        Consecutive runs of one chunk are merged so that chunk is fetched once.
        """
        streams = level_streams(self.spec, self.levels, self.topology)
        stream = _suffix(streams[self.rank * self.topology.num_workers + worker], self.consumed[worker])
        return _pieces(self.spec, stream)


def _pieces(spec: EpochSpec, stream: Sequence[Segment]) -> list[Piece]:
    """The pieces of ``stream``; no item id is made from a recorded count before its chunk is read (the
    orders are lazy: ``read/plan/_lazy_order.py``), so a hostile ``index.json`` costs nothing here."""
    out: list[Piece] = []
    for seg in stream:
        unit = seg.unit
        rng = {"seed": spec.seed, "epoch": spec.epoch}
        if isinstance(unit, Window):
            piece = window_piece(
                unit.slices, spec.chunk_sizes, **rng, global_worker=unit.global_worker, window_index=unit.index,
                begin=seg.start, end=seg.end,
            )  # fmt: skip
            out += [piece] if piece is not None else []
            continue
        shuffled = spec.mode != "none"
        order = LazyOrder(
            unit, num_chunks=len(spec.chunk_sizes), shuffle=shuffled, **rng, item_window=spec.item_shuffle_window
        )[seg.start : seg.end]
        if not order:
            continue
        # the items' bounds: exact in index order, else the whole slice's (a permutation's part is unknown)
        low, high = (unit.start, unit.end) if shuffled else (unit.start + seg.start, unit.start + seg.end)
        previous = out[-1][0] if out else None
        if isinstance(previous, ChunkSlice) and previous.chunk_index == unit.chunk_index:
            merged = ChunkSlice(unit.chunk_index, min(previous.start, low), max(previous.end, high))
            out[-1] = (merged, chained([out[-1][1], order]))
        else:
            out.append((ChunkSlice(unit.chunk_index, low, high), order))
    return out


def resolve_resume(
    state: Mapping[str, Any] | DatasetCheckpoint,
    *,
    chunk_sizes: Sequence[int],
    rank: int,
    topology: Topology,
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
    regions: Sequence[tuple[int, int]] | None = None,
) -> ResumePlan:
    """Work out where ``rank`` of a run on ``topology`` resumes a checkpoint (see the module docstring).

    Same topology as the checkpoint's current level: strict replay on that level. Another topology:
    the level is closed with the consumed counts of all its ranks (the saver's exact counts, the
    others derived by :func:`round_robin` from the saver's batch count) and the remainder restriped.
    A checkpoint without ``worker_samples_yielded`` (one written by LitData) is read as
    ``ceil(num_samples_yielded / batch_size)`` batches on every rank.

    Args:
        state: A dataset state from ``StreamingDataset.state_dict`` (already checked with
            :func:`~litstream.read.plan._resume_config.check_config`).
        chunk_sizes: This dataset's items per chunk.
        rank: The resuming rank, in ``[0, topology.world_size)``.
        topology: The resuming run's topology.
        shuffle_window: Slices per window with ``shuffle="window"``.
        regions: Per chunk of ``chunk_sizes``, the chunk-local items that may be served (``None``:
            all); see ``EpochSpec.regions``.

    Raises:
        ConfigurationError: a missing or malformed key, or counts larger than the epoch holds
            (``num_samples_yielded`` or a worker's count beyond what it serves).
    """
    saved_state = state if isinstance(state, DatasetCheckpoint) else DatasetCheckpoint.from_state(state)
    levels = saved_state.resume_levels
    saved = saved_state.topology
    first = levels[0].topology if levels else saved
    config = saved_state.config
    drop_last = require(config, "drop_last")
    spec = EpochSpec(
        chunk_sizes=tuple(int(n) for n in chunk_sizes),
        shuffle=require(config, "shuffle"),
        seed=require(config, "seed"),
        epoch=saved_state.current_epoch,
        drop_last=(first.world_size > 1) if drop_last is None else bool(drop_last),
        shuffle_window=shuffle_window,
        regions=None if regions is None else tuple((int(a), int(b)) for a, b in regions),
        item_shuffle_window=config.get("item_shuffle_window", 0),
    )
    streams = level_streams(spec, levels, saved)
    workers, batch = saved.num_workers, saved.batch_size
    lengths = [sum(len(s) for s in stream) for stream in streams]

    def rank_lengths(r: int) -> list[int]:
        return lengths[r * workers : (r + 1) * workers]

    saver = saved_state.rank
    if saver >= saved.world_size:
        raise ConfigurationError(f"checkpoint has rank={saver} but world_size={saved.world_size}")
    yielded = saved_state.num_samples_yielded
    where = f"in epoch {spec.epoch} with {saved.as_dict()}"
    # litstream's own states count batch_size per batch, as LitData (its exact counts are per worker)
    bound = sum(rank_lengths(saver))
    if saved_state.worker_samples_yielded is not None:
        bound = batch * sum(math.ceil(n / batch) for n in rank_lengths(saver))
    if yielded > bound:
        raise ConfigurationError(
            f"checkpoint has num_samples_yielded={yielded} but rank {saver} serves only "
            f"{sum(rank_lengths(saver))} samples {where}; the checkpoint belongs to another dataset or run"
        )
    if saved_state.worker_samples_yielded is None:
        own, _ = round_robin(rank_lengths(saver), batch, -(-yielded // batch))
    else:
        own = list(saved_state.worker_samples_yielded)
        if len(own) != workers:
            raise ConfigurationError(f"checkpoint lists {len(own)} worker counts for num_workers={workers}")
        for w, (done, total) in enumerate(zip(own, rank_lengths(saver), strict=True)):
            if done > total:
                raise ConfigurationError(
                    f"checkpoint says worker {w} of rank {saver} yielded {done} samples but it serves only "
                    f"{total} {where}; the checkpoint belongs to another dataset or run"
                )
    batches = sum(math.ceil(c / batch) for c in own)
    finished = own == rank_lengths(saver)
    consumed: list[int] = []
    for r in range(saved.world_size):
        consumed += own if r == saver else round_robin(rank_lengths(r), batch, batches)[0]
    if topology == saved:
        mine = consumed[rank * workers : (rank + 1) * workers]
        start = round_robin(rank_lengths(rank), batch, batches)[1]
        return ResumePlan(spec, levels, topology, rank, tuple(mine), start, finished)
    closed = (*levels, Level(saved, tuple(consumed)))
    return ResumePlan(spec, closed, topology, rank, (0,) * topology.num_workers, 0, finished)
