"""``Cache``: LitData's older write-then-read API (``cache[i] = sample``, ``done()``, ``merge()``, ``cache[i]``).

A thin facade over the engine, not a second one: writes go through :class:`~litstream.ChunkWriter` (one
writer per ``Cache`` and process, kept open on a private event loop between item assignments) and
:func:`~litstream.write._merge.merge_index`; reads go through a :class:`~litstream.StreamingDataset`
over the same directory. The files are LitData's: ``chunk-{rank}-{n}.bin``, ``{rank}.index.json``, then
``index.json`` after :meth:`Cache.merge`.

Items are written in index order: an assigned index waits in memory until every index before it
(down to the first one assigned) has arrived, as LitData's ``BinaryWriter`` waits, so the chunks of
one rank hold consecutive indices whatever order a sampler assigns them in.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from .._core import _bridge
from .._core._errors import ConfigurationError, DatasetNotFoundError
from ..format._index import INDEX_FILENAME, is_partial_index_name
from ._cache_writer import WriteSession

if TYPE_CHECKING:
    from ..format._encryption import Encryption
    from ..format._serializers import Serializer
    from ..read._spec import ReadSpec
    from ..read.source._source import DatasetSource
    from ..storage._resolver import Dir

__all__ = ["Cache", "dataset_cache"]

_POLL_S = 0.01  # how often merge() looks for the other ranks' files (LitData polls as often)


class Cache:
    """Write samples by index into a LitData dataset, and read them back, as LitData's ``Cache``.

    Writing: ``cache[i] = sample`` for each index, then ``cache.done()`` (closes this rank's last chunk and
    writes ``{rank}.index.json``), then ``cache.merge(num_workers)`` (rank 0 waits for every rank's partial
    index and writes ``index.json``; the other ranks wait for it). Reading: ``cache[i]`` and ``len(cache)``
    once ``index.json`` exists.

    Args:
        input_dir: The dataset directory (a path or a ``Dir`` whose ``path`` is local; a ``Dir`` that also
            has a ``url`` reads that remote dataset through ``path`` as its cache).
        subsampled_files: LitData's subset of chunk files; only ``None`` (all chunks) is supported.
        region_of_interest: LitData's per-chunk item ranges; only ``None`` is supported.
        compression: ``None``, ``"zstd"`` or ``"zstd:N"``.
        compression_level: ``"batch"`` (default with ``compression``, as LitData's ``Cache``: zstd frames
            inside ``.bin`` files), ``"chunk"`` (whole-file ``.zstd.bin``) or ``"sample"``; token datasets
            use ``"chunk"``.
        compression_batch_size: Items per zstd frame for ``"batch"`` (default 256).
        encryption: A ``FernetEncryption`` / ``RSAEncryption``, used to write and to read.
        chunk_size: Items per chunk. Exactly one of ``chunk_size`` and ``chunk_bytes`` is needed to write.
        chunk_bytes: Payload bytes per chunk (an int, or a string like ``"64MB"``).
        item_loader: ``PyTreeLoader()`` (default) or ``TokensLoader(block_size=B)``; reads then count windows.
        max_cache_size: Cache budget for a remote ``url`` (bytes, ``"50GB"``, or a fraction of free disk).
        serializers: Extra serializers by registry key.
        writer_chunk_index: The number of this rank's first chunk (default 0).
        storage_options: Options for the remote ``url``'s store.
        session_options: Only ``None`` / ``{}`` (credentials go in ``storage_options``).
        max_pre_download: Chunks fetched ahead when reading (>= 1, default 2).
        msg_queue: Accepted for LitData's signature; litstream sends no progress messages (no effect).
        on_demand_bytes: Accepted for LitData's signature; remote reads are always ranged (no effect).

    Raises:
        ConfigurationError: ``input_dir`` has no local path, or an unsupported argument value.
    """

    def __init__(
        self,
        input_dir: str | Dir | None,
        subsampled_files: list[str] | None = None,
        region_of_interest: list[tuple[int, int]] | None = None,
        compression: str | None = None,
        compression_level: str | None = None,
        compression_batch_size: int | None = None,
        encryption: Encryption | None = None,
        chunk_size: int | None = None,
        chunk_bytes: int | str | None = None,
        item_loader: Any = None,
        max_cache_size: int | float | str | None = None,
        serializers: dict[str, Serializer] | None = None,
        writer_chunk_index: int | None = None,
        storage_options: dict[str, Any] | None = None,
        session_options: dict[str, Any] | None = None,
        max_pre_download: int = 2,
        msg_queue: Any = None,
        on_demand_bytes: bool = False,
    ) -> None:
        from ..storage._resolver import resolve_dir

        resolved = resolve_dir(input_dir)
        if resolved.path is None:
            raise ConfigurationError(
                f"Cache(input_dir={input_dir!r}) needs a local directory to write to: pass a path, or "
                "Dir(path=LOCAL_DIR, url=URL) to read a remote dataset through LOCAL_DIR"
            )
        for name, value in (("subsampled_files", subsampled_files), ("region_of_interest", region_of_interest)):
            if value is not None:
                raise ConfigurationError(
                    f"Cache({name}=...) is not supported: pass None and read a subset with "
                    "litstream.train_test_split or StreamingDataset(subsample=...)"
                )
        if session_options:
            raise ConfigurationError("Cache(session_options=...): put credentials in storage_options instead")
        self._dir = resolved
        self._write_args: dict[str, Any] = {
            "chunk_size": chunk_size,
            "chunk_bytes": chunk_bytes,
            "compression": compression,
            # LitData's writer frames zstd inside ``.bin`` files ("batch") when no level is given.
            "compression_level": compression_level or _default_level(compression, item_loader),
            "compression_batch_size": compression_batch_size,
            "encryption": encryption,
            "serializers": serializers,
            "item_loader": item_loader,
            "start_chunk": writer_chunk_index or 0,
        }
        self._read_args: dict[str, Any] = {
            "encryption": encryption,
            "serializers": serializers,
            "item_loader": item_loader,
            "max_cache_size": max_cache_size,
            "storage_options": storage_options,
            "max_pre_download": max_pre_download,
        }
        self._rank: int | None = None
        self._session: WriteSession | None = None
        self._is_done = False
        self._source: DatasetSource | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_session"] = None  # an open writer belongs to the process that started it
        state["_source"] = None
        return state

    # -- LitData's properties ---------------------------------------------------------------------
    @property
    def rank(self) -> int:
        """This writer's rank: ``global_rank * num_workers + worker_id`` (DataLoader worker), as in LitData."""
        if self._rank is None:
            from .._core._distributed import detect_distributed, detect_worker

            worker = detect_worker()
            self._rank = detect_distributed().rank * worker.num_workers + worker.worker
        return self._rank

    @property
    def cache_dir(self) -> str:
        """The local directory the chunks are written to (and read from)."""
        assert self._dir.path is not None  # checked in __init__
        return self._dir.path

    @property
    def checkpoint_dir(self) -> str:
        """``<cache_dir>/checkpoints``, created on first access (LitData's)."""
        path = os.path.join(self.cache_dir, "checkpoints")
        os.makedirs(path, exist_ok=True)
        return path

    @property
    def filled(self) -> bool:
        """Whether ``index.json`` exists: the dataset is complete and readable."""
        if not self._is_done:
            self._is_done = os.path.exists(os.path.join(self.cache_dir, INDEX_FILENAME))
        return self._is_done

    # -- writing ----------------------------------------------------------------------------------
    def __setitem__(self, index: int, sample: Any) -> None:
        """Add ``sample`` as item ``index`` of this rank (written in index order, see the module docstring).

        Raises:
            ConfigurationError: ``index`` is not an int >= 0, or it was already assigned.
            FormatError: ``sample`` cannot be encoded, or its structure differs from the first sample's.
        """
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ConfigurationError(f"cache[{index!r}] = ...: the index must be an int >= 0")
        if self._session is None:
            self._session = WriteSession(self.cache_dir, self.rank, self._write_args)
        self._session.add(index, sample)

    def done(self) -> list[str]:
        """Write this rank's remaining items as chunks and its ``{rank}.index.json``.

        Returns:
            The paths of the chunk files this rank wrote (empty when nothing was assigned, or when
            ``index.json`` already exists).

        Raises:
            FormatError: a sample could not be written.
        """
        if self._session is None or self.filled:
            return []
        session, self._session = self._session, None
        return [os.path.join(self.cache_dir, name) for name in session.finish() if not name.endswith(".json")]

    def merge(self, num_workers: int = 1, node_rank: int | None = None) -> None:
        """Merge every rank's partial index into ``index.json`` (rank 0), or wait until it exists (others).

        Rank 0 waits until ``world_size * num_workers`` partial indexes are present, as LitData does.

        Args:
            num_workers: DataLoader workers per process that wrote (0 counts as 1).
            node_rank: Write the merged index as ``{node_rank}-index.json`` instead (a node's share of a
                multi-node job, merged later by the last node).
        """
        from .._core._distributed import detect_distributed

        index_path = os.path.join(self.cache_dir, INDEX_FILENAME)
        if self.rank != 0:
            while not os.path.exists(index_path):
                time.sleep(_POLL_S)
            return
        expected = detect_distributed().world_size * (num_workers or 1)
        while not os.path.exists(index_path):
            names = os.listdir(self.cache_dir)
            if sum(is_partial_index_name(n, include_node_partials=False) for n in names) >= expected:
                break
            time.sleep(_POLL_S)
        if os.path.exists(index_path):
            return
        _merge(self.cache_dir, node_rank)

    # -- reading ----------------------------------------------------------------------------------
    def _reader(self) -> DatasetSource:
        if self._source is None:
            from ..read._spec import ReadSpec

            if self._dir.url is None and not self.filled:
                raise DatasetNotFoundError(
                    f"Cache({self.cache_dir!r}) holds no {INDEX_FILENAME} yet: call done() and merge() after "
                    "writing, before reading"
                )
            spec = ReadSpec.build(self._dir if self._dir.url else self.cache_dir, **self._read_args)
            self._source = _bridge.call(spec.open)
        return self._source

    def __getitem__(self, index: int) -> Any:
        """Item ``index`` (0-based, in ``index.json`` order; negative counts from the end) of the merged dataset.

        Raises:
            DatasetNotFoundError: ``index.json`` does not exist yet.
            IndexError: ``index`` is out of range.
        """
        source = self._reader()
        total = len(source)
        position = index + total if index < 0 else index
        if not 0 <= position < total:
            raise IndexError(f"index {index} is out of range for a dataset of {total} items")
        return _bridge.call(source.get_item, position)

    def __len__(self) -> int:
        """Items in the merged dataset (token windows with ``TokensLoader``)."""
        return len(self._reader())


def _default_level(compression: str | None, item_loader: Any) -> str | None:
    from ..format._loaders import TokensLoader

    if compression is None or isinstance(item_loader, TokensLoader):
        return None
    return "batch"


def dataset_cache(spec: ReadSpec, source: DatasetSource) -> Cache:
    """A :class:`Cache` over the local directory a dataset of ``spec`` reads from, for LitData's ``ds.cache``.

    The directory is the dataset itself when it is local, else its folder in the chunk cache
    (``<cache root>/<md5 of the URL>/<updated_at>``, LitData's layout), read through from the URL.
    """
    from ..storage._files import local_path
    from ..storage._resolver import Dir

    if source.cache is not None:
        directory = Dir(path=str(source.cache.directory), url=spec.input_dir.url)
    elif source.fetcher is not None and spec.cache is not None:  # cache_chunks=False: where the cache would be
        from pathlib import Path

        from ..storage._cache_dirs import dataset_cache_dir, default_cache_root

        cache_root = Path(spec.cache.cache_dir) if spec.cache.cache_dir else default_cache_root()
        where = dataset_cache_dir(cache_root, spec.store.url, source.index.updated_at)
        directory = Dir(path=str(where), url=spec.input_dir.url)
    else:
        root = local_path(spec.store, "")
        directory = Dir(path=str(root) if root is not None else spec.input_dir.path)
    return Cache(
        directory,
        encryption=spec.encryption,
        item_loader=spec.item_loader,
        serializers=dict(spec.serializers) if spec.serializers else None,
        max_cache_size=None if spec.cache is None else spec.cache.max_cache_size,
    )


def _merge(cache_dir: str, node_rank: int | None) -> None:
    from .._core._bridge import run_sync
    from ..format._index import Index, merge_partial_indexes
    from ..storage._local import LocalFileStore
    from ..write._merge import merge_index

    store = LocalFileStore(cache_dir)
    if node_rank is None:
        run_sync(merge_index, store)
        return

    async def merge_node() -> None:  # ranks' partials only, into this node's ``{node_rank}-index.json``
        names = sorted(
            (m.path for m in await store.list() if is_partial_index_name(m.path, include_node_partials=False)),
        )
        partials = [(n, Index.from_json(await store.get(n), source=n)) for n in names]
        merged = merge_partial_indexes(partials)
        await store.put(f"{node_rank}-{INDEX_FILENAME}", merged.to_json().encode())
        for name in names:
            await store.delete(name)

    run_sync(merge_node)
