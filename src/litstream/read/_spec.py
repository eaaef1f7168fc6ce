"""``ReadSpec``: what to read and how, built and validated once, opened by every face of the reader.

``StreamingDataset``, :func:`litstream.astream` (of a path or of a dataset), the Combined / Parallel
wrappers (sync and ``.astream()``) all hold one :class:`ReadSpec` per dataset: the location and store,
the cache directory and byte budget, the item loader, serializers, encryption, the resolved
``allow_pickle``, ``index_path``, transforms, the selection (subset, split) and subsample, the shuffle
mode, seed, ``drop_last``, both shuffle windows and the prefetch depth. :meth:`ReadSpec.build` turns
LitData's keyword arguments into one (every check runs there); :meth:`ReadSpec.open` opens the
dataset (indexing an ``hf://`` Parquet dataset first when needed); :meth:`ReadSpec.plan_args` gives the
read plan of one reader; :meth:`ReadSpec.stream` the async stream of given pieces. A face keeps only
its own counters (epoch, batch size, workers) and resume state beside it.

The spec is frozen and picklable (it holds no client, portal or open file); a setter of a face
replaces it with :meth:`ReadSpec.replace`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError, ObjectNotFoundError
from ..format._encrypted import check_reader_encryption
from ..format._loaders import PyTreeLoader, TokensLoader
from ..format._version_log import index_digest
from ..format.arrow._parquet import ParquetLoader
from ._args import check_read_args, check_read_loader
from ._item_window import item_shuffle_window_value
from ._params import check_read_params
from ._transform import Transform, check_transforms, compose
from ._trust import check_allow_pickle, reader_pickle, resolve_allow_pickle
from .plan._assign import DEFAULT_ITEM_SHUFFLE_WINDOW
from .plan._compose import MemberSpec
from .plan._pieces import ReadPlanArgs, ShuffleMode
from .plan._subset import Selection, check_subsample, resolve_selection
from .plan._window import DEFAULT_SHUFFLE_WINDOW
from .source._index_load import read_index_bytes
from .source._location import plan_cache_bytes, resolve_location
from .source._source import DatasetSource
from .source._versions import VersionRef, check_version

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime

    from ..format._encryption import Encryption
    from ..format._serializers import Serializer
    from ..storage._resolver import Dir
    from ..storage._store import Store
    from .aio._sample_stream import SampleStream
    from .cache._source_cache import CacheSettings
    from .plan._pieces import Piece
    from .plan._session import StreamPosition

__all__ = ["Loader", "ReadSpec"]

Loader = PyTreeLoader | TokensLoader | ParquetLoader
"""The item loaders a reader accepts."""


@dataclass(frozen=True)
class ReadSpec:
    """Everything that decides what a reader serves and in which order (see the module docstring).

    Attributes:
        input_dir: The dataset's location as checkpoints record it (``input_dir_path`` / ``_url``).
        store: Where the chunks are read from (a ``HedgedStore`` over the remote store when cached).
        cache: The local chunk cache of a remote dataset (directory and byte budget), ``None`` when read in place.
        item_loader: ``PyTreeLoader()``, ``TokensLoader(block_size)`` or ``ParquetLoader()``.
        serializers: Extra serializers by registry key, or ``None``.
        encryption: The encryption the dataset was written with, or ``None``.
        allow_pickle: The resolved decision (``read._trust``).
        pickle_from_marker: ``True`` when only the dataset's location allowed pickles (no argument, global
            setting or environment value chose): the dataset's trust marker (``format/_trust_marker.py``)
            may still refuse them when its index is read.
        index_path: A local ``index.json`` used instead of the dataset's own, or ``None``.
        transforms: Applied to each decoded sample, in order.
        selection: The items served (a subset or split), or ``None``: the subsample of every chunk.
        subsample: LitData's ``subsample`` fraction (``> 0``).
        subsample_shuffle: Whether the subsample is a random choice (LitData uses the ``shuffle`` of ``__init__``).
        shuffle: A :data:`~litstream.read.engine._engine.ShuffleMode`, checked.
        seed: The shuffle seed.
        drop_last: ``None`` means ``world_size > 1``.
        shuffle_window: Chunks mixed with ``shuffle="window"``.
        item_shuffle_window: The resolved in-chunk shuffle block size of ``shuffle=True``.
        max_pre_download: Chunks fetched ahead.
        plan_cache_bytes: ``max_cache_size`` in bytes as the multi-node plan uses it (``None``: no limit).
        cache_chunks: Whether a remote dataset's chunks are written to the disk cache (``True``), read into
            memory as they arrive and never written (``False``), or cached when the cache may hold the whole
            dataset (``None``, the default; see ``StreamingDataset``).
        hub: ``(url, storage_options, item_loader as given)`` of an ``hf://`` location indexed on first
            :meth:`open`, else ``None``.
        version: The committed version read (``read/source/_versions.py``): ``None`` for the latest until the first
            :meth:`open`, after which a face pins the version it opened (:meth:`pinned`).
    """

    input_dir: Dir
    store: Store
    cache: CacheSettings | None = None
    item_loader: Loader = field(default_factory=PyTreeLoader)
    serializers: Mapping[str, Serializer] | None = None
    encryption: Encryption | None = None
    allow_pickle: bool = True
    pickle_from_marker: bool = False
    index_path: str | os.PathLike[str] | None = None
    transforms: tuple[Callable[[Any], Any], ...] = ()
    selection: Selection | None = None
    subsample: float = 1.0
    subsample_shuffle: bool = False
    shuffle: ShuffleMode = False
    seed: int = 42
    drop_last: bool | None = None
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW
    item_shuffle_window: int = DEFAULT_ITEM_SHUFFLE_WINDOW
    max_pre_download: int = 2
    plan_cache_bytes: int | None = None
    cache_chunks: bool | None = None
    hub: tuple[str, Mapping[str, Any] | None, Loader | None] | None = None
    version: VersionRef | None = None

    @classmethod
    def build(
        cls,
        input_dir: str | os.PathLike[str] | Dir | Store,
        *,
        shuffle: ShuffleMode = False,
        seed: int = 42,
        drop_last: bool | None = None,
        max_pre_download: int = 2,
        transform: Transform = None,
        serializers: Mapping[str, Serializer] | None = None,
        item_loader: Loader | None = None,
        shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
        storage_options: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_cache_size: int | float | str | None = None,
        hedge_delay: float | None = None,
        subsample: float = 1.0,
        index_path: str | os.PathLike[str] | None = None,
        encryption: Encryption | None = None,
        item_shuffle_window: int | str | None = None,
        allow_pickle: bool | None = None,
        eager: bool = True,
        cache_by_default: bool = True,
        cache_chunks: bool | None = None,
        version: int | datetime | str | None = None,
    ) -> ReadSpec:
        """Check LitData's read arguments and resolve them into a spec (see ``StreamingDataset`` for each).

        Args:
            eager: ``True`` (``StreamingDataset``): a local dataset must exist now and an ``hf://`` Parquet
                dataset is indexed now. ``False`` (``astream``): both happen on first :meth:`open`.
            cache_by_default: ``True`` (``StreamingDataset``): a remote dataset is cached on local disk.
                ``False`` (``astream``): only when ``cache_dir``, ``max_cache_size`` or ``cache_chunks=True``
                is given; chunks are read into memory otherwise.
            cache_chunks: ``None`` (default): as ``cache_by_default`` says, then only when the cache may hold
                the whole dataset; ``True``: always cached; ``False``: never (read into memory as they arrive).

        Raises:
            ConfigurationError: a bad argument, naming it.
            DatasetNotFoundError: with ``eager``, a local ``input_dir`` that holds no dataset.
        """
        check_read_params()
        item_shuffle_window_value(item_shuffle_window)
        check_read_args(shuffle, seed, drop_last, max_pre_download, shuffle_window)
        transforms = check_transforms(transform)
        fraction = check_subsample(subsample)
        check_read_loader(item_loader)
        check_reader_encryption(encryption)
        check_allow_pickle(allow_pickle)
        ref = check_version(version)
        if ref is not None and index_path is not None:
            raise ConfigurationError(
                f"version={version!r} with index_path={index_path!r}: an index kept apart from its data has no "
                "versions; pass one of the two"
            )
        place = resolve_location(
            input_dir, storage_options=storage_options, cache_dir=cache_dir, max_cache_size=max_cache_size,
            index_path=index_path, item_loader=item_loader, eager=eager, cache_by_default=cache_by_default,
            cache_chunks=cache_chunks, hedge_delay=hedge_delay,
        )  # fmt: skip
        where, cache = place.where, place.cache
        return cls(
            input_dir=where,
            store=place.store,
            cache=cache,
            item_loader=place.item_loader or PyTreeLoader(),
            serializers=dict(serializers) if serializers else None,
            encryption=encryption,
            allow_pickle=resolve_allow_pickle(allow_pickle, where.url or where.path),
            pickle_from_marker=reader_pickle(allow_pickle, where.url or where.path) is None,
            index_path=place.index_path,
            transforms=tuple(transforms),
            subsample=fraction,
            subsample_shuffle=shuffle is not False,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            shuffle_window=shuffle_window,
            item_shuffle_window=item_shuffle_window_value(item_shuffle_window),
            max_pre_download=max_pre_download,
            plan_cache_bytes=plan_cache_bytes(max_cache_size, cache),
            cache_chunks=cache_chunks,
            hub=place.hub,
            version=ref,
        )

    def replace(self, **changes: Any) -> ReadSpec:
        """A copy with ``changes``; ``shuffle``, ``seed``, ``drop_last`` and the prefetch are checked again.

        Raises:
            ConfigurationError: a bad value, naming it.
        """
        new = dataclasses.replace(self, **changes)
        check_read_args(new.shuffle, new.seed, new.drop_last, new.max_pre_download, new.shuffle_window)
        return new

    def derive(
        self, *, shuffle: ShuffleMode, shuffle_window: int, seed: int, drop_last: bool | None, max_pre_download: int,
        transforms: Sequence[Callable[[Any], Any]] = (), item_shuffle_window: int | str | None = None,
        item_loader: Loader | None = None, index_path: str | os.PathLike[str] | None = None,
        encryption: Encryption | None = None, serializers: Mapping[str, Serializer] | None = None,
        allow_pickle: bool | None = None, version: int | datetime | str | None = None,
    ) -> ReadSpec:  # fmt: skip
        """The spec of another reader of this spec's dataset (``astream(dataset)``): the order given anew, the
        ``transforms`` run after this spec's, and each other argument that is not ``None`` replacing this spec's;
        the location, store and cache stay this spec's. Every value is checked as :meth:`build` checks it.

        Raises:
            ConfigurationError: a bad argument, naming it.
        """
        check_read_args(shuffle, seed, drop_last, max_pre_download, shuffle_window)
        check_read_loader(item_loader)
        check_reader_encryption(encryption)
        changes: dict[str, Any] = {
            "shuffle": shuffle, "shuffle_window": shuffle_window, "seed": seed, "drop_last": drop_last,
            "max_pre_download": max_pre_download, "transforms": (*self.transforms, *transforms),
        }  # fmt: skip
        if item_shuffle_window is not None:
            check_read_params()
            changes["item_shuffle_window"] = item_shuffle_window_value(item_shuffle_window)
        given = {"item_loader": item_loader, "index_path": index_path, "encryption": encryption}
        changes.update(
            (name, value) for name, value in {**given, "serializers": serializers}.items() if value is not None
        )
        if check_allow_pickle(allow_pickle) is not None:
            changes["allow_pickle"] = resolve_allow_pickle(allow_pickle, self.store.url)
        if version is not None:
            changes["version"] = check_version(version)
        return self.replace(**changes)

    # -- opening ----------------------------------------------------------------------------------------
    async def open(self, index_bytes: bytes | None = None) -> DatasetSource:
        """Open the dataset: load its index (after indexing an ``hf://`` Parquet dataset) and prepare its decoder.

        Args:
            index_bytes: ``index.json`` as :meth:`pin_now_with_index` read it in this process: used, not read
                again, when it is the pinned version's. Default ``None``.

        Raises:
            DatasetNotFoundError, FormatError, ConfigurationError, EncryptionError, PickleRefusedError:
                as :meth:`DatasetSource.open`.
        """
        index_path, item_loader = self.index_path, self.item_loader
        if self.hub is not None and index_path is None:
            from ..index._hf import ahf_dataset_index

            url, options, given = self.hub
            cache_dir = None if self.cache is None else self.cache.cache_dir
            found, loader = await ahf_dataset_index(self.store, url, cache_dir, options, given)
            if found is not None:
                index_path, item_loader = found, loader or item_loader
        return await DatasetSource.open(
            self.store,
            self.serializers,
            self.cache,
            item_loader,
            index_path,
            self.pickle_choice,
            encryption=self.encryption,
            version=self.version if index_path is None else None,
            index_bytes=index_bytes if index_path is None else None,
        )

    def pin_now(self) -> ReadSpec:
        """This spec pinned to the latest committed version, read now (``index.json``'s digest), unless it names a
        version already or reads an index kept apart: what a dataset does when it is constructed and a loader
        before it starts its workers, so that every worker of every start method serves one version
        (``docs/versions.md``). A missing ``index.json`` pins nothing (opening then reports it)."""
        return self.pin_now_with_index()[0]

    def pin_now_with_index(self) -> tuple[ReadSpec, bytes | None]:
        """:meth:`pin_now`, and the ``index.json`` bytes it read (``None`` when it read none): the process that
        pinned opens the dataset from them (:meth:`open`'s ``index_bytes``) instead of reading them again."""
        if self.version is not None or self.index_path is not None or self.hub is not None:
            return self, None
        try:
            raw = read_index_bytes(self.store)
        except ObjectNotFoundError:
            return self, None  # opening reports the missing dataset, naming an interrupted run if there was one
        return dataclasses.replace(self, version=VersionRef(digest=index_digest(raw))), raw

    def pinned(self, source: DatasetSource) -> ReadSpec:
        """This spec pinned to the version ``source`` opened (itself when nothing is to pin): other processes of
        the same reader (DataLoader workers, a re-opened source) then serve that version, whatever was committed
        since (``docs/versions.md``)."""
        if source.digest is None or (self.version is not None and self.version.digest == source.digest):
            return self
        return dataclasses.replace(self, version=VersionRef(digest=source.digest))

    @property
    def pickle_choice(self) -> bool | None:
        """``allow_pickle`` as ``DatasetSource.open`` takes it: ``None`` while only the location allowed
        pickles (the dataset's trust marker then decides), else the resolved decision."""
        return None if self.pickle_from_marker and self.allow_pickle else self.allow_pickle

    def select(self, chunk_sizes: Sequence[int]) -> Selection | None:
        """The items served: the explicit selection, else the subsample of every chunk (``None``: all, once)."""
        return resolve_selection(
            chunk_sizes,
            explicit=self.selection,
            subsample=self.subsample,
            shuffle=self.subsample_shuffle,
            seed=self.seed,
        )

    # -- planning ---------------------------------------------------------------------------------------
    def resolved_drop_last(self, world_size: int) -> bool:
        """``drop_last`` for ``world_size`` ranks (``None``: ``True`` above one rank, as in LitData)."""
        return (world_size > 1) if self.drop_last is None else self.drop_last

    def plan_args(
        self,
        *,
        rank: int = 0,
        world_size: int = 1,
        worker: int = 0,
        num_workers: int = 1,
        batch_size: int = 1,
        epoch: int = 1,
        num_nodes: int = 1,
    ) -> ReadPlanArgs:
        """The read plan arguments of one reader: (rank, world, worker, workers, batch, epoch) and this spec."""
        return ReadPlanArgs(
            rank=rank,
            world_size=world_size,
            worker=worker,
            num_workers=num_workers,
            batch_size=batch_size,
            drop_last=self.resolved_drop_last(world_size),
            shuffle=self.shuffle,
            seed=self.seed,
            epoch=epoch,
            shuffle_window=self.shuffle_window,
            num_nodes=num_nodes,
            max_cache_size=self.plan_cache_bytes,
            item_shuffle_window=self.item_shuffle_window,
        )

    def member(self, chunk_sizes: Sequence[int]) -> MemberSpec:
        """What this dataset's plan depends on as a Combined / Parallel member (``read.plan._compose``)."""
        return MemberSpec(
            tuple(chunk_sizes),
            self.shuffle,
            self.seed,
            self.drop_last,
            self.shuffle_window,
            self.item_shuffle_window,
        )

    def config(self, drop_last: bool | None = None) -> dict[str, Any]:
        """The keys a checkpoint of this dataset must match (``read.plan._resume_config.check_config``), without the
        selection keys (those need the index). ``drop_last``: the value recorded, default the spec's."""
        return {
            "input_dir_path": self.input_dir.path,
            "input_dir_url": self.input_dir.url,
            "item_loader": self.item_loader.state_dict(),
            "drop_last": self.drop_last if drop_last is None else drop_last,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "shuffle_window": self.shuffle_window,
            "item_shuffle_window": self.item_shuffle_window,
        }

    @property
    def transform(self) -> Callable[[Any], Any] | None:
        """The transforms as one callable, or ``None`` when there are none."""
        return compose(list(self.transforms))

    def stream(
        self,
        plan: ReadPlanArgs | None = None,
        *,
        pieces: Sequence[Piece] | None = None,
        position: StreamPosition | None = None,
        select: Callable[[Sequence[int]], Selection | None] | None = None,
        max_pre_download: int | None = None,
    ) -> SampleStream:
        """The async stream of this dataset: ``plan``'s pieces (or the given ``pieces`` of a composite member).

        Args:
            plan: The reader (default: one reader, epoch 1).
            pieces: Serve these pieces instead of planning them (a Combined / Parallel member).
            position: The reader's checkpoint position (``astream``).
            select: The items served, when not :meth:`select` (``astream``'s own subsample on top).
            max_pre_download: Overrides the spec's prefetch depth.
        """
        from .aio._sample_stream import SampleStream

        return SampleStream(
            self,
            plan or self.plan_args(),
            pieces=pieces,
            position=position,
            select=select or self.select,
            max_pre_download=self.max_pre_download if max_pre_download is None else max_pre_download,
        )
