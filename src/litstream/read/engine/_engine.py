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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from ..cache._source_cache import open_streaming, streamable
from ..plan._lazy_order import resolve_order
from ..plan._pieces import ChunkWindow, Piece, piece_chunks
from ..plan._plan import ChunkSlice

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from anyio.streams.memory import MemoryObjectSendStream

    from ...format._chunk import ChunkView
    from ..source._source import DatasetSource


__all__ = ["ChunkWork", "produce_chunks", "split_head", "works_for"]


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


def split_head(source: DatasetSource, pieces: Sequence[Piece], limit: int) -> tuple[ChunkWork | None, list[Piece]]:
    """Take up to ``limit`` samples of the first piece when its chunk can be mapped right now.

    The head-chunk fast path: a local, uncompressed chunk is mapped in the calling thread (no event
    loop needed), so a reader serves its first samples before its engine starts. Same samples, same
    order: ``head`` followed by ``rest`` is ``pieces``.

    Returns:
        ``(head, rest)``; ``head`` is ``None`` (and ``rest`` is ``pieces``) when the first chunk
        cannot be mapped now.
    """
    if not pieces or not isinstance(pieces[0][0], ChunkSlice):
        return None, list(pieces)
    piece, order = pieces[0]
    view = source.map_local_chunk(piece.chunk_index)
    if view is None:
        return None, list(pieces)
    head = min(limit, len(order))
    rest = [(piece, order[head:]), *pieces[1:]] if head < len(order) else list(pieces[1:])
    return ChunkWork(piece.chunk_index, view, order[:head]), rest
