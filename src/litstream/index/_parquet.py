"""``index_parquet_dataset``: index a directory of Parquet files so it streams like an optimized dataset."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError, DatasetNotFoundError
from ..format._index import INDEX_FILENAME, Index
from ..format.arrow._parquet import (
    PARQUET_FOOTER_TAIL,
    ParquetFileInfo,
    footer_length,
    parquet_config,
    parquet_file_info,
)
from ..storage._resolver import Dir, store_for

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..storage._base import ObjectMeta
    from ..storage._store import Store

__all__ = ["aindex_parquet_dataset", "index_parquet_dataset"]


async def _describe(store: Store, meta: ObjectMeta) -> ParquetFileInfo:
    """Read one file's footer with two range reads (tail, then footer) and describe it."""
    if meta.size < 2 * PARQUET_FOOTER_TAIL:
        raise DatasetNotFoundError(f"{store.url}/{meta.path} is {meta.size} bytes, too short to be a Parquet file")
    tail = await store.get_range(meta.path, meta.size - PARQUET_FOOTER_TAIL, PARQUET_FOOTER_TAIL)
    length = footer_length(tail, name=f"{store.url}/{meta.path}") + PARQUET_FOOTER_TAIL
    footer = await store.get_range(meta.path, meta.size - length, length)
    return await anyio.to_thread.run_sync(parquet_file_info, meta.path, meta.size, footer)


async def aindex_parquet_dataset(
    pq_dir_url: str | os.PathLike[str] | Dir,
    cache_dir: str | os.PathLike[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    num_workers: int = 4,
) -> Index:
    """Async form of :func:`index_parquet_dataset` (same arguments, same result)."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ConfigurationError(f"num_workers={num_workers!r}: expected an int >= 1 (concurrent footer reads)")
    store = store_for(pq_dir_url, storage_options, argument="pq_dir_url")
    # A Hub repository keeps its files in folders (data/train-*.parquet): LitData lists hf:// recursively
    # and names each chunk by its path under the URL; elsewhere only the top level is indexed, as LitData.
    recursive = store.url.startswith("hf://")
    files = sorted(
        (m for m in await store.list() if (recursive or "/" not in m.path) and m.path.endswith(".parquet")),
        key=lambda m: m.path,
    )
    if not files:
        where = "under it" if recursive else "at its top level"
        raise DatasetNotFoundError(f"{store.url} holds no *.parquet file {where}; nothing to index")
    infos: list[ParquetFileInfo | None] = [None] * len(files)
    failures: list[tuple[int, Exception]] = []
    limiter = anyio.CapacityLimiter(num_workers)

    async def describe(position: int, meta: ObjectMeta) -> None:
        async with limiter:
            try:
                infos[position] = await _describe(store, meta)
            except Exception as exc:  # reported below, the first file's failure first
                failures.append((position, exc))

    async with anyio.create_task_group() as tg:
        for position, meta in enumerate(files):
            tg.start_soon(describe, position, meta)
    if failures:
        raise min(failures, key=lambda f: f[0])[1]
    described = [info for info in infos if info is not None]
    index = Index(chunks=tuple(i.chunk_info() for i in described), config=parquet_config(described)).stamped()
    text = index.to_json()
    if cache_dir is not None:
        target = Path(cache_dir) / INDEX_FILENAME
        await anyio.to_thread.run_sync(_write_atomically, target, text)
    else:
        await store.put(INDEX_FILENAME, text.encode())
    return index


def _write_atomically(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temp.write_text(text)
    temp.replace(target)


def index_parquet_dataset(
    pq_dir_url: str | os.PathLike[str] | Dir,
    cache_dir: str | os.PathLike[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    num_workers: int = 4,
) -> Index:
    """Write an ``index.json`` describing every top-level ``*.parquet`` file of a directory.

    Each file becomes one chunk (``chunk_size`` = rows, ``chunk_bytes`` = file size); the config
    records the Arrow type of every column and ``item_loader="ParquetLoader"`` (matches LitData's
    ``index_parquet_dataset``, so either library reads the result). Only footers are read: two range
    reads per file, at most ``num_workers`` files at a time. Files are indexed in name order (LitData
    uses the directory listing's order, which depends on the filesystem).

    Read the dataset with ``StreamingDataset(pq_dir_url, item_loader=ParquetLoader(),
    index_path=<the written index>)`` (``index_path`` only when the index is not in the directory).

    Args:
        pq_dir_url: A local directory or a URL (``s3://``, ``gs://``, ``azure://``, ...).
        cache_dir: Write ``index.json`` into this local directory instead of into ``pq_dir_url``
            (which is then not modified). Default ``None``: next to the Parquet files (uploaded for URLs).
        storage_options: Provider options and credentials for URLs (as for ``StreamingDataset``).
        num_workers: Footers read concurrently. Default 4.

    Returns:
        The index written.

    Raises:
        DatasetNotFoundError: the directory holds no ``*.parquet`` file.
        FormatError: a file is not Parquet, or files have different column types.
        ConfigurationError: a bad argument.
        ModuleNotFoundError: pyarrow is not installed.
    """
    return run_sync(aindex_parquet_dataset, pq_dir_url, cache_dir, storage_options, num_workers)
