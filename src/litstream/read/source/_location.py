"""Where a reader reads: LitData's ``input_dir`` (a path, URL, ``Dir`` or ``Store``) resolved into a store,
the disk-cache settings of a remote dataset, and an ``hf://`` Parquet dataset's index, for ``ReadSpec.build``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

from ..._core._errors import ConfigurationError
from ...storage._cache_dirs import default_cache_root, parse_cache_size
from ...storage._files import local_path
from ...storage._resolver import Dir, resolve_dir, store_for
from ...storage._store import HedgedStore, Store
from ..cache._source_cache import CacheSettings
from ._local_remote import check_local_dataset, local_remote_source

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._spec import Loader

__all__ = ["Location", "plan_cache_bytes", "resolve_location"]


class Location(NamedTuple):
    """A resolved ``input_dir`` (see :func:`resolve_location`)."""

    where: Dir
    store: Store  # a HedgedStore when ``cache`` is set
    cache: CacheSettings | None  # None: read in place (local) or into memory
    index_path: str | os.PathLike[str] | None
    item_loader: Loader | None
    hub: tuple[str, Mapping[str, Any] | None, Loader | None] | None  # an hf:// dataset indexed on first open


def resolve_location(
    input_dir: str | os.PathLike[str] | Dir | Store,
    *,
    storage_options: Mapping[str, Any] | None,
    cache_dir: str | os.PathLike[str] | None,
    max_cache_size: int | float | str | None,
    index_path: str | os.PathLike[str] | None,
    item_loader: Loader | None,
    eager: bool,
    cache_by_default: bool,
    cache_chunks: bool | None,
    hedge_delay: float | None,
) -> Location:
    """Resolve ``input_dir`` and the cache arguments (``ReadSpec.build`` documents each).

    A local "remote" directory is cached in ``Dir.path`` as LitData does; with ``eager`` a local dataset must
    exist now and an ``hf://`` Parquet dataset is indexed now (else on first open).

    Raises:
        ConfigurationError: a bad ``cache_chunks``, ``max_cache_size`` or location, naming it.
        DatasetNotFoundError: with ``eager``, a local ``input_dir`` that holds no dataset.
    """
    if cache_chunks is not None and not isinstance(cache_chunks, bool):
        raise ConfigurationError(
            f"cache_chunks={cache_chunks!r}: pass True (write remote chunks to the disk cache), False (read "
            "them into memory, write nothing) or None (cache when the cache can hold the whole dataset)"
        )
    if max_cache_size is not None:
        parse_cache_size(max_cache_size, directory=os.fspath(cache_dir or default_cache_root()))
    local_source = None
    hub = None
    if isinstance(input_dir, Store) and not isinstance(input_dir, (str, os.PathLike, Dir)):
        store: Store = input_dir
        where = Dir(path=None, url=input_dir.url)
    else:
        where = resolve_dir(input_dir)
        local_source = local_remote_source(where)
        if local_source is not None and cache_dir is None:
            cache_dir = where.path  # LitData caches a local "remote" in Dir.path
        store = store_for(local_source) if local_source else store_for(where, storage_options)
        url = where.url
        if index_path is None and local_source is None and url is not None and url.startswith("hf://"):
            if eager:  # hf:// Parquet: index once, kept
                from ...index._hf import hf_dataset_index

                hf_index, hf_loader = hf_dataset_index(store, url, cache_dir, storage_options, item_loader)
                index_path, item_loader = hf_index, hf_loader or item_loader
            else:
                hub = (url.rstrip("/"), storage_options, item_loader)
    remote = where.path is None and where.url is not None and "://" in where.url
    remote = remote or local_source is not None
    wanted = cache_by_default or cache_dir is not None or max_cache_size is not None or bool(cache_chunks)
    if eager and index_path is None and (root := local_path(store, "")) is not None:
        check_local_dataset(str(root))
    cache = (  # not wanted: no disk cache, the chunks are read into memory as they arrive
        CacheSettings(  # the root resolved here, so that spawned and forkserver workers use the parent's
            os.fspath(default_cache_root() if cache_dir is None else cache_dir),
            max_cache_size,
            cache_chunks=cache_chunks if wanted else False,
        )
        if remote and not (where.url or "").startswith("memory://")
        else None
    )
    if cache is not None:
        store = HedgedStore(store, hedge_delay)
    return Location(where, store, cache, index_path, item_loader, hub)


def plan_cache_bytes(max_cache_size: int | float | str | None, cache: CacheSettings | None) -> int | None:
    """``max_cache_size`` in bytes for the multi-node shuffle's "does a node's shard fit" test (``read.plan._plan``).

    ``None`` (LitData: 75 % of the free disk) is no limit here, as before; a fraction is measured on the
    cache root, as the cache measures it.
    """
    if max_cache_size is None:
        return None
    directory = (cache.cache_dir if cache is not None else None) or default_cache_root()
    return parse_cache_size(max_cache_size, directory=directory)
