"""Decoding the items of a :class:`~litstream.read.engine._engine.ChunkWork`, batch by batch.

The producer (``read.engine._engine.produce_chunks``) hands over chunks; this module turns their items into
samples: column-wise for PyTree and Arrow chunks, a block at a time for tokens, in batches sized by
item bytes so that the first sample of a chunk comes quickly and a retained sample keeps little
alive. The sync facades call :func:`iter_work` / :func:`work_batches` on their own thread; ``astream``
runs :func:`decode_work_async` in worker threads.
"""

from __future__ import annotations

import bisect
import itertools
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import numpy as np

from ..._core._trace import CAT_READ, TRACER
from ...format._loaders import SampleDecoder
from ...format._tokens import TokenBlocks, TokenLayout
from ...format.arrow._chunk import ArrowChunk
from ._pages import populate, release

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from ...format._batch_decode import ColumnBatch
    from ...format._chunk import ChunkView
    from ..source._source import DatasetSource
    from ._engine import ChunkWork

__all__ = ["decode_work", "decode_work_async", "iter_work", "work_batches", "work_parts"]

_DECODE_BATCH = 256
"""Items decoded per worker-thread call by :func:`decode_work_async`."""

_FIRST_BATCH = 8
"""Items decoded before the first sample of a chunk is served (time to first sample stays short)."""
_BATCH_BYTES = 8 * 2**20
"""Item bytes decoded at once; also bounds what a retained sample keeps alive (its row's array).
Blocks of 4 MiB or more are backed by transparent huge pages where the kernel offers them on request
(NumPy asks for them from 4 MiB), which halves the cost of the page faults of every new block."""
_BATCH_ITEMS = 1024
"""Items decoded at once at most (small items)."""


def _batch_size(view: ChunkView) -> int:
    average = max(len(view.data) // max(view.num_items, 1), 1)
    return max(1, min(_BATCH_ITEMS, _BATCH_BYTES // average))


def _decode_view_items(
    source: DatasetSource, view: ChunkView, items: Sequence[int], transform: Callable[[Any], Any] | None
) -> list[Any]:
    samples = _decode_batch(source, view, items)
    return samples if transform is None else [transform(sample) for sample in samples]


def _decode_batch(
    source: DatasetSource,
    view: ChunkView,
    items: Sequence[int],
    alloc: Callable[[int], np.ndarray[Any, Any]] | None = None,
) -> list[Any]:
    """Decode ``items`` of ``view``: column-wise for PyTree and Arrow chunks, one by one for token
    blocks and Parquet rows (their views have no per-item offsets table to batch over)."""
    if isinstance(view, ArrowChunk):
        return view.rows(items)
    decoder = source.decoder
    if isinstance(decoder, SampleDecoder):
        begins, ends = view.spans(items)
        return decoder.decode_many(view.data, begins, ends, alloc)
    if isinstance(decoder, TokenLayout) and isinstance(view, TokenBlocks):
        return decoder.decode_blocks(view, items)
    item, decode = view.item, decoder.decode
    return [decode(item(i)) for i in items]


def decode_work(
    source: DatasetSource, work: ChunkWork, items: Sequence[int], transform: Callable[[Any], Any] | None
) -> list[Any]:
    """Decode ``items`` (ids as in ``work.items``) of ``work`` (synchronous; run it off the event loop)."""
    decode = source.decoder.decode
    if work.ready is not None:  # a chunk still downloading: wait for all of it (random items)
        work.ready(len(work.view.data))
    if work.more:
        views = [work.view, *(view for _, view in work.more)]
        ends = list(itertools.accumulate(view.num_items for view in views))
        starts = [0, *ends[:-1]]
        samples: list[Any] = [None] * len(items)
        arrow: dict[int, tuple[ArrowChunk, list[int]]] = {}  # rows of an Arrow chunk are decoded together
        for k, i in enumerate(items):
            j = bisect.bisect_right(ends, i)
            view = views[j]
            if isinstance(view, ArrowChunk):
                arrow.setdefault(j, (view, []))[1].append(k)
            else:
                samples[k] = decode(view.item(i - starts[j]))
        for j, (arrow_view, positions) in arrow.items():
            rows = arrow_view.rows([items[k] - starts[j] for k in positions])
            for k, row in zip(positions, rows, strict=True):
                samples[k] = row
        return samples if transform is None else [transform(sample) for sample in samples]
    view = work.view
    step = _batch_size(view)
    out: list[Any] = []
    for begin in range(0, len(items), step):
        out.extend(_decode_view_items(source, view, items[begin : begin + step], transform))
    return out


def work_batches(
    source: DatasetSource,
    work: ChunkWork,
    transform: Callable[[Any], Any] | None,
    served: int = 0,
    align: int = 1,
    alloc: Callable[[int], np.ndarray[Any, Any]] | None = None,
) -> Iterator[list[Any]]:
    """:func:`work_parts` without columns: lists of samples."""
    return work_parts(source, work, transform, served, align, alloc)  # type: ignore[return-value]


def work_parts(
    source: DatasetSource,
    work: ChunkWork,
    transform: Callable[[Any], Any] | None,
    served: int = 0,
    align: int = 1,
    alloc: Callable[[int], np.ndarray[Any, Any]] | None = None,
    columns: bool = False,
) -> Iterator[list[Any] | ColumnBatch]:
    """Decode the items of ``work`` batch by batch, each batch when it is asked for.

    The first batch holds ``_FIRST_BATCH`` items (the first sample of a chunk is served without
    decoding the whole chunk), the next ones up to ``_DECODE_BATCH`` items or ``_BATCH_BYTES``. With
    ``align > 1`` (a DataLoader's batch size) batches end where the loader's batches end (``served``
    items were yielded before this work), so a loader batch's fixed-shape arrays are the rows of one
    decoded array and collate without a copy (``_collate.fast_collate``). Pages of a mapped chunk
    are mapped just before their batch is decoded and unmapped once served (ascending order). A chunk
    that is still downloading (``work.ready``) is decoded batch by batch as its bytes arrive (items in
    ascending order), or once all of it is there. ``columns`` (no ``transform``): a batch of flat
    ``dict`` samples may come as a :class:`ColumnBatch` instead of a list (``StreamingDataLoader``).
    """
    columns = columns and transform is None
    if work.more:
        t0 = perf_counter_ns() if TRACER.on else 0
        window = decode_work(source, work, work.items, transform)
        if t0:
            TRACER.span("decode", CAT_READ, t0, {"chunk": work.chunk_index, "items": len(work.items)})
        yield window
        return
    view, items = work.view, work.items
    step = _batch_size(view)
    if 1 < align <= 4 * step:
        # whole loader batches per decoded block: one in a worker (its block is the shared-memory batch),
        # else as many as fit the block size (the collate takes a batch as a slice of the block)
        step = align if alloc is not None else align * max(1, step // align)
        begin, size = 0, align - served % align
    else:
        begin, size = 0, min(_FIRST_BATCH, step)
    decoder = source.decoder
    columnar = isinstance(decoder, SampleDecoder) and not isinstance(view, ArrowChunk)
    ascending = columnar and (isinstance(items, range) or bool((np.diff(np.asarray(items)) > 0).all()))
    ready = work.ready  # a chunk still downloading: decode each batch once its bytes are written
    if not ascending:
        if ready is not None:
            ready(len(view.data))
        populate(view.data)
    while begin < len(items):
        batch = items[begin : begin + size]
        t0 = perf_counter_ns() if TRACER.on else 0
        if ascending and isinstance(decoder, SampleDecoder):  # map just this batch's pages, unmap those served
            begins, ends = view.spans(batch)
            if ready is not None:
                ready(int(ends[-1]))
            populate(view.data, int(begins[0]), int(ends[-1]))
            release(view.data, int(begins[0]))
            part = decoder.decode_columns(view.data, begins, ends, alloc) if columns else None
            samples = part if part is not None else decoder.decode_many(view.data, begins, ends, alloc)
        elif columns and isinstance(decoder, SampleDecoder) and not isinstance(view, ArrowChunk):  # shuffled items
            part = decoder.decode_columns(view.data, *view.spans(batch), alloc)
            samples = part if part is not None else _decode_batch(source, view, batch, alloc)
        else:
            samples = _decode_batch(source, view, batch, alloc)
        if t0:
            TRACER.span("decode", CAT_READ, t0, {"chunk": work.chunk_index, "items": len(batch)})
        yield samples if transform is None else [transform(sample) for sample in samples]  # type: ignore[union-attr]
        begin, size = begin + size, step


def iter_work(
    source: DatasetSource,
    work: ChunkWork,
    transform: Callable[[Any], Any] | None,
    served: int = 0,
    align: int = 1,
    alloc: Callable[[int], np.ndarray[Any, Any]] | None = None,
) -> Iterator[Any]:
    """The samples of :func:`work_batches`, one at a time (the sync facade's path)."""
    for batch in work_batches(source, work, transform, served, align, alloc):
        yield from batch


async def decode_work_async(
    source: DatasetSource, work: ChunkWork, transform: Callable[[Any], Any] | None
) -> list[Any]:
    """Decode every item of ``work`` in worker threads, ``_DECODE_BATCH`` items per thread call."""
    out: list[Any] = []
    for begin in range(0, len(work.items), _DECODE_BATCH):
        batch = work.items[begin : begin + _DECODE_BATCH]
        t0 = perf_counter_ns() if TRACER.on else 0
        out.extend(await anyio.to_thread.run_sync(decode_work, source, work, batch, transform))
        if t0:
            TRACER.async_span("decode", CAT_READ, t0, {"chunk": work.chunk_index, "items": len(batch)})
    return out
