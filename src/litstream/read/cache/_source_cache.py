"""An opened dataset's local chunk cache: its settings, opening it, and reading a chunk through it —
whole, or while it downloads (:func:`open_streaming`)."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import TYPE_CHECKING

import anyio.to_thread

from ..._core._environ import environ
from ..._core._errors import ChecksumError, ConfigurationError
from ..._core._trace import CAT_READ, TRACER
from ..._core._units import parse_bytes
from ...format._checksum import CHECKSUM_KEY, DEFAULT_CHECKSUM
from ...format._chunk import ChunkView, header_length
from ...format._loaders import SampleDecoder
from ...storage._cache_dirs import dataset_cache_dir, default_cache_root, parse_cache_size
from ...storage._files import map_file
from ...storage._hedged import HedgedStore
from ...storage._memory_fetch import MemoryFetcher
from ...storage._progress import Progress
from ...storage._transfer import Downloader
from ._cache import ChunkCache
from ._verify import check_chunk, drop_copy, file_id, has_checksum

if TYPE_CHECKING:
    from collections.abc import Callable

    from anyio.abc import TaskGroup

    from ...format._index import ChunkInfo, Index
    from ...storage._store import Store
    from ..source._source import DatasetSource

__all__ = [
    "CacheSettings",
    "_open_cache",
    "_read_through_cache",
    "download_tuning",
    "keeps_chunks",
    "open_streaming",
    "open_transfer",
    "read_into_memory",
    "streamable",
]


async def _read_through_cache(
    cache: ChunkCache,
    downloader: Downloader,
    name: str,
    size: int | None,
    priority: int | None = None,
    queued: Callable[[], object] | None = None,
    verify: ChunkInfo | None = None,
    url: str = "",
) -> bytes | mmap.mmap:
    """Chunk ``name`` mapped from the cache, downloaded first if missing.

    With ``verify`` (its ``index.json`` entry, recording a checksum) the file is checked once per process and
    file version: a copy that does not match is deleted and downloaded again once, and if the new copy does
    not match either, it is deleted too and :class:`~litstream.ChecksumError` names the chunk and ``url``.
    """
    await cache.aacquire(name, size=size)  # evicts released chunks to make room first
    try:
        for attempt in range(2):
            path = await downloader.fetch(name, size=size, priority=priority, queued=queued)
            data, mapped = await anyio.to_thread.run_sync(_map, path)
            if verify is None:
                return data
            fix = None if attempt == 0 else f"a fresh download from {url} differs too: {_SOURCE_FIX}"
            try:
                await anyio.to_thread.run_sync(check_chunk, data, verify, path, str(path), fix)
                return data
            except ChecksumError:
                await anyio.to_thread.run_sync(drop_copy, path, data, mapped)
                if attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        await _release(cache, name)


_SOURCE_FIX = "the dataset's own file is corrupt (the cached copies were deleted); re-create the dataset with optimize"


_STREAMED_FIX = (
    "it was decoded while it downloaded, so samples of it may have been read; the copy was deleted, read "
    "the dataset again (or fix the source, if the next download differs too)"
)


def _map(path: Path) -> tuple[bytes | mmap.mmap, tuple[int, int] | None]:
    mapped = file_id(path)
    return map_file(path), mapped


async def _release(cache: ChunkCache, name: str) -> None:
    """Give back a hold, also when cancelled (an unreleased hold keeps the chunk from eviction for good)."""
    with anyio.CancelScope(shield=True):
        await cache.arelease(name)


def keeps_chunks(settings: CacheSettings, index: Index) -> bool:
    """Whether a remote dataset's chunks go into the disk cache (``settings.cache_chunks``; ``None``: when the
    cache may hold them all: an LRU cache smaller than what it is given to read in order evicts every chunk
    before it is read again, so writing them would only cost)."""
    if settings.cache_chunks is not None:
        return settings.cache_chunks
    root = Path(settings.cache_dir) if settings.cache_dir else default_cache_root()
    room = parse_cache_size(0.75 if settings.max_cache_size is None else settings.max_cache_size, directory=root)
    return room is None or sum(info.chunk_bytes for info in index.chunks) <= room


def open_transfer(
    store: Store, index: Index, settings: CacheSettings
) -> tuple[ChunkCache | None, Downloader | None, MemoryFetcher | None]:
    """``(cache, downloader, None)`` of a remote dataset whose chunks are cached (:func:`keeps_chunks`), else
    ``(None, None, fetcher)``: its chunks are read into memory. Blocking (measures the disk, makes directories)."""
    if keeps_chunks(settings, index):
        return (*_open_cache(store, index, settings), None)
    plain = store.inner if isinstance(store, HedgedStore) else store  # as _open_cache: chunks are not hedged
    return None, None, MemoryFetcher(plain, **download_tuning(settings))


async def read_into_memory(
    fetcher: MemoryFetcher,
    info: ChunkInfo,
    size: int | None,
    priority: int | None,
    queued: Callable[[], object] | None,
    url: str,
) -> memoryview:
    """Chunk ``info`` fetched whole into memory; with a recorded checksum, verified and fetched once more if it
    does not match (a transfer that went wrong), then :class:`~litstream.ChecksumError` naming ``url``."""
    for attempt in range(2):
        data = await fetcher.fetch(info.filename, size=size, priority=priority, queued=queued)
        if not has_checksum(info):
            return data
        try:
            await anyio.to_thread.run_sync(check_chunk, data, info, None, url)
            return data
        except ChecksumError:
            if attempt:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _open_cache(store: Store, index: Index, settings: CacheSettings) -> tuple[ChunkCache, Downloader]:
    root = Path(settings.cache_dir) if settings.cache_dir else default_cache_root()
    directory = dataset_cache_dir(root, store.url, index.updated_at)
    directory.mkdir(parents=True, exist_ok=True)
    size = 0.75 if settings.max_cache_size is None else settings.max_cache_size
    # Hedging is for small random reads (ds[i]); duplicating 8 MB chunk pieces would only add load
    # (and an abandoned duplicate keeps downloading in its thread), so chunks bypass it.
    plain = store.inner if isinstance(store, HedgedStore) else store
    return ChunkCache(directory, max_cache_size=size), Downloader(plain, directory, **download_tuning(settings))


def download_tuning(settings: CacheSettings) -> dict[str, int]:
    """The ``Downloader``'s ``piece_size`` and ``max_concurrency``: the settings' own, else the environment's
    ``LITSTREAM_DOWNLOAD_PIECE_SIZE`` (bytes, or a size such as ``"16MB"``) and ``LITSTREAM_DOWNLOAD_CONCURRENCY``
    (ranged GETs in flight), else the ``Downloader``'s defaults (neither key).

    Raises:
        ConfigurationError: a variable that is not a positive int (or size), naming it.
    """
    env = environ()
    tuning = {}
    for key, given, variable, raw in (
        ("piece_size", settings.piece_size, "LITSTREAM_DOWNLOAD_PIECE_SIZE", env.litstream_download_piece_size),
        ("max_concurrency", settings.max_concurrency, "LITSTREAM_DOWNLOAD_CONCURRENCY",
         env.litstream_download_concurrency),
    ):  # fmt: skip
        if given:
            tuning[key] = given
        elif raw is not None:
            text = raw.strip()
            if text.isdigit() and int(text) > 0:
                tuning[key] = int(text)
            elif key == "piece_size":
                tuning[key] = parse_bytes(text, argument=variable)
            else:
                raise ConfigurationError(f"{variable}={raw!r}: set an int >= 1 (ranged GETs in flight), or unset it")
    return tuning


@dataclass(frozen=True)
class CacheSettings:
    """Where and how much of a remote dataset is kept on local disk.

    Attributes:
        cache_dir: Cache root; ``None`` uses ``default_cache_root()`` (``LITSTREAM_CACHE_DIR``, then
            ``LITDATA_CACHE_DIR``, then ``~/.cache/litstream/chunks``). The dataset lives in
            ``<root>/<md5(url)>/<updated_at>/``, as in LitData.
        max_cache_size: Bytes (int or ``"50GB"``), a fraction of free disk in (0, 1], or ``None`` for
            75 % of the free disk (LitData's default). Chunks held by a reader are never evicted.
        piece_size: Bytes per ranged GET of a chunk download (the ``Downloader``'s); ``None``:
            ``LITSTREAM_DOWNLOAD_PIECE_SIZE`` if set, else its default (8 MiB).
        max_concurrency: Ranged GETs in flight (the ``Downloader``'s); ``None``: ``LITSTREAM_DOWNLOAD_CONCURRENCY``
            if set, else its default (8).
        cache_chunks: ``True``: chunks are written to the cache; ``False``: read into memory as they arrive,
            nothing written; ``None``: cached when the cache may hold the whole dataset (:func:`keeps_chunks`).
    """

    cache_dir: str | None = None
    max_cache_size: int | float | str | None = None
    piece_size: int | None = None
    max_concurrency: int | None = None
    cache_chunks: bool | None = True


def streamable(source: DatasetSource, chunk_index: int) -> bool:
    """Whether chunk ``chunk_index`` can be decoded while it downloads: a remote, uncompressed, unencrypted
    chunk of PyTree samples, larger than one ranged GET, without a checksum or with the default one (then only
    while it is not cached yet)."""
    downloader, fetcher = source.downloader, source.fetcher
    transfer = fetcher if fetcher is not None else downloader if source.cache is not None else None
    if transfer is None or not isinstance(source.decoder, SampleDecoder):
        return False
    config = source.index.config
    if (config is not None and config.compression) or source.compression is not None:
        return False
    if source.encryption_level is not None or source.parquet is not None or source.tokens is not None:
        return False
    info = source.index.chunks[chunk_index]
    if info.chunk_bytes <= transfer.piece_size:
        return False
    if not has_checksum(info):
        return True
    # With the default (fast) checksum a chunk streams while it is not cached yet, and is checked as its download
    # ends (open_streaming); a cached copy, or one with a sha256/blake2b, is checked before any item is decoded.
    value = info.extra.get(CHECKSUM_KEY)
    fast = isinstance(value, str) and value.startswith(f"{DEFAULT_CHECKSUM}:")
    return fast and (downloader is None or not downloader.path(info.filename).exists())


async def open_streaming(
    source: DatasetSource, chunk_index: int, tg: TaskGroup, priority: int | None, queued: Callable[[], object]
) -> tuple[ChunkView, Callable[[int], None] | None]:
    """Start downloading a :func:`streamable` chunk in ``tg`` and return its view once its header is written,
    with ``ready(end)``: block until its bytes ``[0, end)`` are (the decoder calls it before each batch).

    A chunk whose items do not end where the chunk ends (an Arrow payload follows them) is returned
    whole, with ``ready`` ``None``. The chunk is held in the cache until its download ends and, by a hold of
    the reader's own, until it is mapped (the download may end first: the file is not evicted meanwhile).
    Without a disk cache (``source.fetcher``) the chunk arrives in memory instead, nothing written.

    Raises:
        FormatError: a header that contradicts ``index.json``.
        StorageError: (from ``ready``) the download failed before the bytes came; ``DownloadAbandoned``
            (``storage/_progress.py``) if it was cancelled.
    """
    info = source.index.chunks[chunk_index]
    t0 = perf_counter_ns() if TRACER.on else 0
    progress = Progress(info.chunk_bytes)
    if source.fetcher is not None:  # no disk cache: into memory, checked as its download ends
        fetcher, url = source.fetcher, f"{source.store.url}/{info.filename}"

        async def fetch() -> None:
            try:
                data = await fetcher.fetch(
                    info.filename, size=info.chunk_bytes, priority=priority, queued=queued, progress=progress
                )
                if has_checksum(info):
                    await anyio.to_thread.run_sync(check_chunk, data, info, None, url, _STREAMED_FIX)
            except BaseException as exc:
                progress.failed(exc)
                raise

        try:
            tg.start_soon(fetch)
            data = await progress.map_when(header_length(info.chunk_size))
        except BaseException as exc:
            progress.failed(exc)
            raise
        return await _streamed_view(source, chunk_index, data, progress, t0)
    cache, downloader = source.cache, source.downloader
    assert cache is not None
    assert downloader is not None
    progress = Progress(info.chunk_bytes, map_file=cache.map_file)  # mapped through the cache (a seam for tests)

    async def download() -> None:
        try:
            await cache.aacquire(info.filename, size=info.chunk_bytes)
            try:
                path = await downloader.fetch(
                    info.filename, size=info.chunk_bytes, priority=priority, queued=queued, progress=progress
                )
                if has_checksum(info):  # its items may be decoded already: a mismatch drops the copy and raises
                    data, mapped = await anyio.to_thread.run_sync(_map, path)
                    try:
                        await anyio.to_thread.run_sync(check_chunk, data, info, path, str(path), _STREAMED_FIX)
                    except ChecksumError:
                        await anyio.to_thread.run_sync(drop_copy, path, data, mapped)
                        raise
                    if isinstance(data, mmap.mmap):
                        data.close()
            finally:
                await _release(cache, info.filename)
        except BaseException as exc:
            progress.failed(exc)
            raise

    await cache.aacquire(info.filename)  # the reader's hold (no eviction: the download's hold makes room)
    try:
        tg.start_soon(download)
        data = await progress.map_when(header_length(info.chunk_size))
    except BaseException as exc:
        progress.failed(exc)  # wakes a thread still waiting (after a cancellation)
        raise
    finally:
        await _release(cache, info.filename)
    return await _streamed_view(source, chunk_index, data, progress, t0)


async def _streamed_view(
    source: DatasetSource, chunk_index: int, data: bytes | memoryview | mmap.mmap, progress: Progress, t0: int
) -> tuple[ChunkView, Callable[[int], None] | None]:
    info = source.index.chunks[chunk_index]
    view = ChunkView(data)
    if view.num_items == info.chunk_size and len(data) == info.chunk_bytes and int(view.offsets[-1]) == len(data):
        if t0:
            TRACER.async_span("read", CAT_READ, t0, {"chunk": chunk_index, "file": info.filename, "streamed": True})
        return source._checked_view(chunk_index, data, False), progress.wait
    await anyio.to_thread.run_sync(progress.wait, info.chunk_bytes)  # e.g. an Arrow payload: read it whole
    return source._checked_view(chunk_index, data, False), None
