"""``StreamingRawDataset``: stream a folder or bucket of files that were never optimized.

A map-style dataset (``len``, ``ds[i]``, ``ds[a:b]``, ``__getitems__`` for torch's ``DataLoader``), an
iterable, and an async stream (``ds.astream()``). Configuration plus a portal: listing lives in
``index/_raw.py``, fetching in ``read/raw/_fetch.py`` and ``read/raw/_stream.py``; the checked arguments in
``_raw_args.py``, the store, items and disk folder in ``_raw_source.py``, the look-ahead of batches and
iterations in ``_raw_ahead.py``. torch is not imported.
"""

from __future__ import annotations

import operator
import os
from typing import TYPE_CHECKING, Any, Literal

from .._core._errors import ConfigurationError
from .._core._litdata_env import warn_ignored
from ..index._raw import FileMetadata, index_cache_dir
from ..index._raw_indexer import BaseIndexer, FileIndexer, build_or_load_index
from ..read._raw_sampler import RawBatchSampler
from ..read._spec import ReadSpec
from ..read.raw._fetch import FetchConfig, FetchStatistics, RawFetcher
from ..read.raw._stream import RawReader, RawStream, epoch_order
from ..storage._cache_dirs import default_cache_root
from ._raw_ahead import ahead_windows, get_batch, iter_windows
from ._raw_args import as_indexer, count, seconds
from ._raw_source import checked_items, disk_files, fetch_store

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from torch.utils.data import Dataset

    from ..read.raw._cache_view import RawCacheManager
    from ..read.raw._files import RawFiles
    from ..read.raw._stream import RawItem
    from ..storage._resolver import Dir

    _Base = Dataset[Any]  # for type checkers: a map-style torch Dataset (torch is not imported at run time)
else:
    _Base = object

__all__ = ["BaseIndexer", "FileIndexer", "FileMetadata", "StreamingRawDataset"]

MiB = 1024 * 1024


class StreamingRawDataset(_Base):
    """Stream the files under ``input_dir`` as they are: each item is one file's bytes.

    The files are listed once (in the process that makes the dataset, before DataLoader workers start) and
    the list is kept as LitData's ``index.json.zstd`` under the cache folder and next to the data (LitData's
    places; a location that refuses the write gets a ``UserWarning``), so later runs, other machines and
    every worker reuse it. Items are sorted by path (LitData keeps its listing's order). Use with a plain
    ``torch.utils.data.DataLoader`` (any ``shuffle``, ``num_workers``, fork or spawn): the loader asks for a
    whole batch at once (``__getitems__``), fetched concurrently, and the next batches of this worker are
    prefetched meanwhile: after consecutive indices, or with any order when the loader's
    ``batch_sampler`` is :meth:`batch_sampler`. Every start method works, also after the parent read
    (forked workers rebuild their clients); the constructor starts no process.

    Override :meth:`setup` to group or filter files: an item that is a list of files yields a list of bytes
    (or paths). Pass a :class:`BaseIndexer` subclass as ``indexer`` to choose the files yourself.

    Args:
        input_dir: A local folder, or ``s3://``, ``gs://``, ``azure://``, ``hf://datasets/org/name/dir`` or
            another URL :func:`~litstream.walk` can list.
        cache_dir: Root of the index cache (default: litstream's cache root, see ``StreamingDataset``); the
            index goes to ``<cache_dir>/<md5(input_dir)>/index.json.zstd``, LitData's layout.
        indexer: What lists the files: a :class:`FileIndexer` (default ``FileIndexer()``), a
            :class:`BaseIndexer` subclass, or LitData's ``FileIndexer`` (translated).
        storage_options: Credentials and client options for object stores; ``hf://`` honours
            ``HF_TOKEN``.
        cache_files: Keep each fetched remote file at ``<cache_dir>/<md5(input_dir)>/<its relative path>``
            and read it from there next time (while its length matches the listing). Default ``False``. A
            local ``input_dir`` is read in place (nothing is copied).
        recompute_index: List the files again even when an index exists.
        transform: Applied to each item (``bytes`` or a ``str`` path, or a list of them for a group) in the
            reading thread.
        max_concurrent_downloads: Requests in flight per process; ``None`` (default) adapts it (grows while
            throughput grows, halves on errors and throttling).
        max_prefetch: Items fetched ahead after a batch of consecutive indices or of a
            :meth:`batch_sampler` (default 16; at least the next two batches of this worker, so requests
            keep flowing while a batch is consumed), and in an iteration or ``astream`` (at least 128);
            ``0`` turns look-ahead off.
        prefetch_cache_size: The most prefetched items held (default ``2 * max_prefetch``, at least three
            batches when prefetching).
        item_type: ``"bytes"`` (default) or ``"path"``: items are local file paths (``str``), the kept copy
            of a remote file or a local file itself; needs ``cache_files=True`` (as in LitData).
        hedge_delay: Seconds after which a slow request for a remote file below 8 MiB is sent again (the
            delay is at least the observed p95 latency); ``0`` (default) turns hedging off.
        download_timeout: The deadline of one request in seconds (at least ``3 * size / 25 MiB/s``); an
            expired request is retried. Default 120; ``0`` turns deadlines off.
        range_parallel_threshold: Remote files of at least this many bytes are read as parallel ranges;
            ``0`` (default) never.
        range_chunk_size: Bytes per range part. Default 8 MiB.

    Raises:
        ConfigurationError: a bad argument, no file under ``input_dir``, or a custom indexer returned
            something else than files below ``input_dir``.
        StorageError: the listing failed.
    """

    def __init__(
        self,
        input_dir: str | os.PathLike[str] | Dir,
        cache_dir: str | os.PathLike[str] | None = None,
        indexer: BaseIndexer | None = None,
        storage_options: dict[str, Any] | None = None,
        cache_files: bool = False,
        recompute_index: bool = False,
        transform: Callable[[Any], Any] | None = None,
        max_concurrent_downloads: int | None = None,
        max_prefetch: int = 16,
        prefetch_cache_size: int | None = None,
        item_type: Literal["bytes", "path"] = "bytes",
        hedge_delay: float = 0.0,
        download_timeout: float = 120.0,
        range_parallel_threshold: int = 0,
        range_chunk_size: int = 8 * MiB,
    ) -> None:
        warn_ignored()  # LITDATA_* variables litstream does not read
        if item_type not in ("bytes", "path"):
            raise ConfigurationError(f"item_type={item_type!r}: use 'bytes' or 'path'")
        if item_type == "path" and not cache_files:
            raise ConfigurationError("item_type='path' requires cache_files=True")
        if transform is not None and not callable(transform):
            raise ConfigurationError(f"transform={transform!r}: use a callable or None")
        indexer = as_indexer(indexer)
        if max_concurrent_downloads is not None:
            count("max_concurrent_downloads", max_concurrent_downloads)
        self.max_prefetch = count("max_prefetch", max_prefetch)
        if prefetch_cache_size is None:
            prefetch_cache_size = 2 * self.max_prefetch
        self.prefetch_cache_size = count("prefetch_cache_size", prefetch_cache_size)
        self.config = FetchConfig(
            max_concurrent_downloads=max_concurrent_downloads,
            hedge_delay=seconds("hedge_delay", hedge_delay),
            download_timeout=seconds("download_timeout", download_timeout),
            range_parallel_threshold=count("range_parallel_threshold", range_parallel_threshold),
            range_chunk_size=count("range_chunk_size", range_chunk_size, 1),
        )
        self.transform = transform
        self.item_type = item_type
        self.cache_files = cache_files
        self.storage_options = dict(storage_options or {})
        self.indexer = indexer

        # Where and with which options and transform: the read spec every face opens (read/_spec.py); the
        # files are listed and fetched by the raw engine, which keeps its own cache and hedging (below).
        spec = ReadSpec.build(
            input_dir, storage_options=self.storage_options, transform=transform, eager=False, cache_by_default=False
        )
        self._spec = spec
        resolved = self.input_dir = spec.input_dir
        self._root = resolved.url.rstrip("/") if resolved.url is not None else str(resolved.path)
        store = fetch_store(spec)
        root_cache = cache_dir if cache_dir is not None else default_cache_root()
        folder = index_cache_dir(root_cache, self._root)
        self.cache_dir = str(folder)
        scheme = self._root.split("://", 1)[0] if resolved.url is not None else ""
        self.files: list[FileMetadata] = build_or_load_index(
            self.indexer,
            store,
            self._root,
            folder,
            recompute=recompute_index,
            storage_options=storage_options,
            remote=resolved.url is not None,
            upload=scheme not in ("hf", "http", "https"),  # read-only locations
        )
        self._disk: RawFiles | None = disk_files(store, folder, as_path=item_type == "path", cache_files=cache_files)
        self.items: list[RawItem] = checked_items(self.setup(self.files), self._root)
        self._fetcher = RawFetcher(store, self.config, remote=resolved.url is not None)
        self._reader = RawReader(self._fetcher, self._root, self.items, self.prefetch_cache_size, self._disk)
        self._pid = os.getpid()

    @property
    def cache_manager(self) -> RawCacheManager:
        """LitData's ``cache_manager``: the dataset's cache folder and file mapping (``read.raw._cache_view``)."""
        from ..read.raw._cache_view import RawCacheManager

        return RawCacheManager(self.input_dir, self.cache_dir, bool(self.cache_files), dict(self.storage_options))

    def setup(self, files: list[FileMetadata]) -> list[FileMetadata] | list[list[FileMetadata]]:
        """Arrange the listed files into items (override point; default: one item per file).

        Args:
            files: Every listed file, sorted by path.

        Returns:
            A list of :class:`FileMetadata` (one file per item) or of lists of them (a group per item).
        """
        return files

    def __len__(self) -> int:
        return len(self.items)

    def _fresh(self) -> RawReader:
        if self._pid != os.getpid():  # a forked DataLoader worker: drop the parent's loop-bound state
            self._fetcher = RawFetcher(self._fetcher.store, self.config, remote=self._fetcher.remote)
            self._reader = RawReader(self._fetcher, self._root, self.items, self.prefetch_cache_size, self._disk)
            self._pid = os.getpid()
        return self._reader

    def _apply(self, values: list[Any]) -> list[Any]:
        if self.transform is None:
            return values
        return [self.transform(v) for v in values]

    def _check(self, index: int) -> int:
        if isinstance(index, bool):
            raise TypeError("dataset indices must be ints or slices, not bool")
        index = operator.index(index)
        if not 0 <= index < len(self.items):
            raise IndexError(f"Index {index} out of range for dataset with length {len(self.items)}")
        return index

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """Items ``indices``, fetched concurrently (torch's ``DataLoader`` calls this with a whole batch).

        After a batch of consecutive indices, this worker's next batch (``first + num_workers * len``)
        is prefetched in the background.
        """
        wanted = [self._check(i) for i in indices]
        values = get_batch(self._fresh(), indices, wanted, max_prefetch=self.max_prefetch,
                           cache_size=self.prefetch_cache_size, total=len(self.items))  # fmt: skip
        return self._apply(values)

    def batch_sampler(
        self, batch_size: int, *, shuffle: bool = False, seed: int = 42, drop_last: bool = False
    ) -> RawBatchSampler:
        """A batch sampler for ``DataLoader(ds, batch_sampler=...)`` whose order this dataset sees ahead.

        With it, each worker (or the main process) fetches its next two batches while it serves one, also
        when ``shuffle=True`` (a plain ``DataLoader(shuffle=True)`` gives no way to know the next batch).
        Call ``set_epoch(epoch)`` on it before each epoch for a new order.

        Args:
            batch_size: Items per batch (>= 1).
            shuffle: Draw the order from ``(seed, epoch)``; ``False``: index order.
            seed: The shuffle seed.
            drop_last: Leave out the last, shorter batch.

        Raises:
            ConfigurationError: ``batch_size`` is not an int >= 1.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size={batch_size!r}: use an int >= 1")
        return RawBatchSampler(len(self.items), batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last)

    def __getitem__(self, index: int | slice) -> Any:
        """Item ``index`` (a file's bytes, transformed), or a list of items for a slice.

        Raises:
            IndexError: ``index`` is outside ``[0, len)`` (negative indices too, as in LitData).
        """
        if isinstance(index, slice):
            return self.__getitems__(range(*index.indices(len(self.items))))
        return self.__getitems__([index])[0]

    def __iter__(self) -> Iterator[Any]:
        """Every item in index order, fetched 32 items at a time (``_raw_ahead.WINDOW``).

        While a window is served, the next ``max(max_prefetch, 128)`` items (at most 256 MiB of them beyond
        the next window) are already being fetched; ``max_prefetch=0`` turns that off.
        """
        for values in iter_windows(self._fresh(), len(self.items), self.max_prefetch):
            yield from self._apply(values)

    def astream(
        self,
        *,
        indices: Sequence[int] | None = None,
        shuffle: bool = False,
        seed: int = 42,
        epoch: int = 1,
        window: int = 64,
    ) -> RawStream:
        """The async form: ``async for item in ds.astream()`` or ``async with ds.astream() as items``.

        Runs on the caller's event loop (asyncio or trio), no portal. Items come ``window`` at a time
        (fetched concurrently; under ``async with`` the next ``max(max_prefetch, 128)`` items, at most
        256 MiB beyond the next window, are fetched while one window is consumed), transformed in a worker
        thread.

        Args:
            indices: The items to yield, in order (default: all).
            shuffle: Yield every item in an order drawn from ``(seed, epoch)`` (ignored with ``indices``).
            seed: The shuffle seed.
            epoch: The epoch (a new order per epoch).
            window: Items fetched together (>= 1).
        """
        order = list(indices) if indices is not None else epoch_order(len(self.items), shuffle, seed, epoch)
        for i in order:
            self._check(i)
        window = count("window", window, 1)
        return RawStream(self._fresh(), order, window, self.transform, ahead=ahead_windows(self.max_prefetch, window))

    def statistics(self) -> FetchStatistics:
        """The fetch engine's counters in this process (in flight, bytes, retries, hedges won, ...)."""
        return self._fetcher.statistics()

    def __repr__(self) -> str:
        return f"StreamingRawDataset({self._root!r}, files={len(self.files)}, items={len(self.items)})"
