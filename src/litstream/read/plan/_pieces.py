"""The pieces of a worker's read plan: what to fetch, and the item order inside each (pure).

``plan_pieces`` turns the read plan (``plan._plan``, ``plan._window``) into pieces for one (rank, worker,
epoch), minus what a resumed run already served: ``(ChunkSlice, item order)`` pairs, or with
``shuffle="window"`` ``(ChunkWindow, item order)`` pairs that span several chunks. The async engine
(``read.engine._engine``) fetches and serves them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from ..._core._errors import PlanError
from ._assign import DEFAULT_ITEM_SHUFFLE_WINDOW
from ._lazy_order import Deferred, LazyOrder
from ._plan import ChunkSlice, resume_position, worker_plan
from ._window import DEFAULT_SHUFFLE_WINDOW, window_items, window_position, windows

if TYPE_CHECKING:
    from ..source._source import DatasetSource
    from ._subset import Selection


__all__ = [
    "EAGER_WINDOW_ITEMS",
    "ChunkWindow",
    "Piece",
    "ReadPlanArgs",
    "ShuffleMode",
    "piece_chunks",
    "plan_pieces",
    "window_piece",
]

ShuffleMode: TypeAlias = bool | Literal["full", "window"]
"""``False``: NoShuffle. ``True`` or ``"full"``: FullShuffle. ``"window"``: FullShuffle's plan served
window by window across chunks (``read.plan._window``)."""


@dataclass(frozen=True)
class ReadPlanArgs:
    """Inputs of the read plan for one (rank, worker) and epoch; see ``read.plan._plan`` and ``read.plan._window``.

    Attributes:
        shuffle: A :data:`ShuffleMode`.
        shuffle_window: Chunks per window with ``shuffle="window"`` (``>= 1``); ignored otherwise.
        num_nodes: Machines the ``world_size`` ranks run on (``world_size % num_nodes == 0``).
        max_cache_size: One node's chunk cache budget in bytes for the multi-node FullShuffle
            decision (§3.3); ``None`` or ``0``: no limit.
        skip: Items of this worker's plan already served this epoch (resume).
        item_shuffle_window: In-chunk shuffle block size with ``shuffle=True`` (LitData 0.2.76's,
            default 256; 0 or 1: a full permutation of each slice).
    """

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    batch_size: int = 1
    drop_last: bool = False
    shuffle: ShuffleMode = False
    seed: int = 42
    epoch: int = 1
    skip: int = 0
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW
    num_nodes: int = 1
    max_cache_size: int | None = None
    item_shuffle_window: int = DEFAULT_ITEM_SHUFFLE_WINDOW


@dataclass(frozen=True)
class ChunkWindow:
    """The chunks of one window piece (``shuffle="window"``), in fetch order.

    Item ids of such a piece count through the chunks one after the other: ids
    ``[bases[j], bases[j] + chunk_sizes[j])`` are the items of ``chunks[j]``.
    """

    chunks: tuple[int, ...]
    bases: tuple[int, ...]

    @property
    def chunk_index(self) -> int:
        """The first chunk (so both piece kinds expose ``chunk_index``)."""
        return self.chunks[0]


Piece: TypeAlias = tuple[ChunkSlice | ChunkWindow, Sequence[int]]
"""One unit of a worker's plan: what to fetch and the item ids to serve from it, in order."""


def _shuffle_mode(shuffle: object) -> str:
    if shuffle is False:
        return "none"
    if shuffle is True or shuffle == "full":
        return "full"
    if shuffle == "window":
        return "window"
    raise PlanError(f"shuffle must be False, True, 'full' or 'window', got {shuffle!r}")


def plan_pieces(source: DatasetSource, args: ReadPlanArgs, selection: Selection | None = None) -> list[Piece]:
    """The pieces this worker reads and the item order inside each, after skipping ``args.skip``.

    With a ``selection`` (subsample, subset, split) the plan runs on its selected chunks and regions
    and the pieces are mapped back to chunk files (``read.plan._subset``).
    """
    if selection is not None:
        return selection.file_pieces(_plan_pieces(source, args, selection))
    return _plan_pieces(source, args, None)


def _plan_pieces(source: DatasetSource, args: ReadPlanArgs, selection: Selection | None) -> list[Piece]:
    mode = _shuffle_mode(args.shuffle)
    sizes = source.chunk_sizes
    chunk_bytes = [c.chunk_bytes for c in source.index.chunks]
    if selection is None:
        regions = [(0, size) for size in sizes]
    else:
        regions, sizes = list(selection.regions), selection.sizes(sizes)
        chunk_bytes = [chunk_bytes[c] for c in selection.chunks]
    plan = worker_plan(
        regions,
        rank=args.rank,
        world_size=args.world_size,
        worker=args.worker,
        num_workers=args.num_workers,
        batch_size=args.batch_size,
        drop_last=args.drop_last,
        shuffle=mode != "none",
        seed=args.seed,
        epoch=args.epoch,
        num_nodes=args.num_nodes,
        chunk_bytes=chunk_bytes,
        max_cache_size=args.max_cache_size,
    )
    if mode == "window":
        return _window_pieces(plan, sizes, args)
    start, drop = resume_position(plan, args.skip) if args.skip else (0, 0)
    pieces: list[Piece] = []
    for position in range(start, len(plan)):
        piece = plan[position]
        order: Sequence[int] = LazyOrder(  # ids made once the chunk is read and checked, never from a claim
            piece,
            num_chunks=len(regions),
            shuffle=mode != "none",
            seed=args.seed,
            epoch=args.epoch,
            item_window=args.item_shuffle_window,
        )
        if position == start and drop:
            order = order[drop:]
        if order:
            pieces.append((piece, order))
    return pieces


def _window_pieces(plan: Sequence[ChunkSlice], sizes: Sequence[int], args: ReadPlanArgs) -> list[Piece]:
    groups = windows(plan, args.shuffle_window)
    start, drop = window_position(plan, args.shuffle_window, args.skip) if args.skip else (0, 0)
    global_worker = args.rank * max(args.num_workers, 1) + args.worker
    pieces: list[Piece] = []
    for index in range(start, len(groups)):
        piece = window_piece(
            groups[index],
            sizes,
            seed=args.seed,
            epoch=args.epoch,
            global_worker=global_worker,
            window_index=index,
            begin=drop if index == start else 0,
        )
        if piece is not None:
            pieces.append(piece)
    return pieces


EAGER_WINDOW_ITEMS = 1 << 16
"""A resumed part of a window that records at most this many items is ordered when planned, so only the
chunks it still serves are fetched; a larger one fetches every chunk of its window and is ordered once
they are read and checked (its recorded counts are a stranger's)."""


def window_piece(
    window: Sequence[ChunkSlice],
    sizes: Sequence[int],
    *,
    seed: int,
    epoch: int,
    global_worker: int,
    window_index: int,
    begin: int = 0,
    end: int | None = None,
) -> Piece | None:
    """The piece serving positions ``[begin, end)`` of ``window``'s order (:func:`~._window.window_items`).

    Nothing is allocated per recorded item while planning: the order is a :class:`~._lazy_order.Deferred`
    made once the window's chunks are read and checked against their headers, fetched in slice order.
    Only a part of a window (a resume) of at most :data:`EAGER_WINDOW_ITEMS` recorded items is ordered
    now, to fetch just the chunks it still serves. ``None`` when the part is empty.
    """
    total = sum(len(s) for s in window)
    end = total if end is None else min(end, total)
    if end <= begin:
        return None

    def pairs() -> list[tuple[int, int]]:
        return window_items(window, seed=seed, epoch=epoch, global_worker=global_worker, window_index=window_index)

    def ids(chunks: tuple[int, ...]) -> tuple[tuple[int, ...], dict[int, int]]:
        bases = tuple(itertools.accumulate((sizes[c] for c in chunks[:-1]), initial=0))
        return bases, dict(zip(chunks, bases, strict=True))

    if (begin, end) != (0, total) and total <= EAGER_WINDOW_ITEMS:
        part = pairs()[begin:end]  # chunks whose items were all served are not fetched again
        chunks = tuple(dict.fromkeys(chunk for chunk, _ in part))
        bases, base_of = ids(chunks)
        return ChunkWindow(chunks, bases), [base_of[chunk] + item for chunk, item in part]
    chunks = tuple(dict.fromkeys(s.chunk_index for s in window))
    bases, base_of = ids(chunks)
    order = Deferred(total, lambda: [base_of[chunk] + item for chunk, item in pairs()])
    return ChunkWindow(chunks, bases), order[begin:end]


def piece_chunks(piece: ChunkSlice | ChunkWindow) -> tuple[int, ...]:
    """The chunks a piece needs, in fetch order."""
    return piece.chunks if isinstance(piece, ChunkWindow) else (piece.chunk_index,)
