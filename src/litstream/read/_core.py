"""The async read engine: ordered, bounded chunk prefetch feeding a bounded stream.

``plan_pieces`` turns the read plan into ``(chunk slice, item order)`` pairs for one
(rank, worker, epoch), minus what a resumed run already served. ``produce_chunks`` fetches those
chunks with at most ``max_pre_download`` in flight, keeps them in plan order, and sends one
:class:`ChunkWork` per slice into a bounded memory stream — a slow consumer therefore slows the
fetches instead of filling memory. Consumers decode the items of a ``ChunkWork`` themselves (the
sync facade on its own thread, ``astream`` in a worker thread), so one message crosses the loop
boundary per chunk, never per sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ._plan import ChunkSlice, item_order, resume_position, worker_plan

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from anyio.streams.memory import MemoryObjectSendStream

    from ..format._chunk import ChunkView
    from ._source import DatasetSource

__all__ = ["ChunkWork", "ReadPlanArgs", "decode_work", "plan_pieces", "produce_chunks"]

_DECODE_BATCH = 256


@dataclass(frozen=True)
class ReadPlanArgs:
    """Inputs of the read plan for one (rank, worker) and epoch; see ``read._plan``."""

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    batch_size: int = 1
    drop_last: bool = False
    shuffle: bool = False
    seed: int = 42
    epoch: int = 1
    skip: int = 0  # items of this worker's plan already served (resume)


@dataclass(frozen=True)
class ChunkWork:
    """One chunk and the chunk-local item indices to serve from it, in order."""

    chunk_index: int
    view: ChunkView
    items: Sequence[int]


def plan_pieces(source: DatasetSource, args: ReadPlanArgs) -> list[tuple[ChunkSlice, list[int]]]:
    """The slices this worker reads and the item order inside each, after skipping ``args.skip``."""
    regions = [(0, size) for size in source.chunk_sizes]
    plan = worker_plan(
        regions,
        rank=args.rank,
        world_size=args.world_size,
        worker=args.worker,
        num_workers=args.num_workers,
        batch_size=args.batch_size,
        drop_last=args.drop_last,
        shuffle=args.shuffle,
        seed=args.seed,
        epoch=args.epoch,
    )
    start, drop = resume_position(plan, args.skip) if args.skip else (0, 0)
    pieces = []
    for position in range(start, len(plan)):
        piece = plan[position]
        order = item_order(piece, num_chunks=len(regions), shuffle=args.shuffle, seed=args.seed, epoch=args.epoch)
        if position == start and drop:
            order = order[drop:]
        if order:
            pieces.append((piece, order))
    return pieces


@dataclass
class _Slot:
    done: anyio.Event = field(default_factory=anyio.Event)
    view: ChunkView | None = None


async def produce_chunks(
    source: DatasetSource,
    pieces: Sequence[tuple[ChunkSlice, list[int]]],
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
        slots_send, slots_receive = anyio.create_memory_object_stream[tuple[_Slot, ChunkSlice, list[int]]](ahead - 1)

        async def fetch(slot: _Slot, chunk_index: int) -> None:
            slot.view = await source.read_chunk(chunk_index)
            slot.done.set()

        async def schedule() -> None:
            async with slots_send:
                for piece, order in pieces:
                    slot = _Slot()
                    await slots_send.send((slot, piece, order))
                    tg.start_soon(fetch, slot, piece.chunk_index)

        tg.start_soon(schedule)
        async with slots_receive:
            async for slot, piece, order in slots_receive:
                await slot.done.wait()
                assert slot.view is not None
                await send.send(ChunkWork(piece.chunk_index, slot.view, order))


def decode_work(
    source: DatasetSource, work: ChunkWork, items: Sequence[int], transform: Callable[[Any], Any] | None
) -> list[Any]:
    """Decode ``items`` of ``work`` (synchronous; run it off the event loop)."""
    decode = source.decoder.decode
    view = work.view
    if transform is None:
        return [decode(view.item(i)) for i in items]
    return [transform(decode(view.item(i))) for i in items]


async def decode_work_async(
    source: DatasetSource, work: ChunkWork, transform: Callable[[Any], Any] | None
) -> list[Any]:
    """Decode every item of ``work`` in worker threads, ``_DECODE_BATCH`` items per thread call."""
    out: list[Any] = []
    for begin in range(0, len(work.items), _DECODE_BATCH):
        batch = work.items[begin : begin + _DECODE_BATCH]
        out.extend(await anyio.to_thread.run_sync(decode_work, source, work, batch, transform))
    return out
