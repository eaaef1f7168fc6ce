"""An opened dataset's local chunk cache: its settings, opening it, and reading a chunk through it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread

from ..storage._files import map_file
from ..storage._hedged import HedgedStore
from ..storage._transfer import Downloader
from ._cache import ChunkCache
from ._cache_dirs import dataset_cache_dir, default_cache_root

if TYPE_CHECKING:
    import mmap
    from collections.abc import Callable

    from ..format._index import Index
    from ..storage._store import Store

__all__ = ["CacheSettings", "_open_cache", "_read_through_cache"]


async def _read_through_cache(
    cache: ChunkCache,
    downloader: Downloader,
    name: str,
    size: int | None,
    priority: int | None = None,
    queued: Callable[[], object] | None = None,
) -> bytes | mmap.mmap:
    await cache.aacquire(name, size=size)  # evicts released chunks to make room first
    try:
        path = await downloader.fetch(name, size=size, priority=priority, queued=queued)
        return await anyio.to_thread.run_sync(map_file, path)
    finally:
        await cache.arelease(name)


def _open_cache(store: Store, index: Index, settings: CacheSettings) -> tuple[ChunkCache, Downloader]:
    root = Path(settings.cache_dir) if settings.cache_dir else default_cache_root()
    directory = dataset_cache_dir(root, store.url, index.updated_at)
    directory.mkdir(parents=True, exist_ok=True)
    size = 0.75 if settings.max_cache_size is None else settings.max_cache_size
    # Hedging is for small random reads (ds[i]); duplicating 8 MB chunk pieces would only add load
    # (and an abandoned duplicate keeps downloading in its thread), so chunks bypass it.
    plain = store.inner if isinstance(store, HedgedStore) else store
    return ChunkCache(directory, max_cache_size=size), Downloader(plain, directory)


@dataclass(frozen=True)
class CacheSettings:
    """Where and how much of a remote dataset is kept on local disk.

    Attributes:
        cache_dir: Cache root; ``None`` uses ``default_cache_root()`` (``LITSTREAM_CACHE_DIR``, then
            ``LITDATA_CACHE_DIR``, then ``~/.cache/litstream/chunks``). The dataset lives in
            ``<root>/<md5(url)>/<updated_at>/``, as in LitData.
        max_cache_size: Bytes (int or ``"50GB"``), a fraction of free disk in (0, 1], or ``None`` for
            75 % of the free disk (LitData's default). Chunks held by a reader are never evicted.
    """

    cache_dir: str | None = None
    max_cache_size: int | float | str | None = None
