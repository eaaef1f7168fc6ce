"""Hugging Face Hub Parquet datasets: ``index_hf_dataset`` and the ``StreamingDataset("hf://...")`` one-liner.

A Hub dataset of Parquet files is indexed once, from footers only (:func:`index_parquet_dataset`), and the
index is kept at ``<hf cache root>/hf-index/<md5(url)>/index.json`` (LitData's layout), so the next run
and every DataLoader worker reuse it. The hf cache root is ``cache_dir`` when given, else the folder
holding the chunk cache root (LitData keeps it beside the chunk cache, so clearing chunks keeps it).
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._errors import ConfigurationError, ObjectNotFoundError
from .._sync import run_sync
from ..format._index import INDEX_FILENAME
from ..format._parquet import ParquetLoader
from ..storage._cache_root import default_cache_root
from ..storage._resolver import store_for
from ._parquet_index import index_parquet_dataset

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from ..storage._base import Store

__all__ = ["ahf_dataset_index", "hf_dataset_index", "index_hf_dataset", "optimize_hf"]


def _hf_cache_root(cache_dir: str | os.PathLike[str] | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir).expanduser().absolute()
    return default_cache_root().parent


def index_hf_dataset(
    dataset_url: str,
    cache_dir: str | os.PathLike[str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Index the Parquet files of a Hub dataset and return the folder holding its ``index.json``.

    As LitData's ``index_hf_dataset``: ``<cache_dir>/index.json`` is used when it exists; else the index kept
    at ``<root>/hf-index/<md5(dataset_url)>/index.json``; else the top-level ``*.parquet`` files under
    ``dataset_url`` are indexed from their footers (two range reads per file) and the index is written there
    (temporary name, then rename). ``HF_TOKEN`` (or ``storage_options["token"]``) authenticates.

    Args:
        dataset_url: ``hf://datasets/<org>/<name>[@revision][/<folder>]``.
        cache_dir: The root of the kept index (default: beside the chunk cache root).
        storage_options: For ``hf://``: ``endpoint``, ``token``, ``revision``, ``headers``.

    Returns:
        The folder holding ``index.json`` (pass it as ``index_path``).

    Raises:
        ConfigurationError: ``dataset_url`` is not an ``hf://`` URL.
        DatasetNotFoundError: no Parquet file there.
        FormatError: a file is not Parquet, or the files' columns differ.
    """
    if not isinstance(dataset_url, str) or not dataset_url.startswith("hf://"):
        raise ConfigurationError(f"dataset_url={dataset_url!r}: use an hf://datasets/<org>/<name>[/<folder>] URL")
    if cache_dir is not None and (Path(cache_dir) / INDEX_FILENAME).is_file():
        return str(Path(cache_dir))
    digest = hashlib.md5(dataset_url.encode(), usedforsecurity=False).hexdigest()
    dest = _hf_cache_root(cache_dir) / "hf-index" / digest
    if not (dest / INDEX_FILENAME).is_file():
        index_parquet_dataset(dataset_url, dest, storage_options, num_workers=min(32, (os.cpu_count() or 4) * 4))
    return str(dest)


def hf_dataset_index(
    store: Store,
    url: str,
    cache_dir: str | os.PathLike[str] | None,
    storage_options: Mapping[str, Any] | None,
    item_loader: object,
) -> tuple[str | None, ParquetLoader | None]:
    """For ``StreamingDataset(url)``: ``(index_path, item_loader)`` when ``url`` is a Hub Parquet dataset.

    An ``hf://`` location that holds an ``index.json`` (an optimized dataset uploaded to the Hub) is read as
    such: ``(None, None)``. Otherwise it is a Parquet dataset, indexed by :func:`index_hf_dataset`, read
    with ``ParquetLoader``.

    Raises:
        ConfigurationError: ``item_loader`` is given and is not a ``ParquetLoader`` (LitData's ValueError).
    """
    if not url.startswith("hf://"):
        return None, None
    if not isinstance(item_loader, ParquetLoader) and _holds_index(store):
        return None, None
    loader = _parquet_loader(url, item_loader)
    return index_hf_dataset(url, cache_dir, storage_options), loader


async def ahf_dataset_index(
    store: Store,
    url: str,
    cache_dir: str | os.PathLike[str] | None,
    storage_options: Mapping[str, Any] | None,
    item_loader: object,
) -> tuple[str | None, ParquetLoader | None]:
    """:func:`hf_dataset_index` for async code (``astream``): the index check runs on the caller's loop, the
    indexing (blocking, its own threads) in a worker thread. Same results and errors."""
    if not url.startswith("hf://"):
        return None, None
    if not isinstance(item_loader, ParquetLoader):
        try:
            await store.head(INDEX_FILENAME)
        except ObjectNotFoundError:
            pass
        else:
            return None, None
    loader = _parquet_loader(url, item_loader)
    folder = await anyio.to_thread.run_sync(index_hf_dataset, url, cache_dir, storage_options)
    return folder, loader


def _holds_index(store: Store) -> bool:
    try:
        run_sync(store.head, INDEX_FILENAME)
    except ObjectNotFoundError:
        return False
    return True


def _parquet_loader(url: str, item_loader: object) -> ParquetLoader:
    if isinstance(item_loader, ParquetLoader):
        return item_loader
    if item_loader is not None:
        raise ConfigurationError(
            f"input_dir={url!r} is a Hub Parquet dataset: item_loader must be a ParquetLoader, got {item_loader!r}"
        )
    return ParquetLoader()


@dataclass(frozen=True)
class _HubRows:
    """``optimize``'s ``fn`` for :func:`optimize_hf`: one Parquet file name in, its rows (or ``fn(row)``) out."""

    url: str
    storage_options: Mapping[str, Any] | None
    columns: Sequence[str] | None
    fn: Callable[[dict[str, Any]], Any] | None

    def __call__(self, name: str) -> Iterator[Any]:
        import pyarrow.parquet as pq

        store = store_for(self.url, self.storage_options)
        blob = run_sync(store.get, name)
        table = pq.read_table(io.BytesIO(blob), columns=list(self.columns) if self.columns else None)
        for row in table.to_pylist():
            yield row if self.fn is None else self.fn(row)


def _hub_url(name: str, revision: str | None, config: str | None) -> str:
    if name.startswith("hf://"):
        return name.rstrip("/")
    if name.count("/") != 1 or not all(name.split("/")):
        raise ConfigurationError(f"name={name!r}: use a Hub id 'org/name' or an hf://datasets/... URL")
    url = f"hf://datasets/{name}" + (f"@{revision}" if revision else "")
    return f"{url}/{config}" if config else url


def optimize_hf(
    name: str,
    output_dir: str,
    revision: str | None = None,
    split: str | None = None,
    config: str | None = None,
    chunk_size: int | None = None,
    chunk_bytes: int | str | None = None,
    fn: Callable[[dict[str, Any]], Any] | None = None,
    num_workers: int | None = None,
    columns: list[str] | None = None,
    overwrite: bool = False,
    cache_dir: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **optimize_kwargs: Any,
) -> str:
    """Convert the Parquet files of a Hub dataset into an optimized dataset (LitData's ``optimize_hf`` names).

    The ``*.parquet`` files of ``hf://datasets/<name>[@revision][/<config>]`` (those whose name starts with
    ``split``, or that sit in a ``split`` folder, when ``split`` is given) are read whole, one per input,
    and each row (a ``dict``, or ``fn(row)``) becomes one sample, written by :func:`~litstream.optimize` in
    256 MB chunks unless ``chunk_size``/``chunk_bytes`` says otherwise. Unlike LitData, the Hub's
    ``refs/convert/parquet`` branch is not searched (pass ``revision="refs/convert/parquet"``), Parquet files
    are not kept on disk, and nested columns stay Python lists/dicts.

    Args:
        name: ``org/name`` or an ``hf://datasets/...`` URL.
        output_dir: Where the optimized dataset goes (local or a URL).
        revision: Git revision (branch, tag, commit). Default: the Hub's default branch.
        split: Keep only this split's files.
        config: A sub-folder of the repository (a dataset config).
        chunk_size: Samples per chunk.
        chunk_bytes: Bytes per chunk (default ``"256MB"`` when ``chunk_size`` is not given).
        fn: Maps a row to a sample (picklable). Default: the row.
        num_workers: ``optimize`` workers. Default: ``min(files, CPUs)``.
        columns: Read only these columns.
        overwrite: Convert again even when ``output_dir`` holds an ``index.json``.
        cache_dir: Accepted for LitData's signature; unused (nothing is kept).
        storage_options: For the Hub: ``endpoint``, ``token``, ``revision``, ``headers``; ``HF_TOKEN`` works.
        **optimize_kwargs: More :func:`~litstream.optimize` arguments (``compression``, ``mode``, ...).

    Returns:
        ``output_dir``.

    Raises:
        ConfigurationError: a bad ``name``.
        DatasetNotFoundError: no Parquet file matched.
    """
    from .._errors import DatasetNotFoundError
    from ._optimize import optimize

    del cache_dir
    if not overwrite:
        try:
            run_sync(store_for(output_dir).head, INDEX_FILENAME)
        except ObjectNotFoundError:
            pass
        else:
            return output_dir
    url = _hub_url(name, revision, config)
    listing = run_sync(store_for(url, storage_options).list)
    names = sorted(m.path for m in listing if m.path.endswith(".parquet"))
    if split is not None:
        names = [n for n in names if n.rsplit("/", 1)[-1].startswith(split) or f"/{split}/" in f"/{n}"]
    if not names:
        raise DatasetNotFoundError(f"{url} holds no *.parquet file{f' for split {split!r}' if split else ''}")
    if chunk_size is None and chunk_bytes is None:
        chunk_bytes = "256MB"
    workers = num_workers if num_workers is not None else min(len(names), os.cpu_count() or 1)
    optimize(
        fn=_HubRows(url, storage_options, columns, fn),
        inputs=names,
        output_dir=output_dir,
        chunk_size=chunk_size,
        chunk_bytes=chunk_bytes,
        num_workers=workers,
        **optimize_kwargs,
    )
    return output_dir
