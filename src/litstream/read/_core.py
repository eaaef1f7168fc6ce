"""The async read engine: ordered, bounded chunk prefetch feeding a bounded stream.

``plan_pieces`` turns the read plan into pieces for one (rank, worker, epoch), minus what a resumed
run already served: ``(ChunkSlice, item order)`` pairs, or with ``shuffle="window"``
``(ChunkWindow, item order)`` pairs that span several chunks. ``produce_chunks`` fetches the
chunks of those pieces with at most ``max_pre_download`` chunks ahead of the consumer, keeps them in
plan order, and sends :class:`ChunkWork` messages into a bounded memory stream — a slow consumer
therefore slows the fetches instead of filling memory. Consumers decode the items of a
``ChunkWork`` themselves (the sync facade on its own thread, ``astream`` in a worker thread), so one
message crosses the loop boundary per chunk's worth of items, never per sample.

Memory: a slice piece needs one chunk, a window piece (``shuffle="window"``) all of its up to
``shuffle_window`` chunks, because its first items may come from any of them. A window is sent as
several ``ChunkWork`` messages of about one chunk's worth of items each, all sharing the window's
views, so the stream's buffer holds no extra chunk. While a window's messages are being handed
over, the producer holds that window plus at most ``max_pre_download - 1`` chunks fetched ahead;
once the last one is handed over it assembles the next window (the consumer may still be serving
the previous one), so at a window boundary at most two windows plus that prefetch are alive —
never more, whatever the dataset's size.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

import anyio
import anyio.to_thread

from .._errors import PlanError
from ._assign import DEFAULT_ITEM_SHUFFLE_WINDOW
from ._lazy_order import Deferred, LazyOrder, resolve_order
from ._plan import ChunkSlice, resume_position, worker_plan
from ._source_cache import open_streaming, streamable
from ._window import DEFAULT_SHUFFLE_WINDOW, window_items, window_position, windows

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.streams.memory import MemoryObjectSendStream

    from ..format._chunk import ChunkView
    from ._source import DatasetSource
    from ._subset import Selection


__all__ = [
    "ChunkWindow",
    "ChunkWork",
    "EAGER_WINDOW_ITEMS",
    "Piece",
    "ReadPlanArgs",
    "ShuffleMode",
    "piece_chunks",
    "plan_pieces",
    "produce_chunks",
    "window_piece",
    "works_for",
]

ShuffleMode: TypeAlias = bool | Literal["full", "window"]
"""``False``: NoShuffle. ``True`` or ``"full"``: FullShuffle. ``"window"``: FullShuffle's plan served
window by window across chunks (``read._window``)."""


@dataclass(frozen=True)
class ReadPlanArgs:
    """Inputs of the read plan for one (rank, worker) and epoch; see ``read._plan`` and ``read._window``.

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


@dataclass(frozen=True)
class ChunkWork:
    """Items to serve, in order, and the chunk view(s) they come from.

    Attributes:
        chunk_index: The chunk of ``view``.
        view: Its decompressed bytes.
        items: Without ``more``: chunk-local ids in ``view``. With ``more``: ids counting through
            ``view`` and then each view of ``more`` (``view``'s items first, then the first extra
            view's, ...), as in :class:`ChunkWindow`.
        more: ``(chunk_index, view)`` of the other chunks of a window piece; empty otherwise.
        ready: For a chunk still downloading: ``ready(end)`` blocks until bytes ``[0, end)`` of ``view`` are
            written (call it before decoding them); ``None`` when the whole chunk is there.
    """

    chunk_index: int
    view: ChunkView
    items: Sequence[int]
    more: tuple[tuple[int, ChunkView], ...] = ()
    ready: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        # a work exists only once its views do (checked against their headers): make a lazy order's ids now
        object.__setattr__(self, "items", resolve_order(self.items))


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
    and the pieces are mapped back to chunk files (``read._subset``).
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


def works_for(
    piece: ChunkSlice | ChunkWindow,
    views: Sequence[ChunkView],
    order: Sequence[int],
    ready: Callable[[int], None] | None = None,
) -> list[ChunkWork]:
    """The messages that serve ``order`` of ``piece``, given the views of :func:`piece_chunks`.

    A slice gives one work (``ready``: see :class:`ChunkWork`); a window gives about one work per chunk,
    all sharing the views (complete chunks only).
    """
    if isinstance(piece, ChunkSlice):
        return [ChunkWork(piece.chunk_index, views[0], order, ready=ready)]
    more = tuple(zip(piece.chunks[1:], views[1:], strict=True))
    order = resolve_order(order)  # the views exist (checked against their headers): make a window's ids now
    step = -(-len(order) // len(piece.chunks))
    return [ChunkWork(piece.chunks[0], views[0], order[i : i + step], more) for i in range(0, len(order), step)]


@dataclass
class _Slot:
    done: anyio.Event = field(default_factory=anyio.Event)
    view: ChunkView | None = None
    ready: Callable[[int], None] | None = None


async def produce_chunks(
    source: DatasetSource,
    pieces: Sequence[Piece],
    send: MemoryObjectSendStream[ChunkWork],
    *,
    max_pre_download: int = 2,
) -> None:
    """Fetch the chunks of ``pieces`` (at most ``max_pre_download`` ahead) and send them in order.

    Closes ``send`` when done, so the receiver sees end-of-stream. Errors propagate to the caller's
    task group; cancelling the caller stops every fetch.
    """
    ahead = max(1, max_pre_download)
    async with send, anyio.create_task_group() as tg:
        slots_send, slots_receive = anyio.create_memory_object_stream[_Slot](ahead - 1)

        async def fetch(slot: _Slot, chunk_index: int, ticket: int | None, after: anyio.Event | None,
                        queued: anyio.Event, whole: bool) -> None:  # fmt: skip
            try:
                if after is not None:  # the previous chunk's requests are queued first
                    await after.wait()
                if not whole and streamable(source, chunk_index):  # decoded while it downloads
                    slot.view, slot.ready = await open_streaming(source, chunk_index, tg, ticket, queued.set)
                else:
                    slot.view = await source.read_chunk(chunk_index, priority=ticket, queued=queued.set)
            finally:
                queued.set()
            slot.done.set()

        async def schedule() -> None:
            # Downloads in plan order: chunk k+1 is asked for once chunk k's requests are queued, and
            # tickets give k's requests precedence, so the chunk needed first arrives first, at full speed.
            previous: anyio.Event | None = None
            async with slots_send:
                for piece, _ in pieces:
                    for chunk_index in piece_chunks(piece):
                        slot, queued = _Slot(), anyio.Event()
                        await slots_send.send(slot)
                        ticket = source.download_ticket()
                        tg.start_soon(fetch, slot, chunk_index, ticket, previous if ticket is not None else None,
                                      queued, isinstance(piece, ChunkWindow))  # fmt: skip
                        previous = queued

        tg.start_soon(schedule)
        async with slots_receive:
            for piece, order in pieces:
                views = []
                ready = None
                for _ in piece_chunks(piece):
                    slot = await slots_receive.receive()
                    await slot.done.wait()
                    assert slot.view is not None
                    views.append(slot.view)
                    ready = slot.ready
                for work in works_for(piece, views, order, ready):
                    await send.send(work)
