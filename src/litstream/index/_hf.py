"""Hugging Face Hub Parquet datasets: ``index_hf_dataset`` and the ``StreamingDataset("hf://...")`` one-liner.

A Hub dataset of Parquet files is indexed once, from footers only (:func:`index_parquet_dataset`), and the
index is kept at ``<hf cache root>/hf-index/<md5(url)>/index.json`` (LitData's layout), so the next run
and every DataLoader worker reuse it. The hf cache root is ``cache_dir`` when given, else the folder
holding the chunk cache root (LitData keeps it beside the chunk cache, so clearing chunks keeps it).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError, ObjectNotFoundError
from ..format._index import INDEX_FILENAME
from ..format.arrow._parquet import ParquetLoader
from ..storage._cache_root import default_cache_root
from ._parquet import index_parquet_dataset

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..storage._base import Store

__all__ = ["ahf_dataset_index", "hf_dataset_index", "hub_url", "index_hf_dataset"]


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


# The signature repeats hf_dataset_index's: the async twin of the same call (their bodies share the helpers below).
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
    if not isinstance(item_loader, ParquetLoader) and await _aholds_index(store):
        return None, None
    loader = _parquet_loader(url, item_loader)
    folder = await anyio.to_thread.run_sync(index_hf_dataset, url, cache_dir, storage_options)
    return folder, loader


def _holds_index(store: Store) -> bool:
    """Whether ``store``'s root holds an ``index.json`` (an optimized dataset), from sync code."""
    return run_sync(_aholds_index, store)


async def _aholds_index(store: Store) -> bool:
    """Whether ``store``'s root holds an ``index.json`` (an optimized dataset): one HEAD request."""
    try:
        await store.head(INDEX_FILENAME)
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


def hub_url(name: str, revision: str | None, config: str | None) -> str:
    """The ``hf://datasets/...`` URL of a Hub id ``org/name`` (or ``name`` itself when it is a URL)."""
    if name.startswith("hf://"):
        return name.rstrip("/")
    if name.count("/") != 1 or not all(name.split("/")):
        raise ConfigurationError(f"name={name!r}: use a Hub id 'org/name' or an hf://datasets/... URL")
    url = f"hf://datasets/{name}" + (f"@{revision}" if revision else "")
    return f"{url}/{config}" if config else url
