"""Memory limits and the read budget: how much a reader may buffer, and how deep it then prefetches.

The limit and the budget it gives (:func:`memory_limit`: the explicit ``max_memory=`` /
``LITSTREAM_MAX_MEMORY``, else half of the cgroup's limit, else half of what ``RLIMIT_DATA``/``RLIMIT_AS``
leave) come from ``read/engine/_limits.py``.

The budget pays for every buffer a reader holds, each counted by its real size (:func:`plan_read`): the chunks
alive in the prefetch pipeline (the one being decoded, the one handed over, those fetched ahead, and the
compressed copy of a chunk being decompressed, all from ``chunk_bytes`` of ``index.json``), the download
pieces in flight of a remote dataset, and the decoded batches a DataLoader worker keeps (its decode buffers,
the shared-memory slots or batches torch holds in its queue: ``prefetch_factor`` per worker). Prefetch depth,
the hand-over buffer, download bytes in flight and ``prefetch_factor`` are lowered until the total fits; when
even one chunk at a time does not, :class:`~litstream.ConfigurationError` names the limit and the fixes
instead of the process being killed by the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._core._errors import ConfigurationError
from ..plan._pieces import piece_chunks
from ._limits import LIMIT_FRACTION, MaxMemory, MemoryLimit, check_max_memory, memory_limit

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..plan._pieces import Piece
    from ..source._source import DatasetSource

__all__ = [
    "REMOTE_MIN_PRE_DOWNLOAD",
    "reader_depth",
    "LIMIT_FRACTION",
    "MaxMemory",
    "MemoryLimit",
    "ReadBudget",
    "adapt_reader",
    "budget_for",
    "check_max_memory",
    "fit_decoded_cache",
    "memory_limit",
    "plan_read",
]

_SLOT_HEADROOM = 1.25  # litstream._torch._slots sizes a slot at the batch's bytes times this


@dataclass(frozen=True)
class ReadBudget:
    """How one reader buffers under a budget (see :func:`plan_read`).

    Attributes:
        ahead: Chunks fetched ahead (``max_pre_download``), >= 1.
        handover: Chunks waiting between the producer and the decoder (the stream's buffer): 0 or 1.
        download_bytes: Download bytes in flight (the ``Downloader``'s ``max_bytes_in_flight``), or ``None``
            when nothing is downloaded.
        prefetch_factor: Batches a DataLoader worker builds ahead (torch's ``prefetch_factor``).
        bytes: What these buffers hold at most, in bytes.
        share: The bytes this reader was given.
    """

    ahead: int
    handover: int
    download_bytes: int | None
    prefetch_factor: int
    bytes: int
    share: int


def _reader_bytes(ahead: int, handover: int, chunk: int, transient: int, download: int, window: int,
                  batch: int, prefetch: int) -> int:  # fmt: skip
    # chunks: the decoder's one, the hand-over buffer, the producer's in hand, ahead - 1 fetched ahead (a
    # window piece: two windows at a boundary), the compressed copy of one being decompressed
    chunks = (1 + handover + max(ahead, 2 * window)) * chunk + transient
    # batches (a DataLoader worker): ``prefetch`` in torch's queue (slots or shared memory, with the slots'
    # headroom) plus the one being built and the decode buffer it reuses
    batches = int((prefetch + 1) * batch * _SLOT_HEADROOM) + 2 * batch if prefetch else 0
    return chunks + download + batches


def plan_read(
    limit: MemoryLimit,
    *,
    readers: int,
    chunk_bytes: int,
    compressed: bool,
    piece_size: int | None,
    max_pre_download: int,
    window: int = 0,
    batch_bytes: int = 0,
    prefetch_factor: int = 0,
    fixed_prefetch: bool = True,
) -> ReadBudget:
    """The deepest prefetch whose buffers fit this reader's share of ``limit``.

    Tried in order: ``max_pre_download`` down to 1 with a hand-over buffer of one chunk, then without it; for
    each ``prefetch_factor`` from the one asked for down to 1 unless ``fixed_prefetch``.

    Args:
        limit: The limit (:func:`memory_limit`).
        readers: Processes sharing ``limit.budget`` (a loader's workers); ignored for a per-process limit.
        chunk_bytes: The largest chunk, decompressed (``chunk_bytes`` of ``index.json``).
        compressed: Whether chunks are decompressed (or decrypted) in memory (a compressed copy lives meanwhile).
        piece_size: Bytes per ranged GET when chunks are downloaded; ``None`` for local data.
        max_pre_download: The depth asked for (the most it may be).
        window: Chunks per window with ``shuffle="window"``, else 0.
        batch_bytes: Bytes of one decoded batch (a DataLoader worker), 0 when no batches are built.
        prefetch_factor: Batches a worker builds ahead, as asked (0: not a DataLoader worker).
        fixed_prefetch: ``prefetch_factor`` is given (a worker cannot change torch's); else it may be lowered
            (the loader, before it starts its workers).

    Raises:
        ConfigurationError: even one chunk at a time (and one batch ahead) does not fit, naming the limit and
            the fixes.
    """
    share = limit.budget // max(readers, 1) if limit.shared else limit.budget
    transient = chunk_bytes if compressed else 0
    download = 2 * piece_size if piece_size is not None else 0
    least = min(prefetch_factor, 1) if not fixed_prefetch else prefetch_factor
    prefetches = range(prefetch_factor, least - 1, -1) if prefetch_factor > 0 else (0,)
    candidates = [(a, 1, p) for p in prefetches for a in range(max(max_pre_download, 1), 0, -1)]
    candidates += [(1, 0, p) for p in prefetches]
    for ahead, handover, prefetch in candidates:
        need = _reader_bytes(ahead, handover, chunk_bytes, transient, download, window, batch_bytes, prefetch)
        if need <= share:
            return ReadBudget(ahead, handover, download or None, prefetch, need, share)
    need = _reader_bytes(1, 0, chunk_bytes, transient, download, window, batch_bytes, least)
    who = f"{readers} readers" if limit.shared and readers > 1 else "this reader"
    raise ConfigurationError(
        f"memory limit: one reader needs at least {need} bytes (chunks of up to {chunk_bytes} bytes"
        + (f", windows of {window} chunks" if window else "")
        + (f", batches of {batch_bytes} bytes" if batch_bytes else "")
        + f") but {who} may use only {share} bytes of the budget of {limit.budget} bytes set by {limit.source}. "
        "Fix: use fewer DataLoader workers, a smaller batch_size or shuffle_window, re-optimize with a smaller "
        "chunk_bytes, raise the memory limit, or set max_memory= (LITSTREAM_MAX_MEMORY) to the bytes the readers "
        "may use ('off': no budget)"
    )


def budget_for(
    source: DatasetSource,
    pieces: Sequence[Piece],
    limit: MemoryLimit,
    *,
    readers: int,
    max_pre_download: int,
    window: int = 0,
    batch_size: int = 0,
    prefetch_factor: int = 0,
    fixed_prefetch: bool = True,
) -> ReadBudget:
    """:func:`plan_read` for reading ``pieces`` of ``source``: sizes from its ``index.json``.

    Args:
        source: The open dataset.
        pieces: What the reader serves (only their chunks are counted).
        limit: The limit (:func:`memory_limit`).
        readers: Readers sharing ``limit`` (workers times the datasets each worker reads at once).
        max_pre_download: The depth asked for.
        window: Chunks per window with ``shuffle="window"``, else 0.
        batch_size: Samples per batch of a DataLoader worker, 0 when none is built.
        prefetch_factor: Batches a DataLoader worker builds ahead, 0 when none is built.
        fixed_prefetch: As :func:`plan_read`.

    Raises:
        ConfigurationError: as :func:`plan_read`.
    """
    chunks = source.index.chunks
    used = {c for piece, _ in pieces for c in piece_chunks(piece)} or set(range(len(chunks)))
    chunk_bytes = max((chunks[c].chunk_bytes for c in used), default=0)
    item_bytes = max((-(-chunks[c].chunk_bytes // max(chunks[c].chunk_size, 1)) for c in used), default=0)
    config = source.index.config
    compressed = bool(config is not None and config.compression) or source.encryption_level is not None
    downloader = source.fetcher or source.downloader
    return plan_read(
        limit,
        readers=readers,
        chunk_bytes=chunk_bytes,
        compressed=compressed,
        piece_size=None if downloader is None else downloader.piece_size,
        max_pre_download=max_pre_download,
        window=window,
        batch_bytes=batch_size * item_bytes if prefetch_factor else 0,
        prefetch_factor=prefetch_factor,
        fixed_prefetch=fixed_prefetch,
    )


def adapt_reader(
    source: DatasetSource,
    pieces: Sequence[Piece],
    setting: MaxMemory,
    *,
    readers: int,
    max_pre_download: int,
    window: int = 0,
    batch_size: int = 0,
    prefetch_factor: int = 0,
) -> tuple[int, int]:
    """``(max_pre_download, hand-over buffer)`` for a reader of ``pieces`` under the limit of ``setting``
    (:func:`memory_limit`): as asked (and a buffer of 1) without a limit; else :func:`budget_for`'s, with the
    download bytes in flight of ``source`` lowered to its plan.

    Raises:
        ConfigurationError: as :func:`plan_read`, or a malformed ``LITSTREAM_MAX_MEMORY``.
    """
    limit = memory_limit(setting)
    if limit is None:
        return max_pre_download, 1
    budget = budget_for(source, pieces, limit, readers=readers, max_pre_download=max_pre_download, window=window,
                        batch_size=batch_size, prefetch_factor=prefetch_factor)  # fmt: skip
    transfer = source.fetcher or source.downloader
    if transfer is not None and budget.download_bytes is not None:
        transfer.limit_bytes_in_flight(budget.download_bytes)
    return budget.ahead, budget.handover


def fit_decoded_cache(source: DatasetSource, setting: MaxMemory, readers: int) -> None:
    """Under the limit of ``setting``, keep at most half a reader's share of decompressed chunks for random
    access (``DatasetSource.max_decoded_bytes``, the newest chunk always); unchanged without a limit."""
    limit = memory_limit(setting)
    if limit is not None:
        share = limit.budget // max(readers, 1) if limit.shared else limit.budget
        source.max_decoded_bytes = min(source.max_decoded_bytes, share // 2)


REMOTE_MIN_PRE_DOWNLOAD = 4
"""Chunks a cached remote reader fetches ahead at least: LitData's async prefetch floor for remote data (its
``LITDATA_ASYNC_MIN_PRE_DOWNLOAD``), so that downloads overlap across chunk boundaries."""


def reader_depth(
    source: DatasetSource,
    pieces: Sequence[Piece],
    setting: MaxMemory,
    *,
    max_pre_download: int,
    cached: bool,
    readers: int,
    window: int,
    batch_size: int,
    loader_batches: int,
) -> tuple[int, int]:
    """``(max_pre_download, hand-over buffer)`` of one ``StreamingDataset`` reader: at least
    :data:`REMOTE_MIN_PRE_DOWNLOAD` ahead when ``cached`` (remote), then :func:`adapt_reader` under a memory limit
    (``loader_batches``: the batches a DataLoader worker holds, 0 outside one; ``readers`` share the budget)."""
    ahead = max(max_pre_download, REMOTE_MIN_PRE_DOWNLOAD) if cached else max_pre_download
    return adapt_reader(
        source, pieces, setting, readers=readers, max_pre_download=ahead, window=window, batch_size=batch_size,
        prefetch_factor=loader_batches,
    )  # fmt: skip
